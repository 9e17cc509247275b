/**
 * motion-2.0, motion-2.0-fast, motion-1.5-pro: video from text, or from images, video and
 * audio materials (spec 4.3).
 */
import { Duration, Either, Schema } from "effect"
import type { ValidationError } from "../domain/Errors.js"
import type { Adjustment, UpstreamJob } from "../domain/Task.js"
import { adjusted, draft, extras } from "./Draft.js"
import { decodeInput, Flag, HttpUrl, intBetween, intOneOf, invalid, MediaUrls, mediaUrlsOf, oneOf, Prompt } from "./Fields.js"
import type { Material, MaterialRules, MaterialType, ModelSpec, Normalized } from "./ModelSpec.js"
import { lookup } from "./Pricing.js"
import { videoSize } from "./Sizes.js"

export type Tier = "motion-2.0" | "motion-2.0-fast" | "motion-1.5-pro"
export type { Material, MaterialType }

/** File extensions per material type (spec: material types). */
export const extensions: Readonly<Record<MaterialType, ReadonlyArray<string>>> = {
  image: [".jpg", ".jpeg", ".png", ".webp", ".gif", ".bmp"],
  video: [".mp4", ".mov", ".m4v"],
  audio: [".mp3", ".wav"]
}

/** The material type of a URL, from the extension of its path; undefined when the URL does not tell. */
export const materialType = (url: string): MaterialType | undefined => {
  const path = new URL(url).pathname.toLowerCase()
  return (Object.keys(extensions) as Array<MaterialType>).find((type) => extensions[type].some((ext) => path.endsWith(ext)))
}

/** The materials of a request, typed from their URLs where the URL tells. */
export const materialsOf = (urls: ReadonlyArray<string>): ReadonlyArray<Material> =>
  urls.map((url) => ({ url, type: materialType(url) ?? "unknown" }))

/**
 * The first rule the materials break, or undefined: the spec's mediaUrls rules in the
 * spec's order (1 to 12 URLs; at most 9 images), then motion-1.5-pro's own (images only,
 * at most 2). A broken rule fails the task with INVALID_PARAMETERS, for every count alike.
 * Unknown materials count toward the 12 but not toward the 9 images until they are typed;
 * on motion-1.5-pro every material must be an image, so more than 2 of any type fail.
 * The spec's 15 s totals of video and of audio need the files: `materialRules` applies them,
 * and this again, with the types the files show (MediaUpstream, in the media package, probes them).
 * Pure, so the step that types unknown materials can apply it again.
 */
export const rejectionOf = (tier: Tier, field: string, materials: ReadonlyArray<Material>): string | undefined => {
  const images = materials.filter((m) => m.type === "image").length
  if (materials.length < 1 || materials.length > 12) return `${field} must contain between 1 and 12 URLs`
  if (images > 9) return `${field} may contain at most 9 images`
  if (tier !== "motion-1.5-pro") return undefined
  const other = materials.findIndex((m) => m.type === "video" || m.type === "audio")
  if (other >= 0) return `${field}[${other}] is ${materials[other]!.type === "audio" ? "an audio" : "a video"} material; motion-1.5-pro accepts images only`
  if (materials.length > 2) return `${field} may contain at most 2 images for motion-1.5-pro`
  return undefined
}

/**
 * The mode the materials select (spec: mode by material content). On motion-2.0 and
 * motion-2.0-fast an unknown material may be an image, a video or audio, so without a known
 * video or audio the mode is "undetermined" until the materials are typed. motion-1.5-pro
 * takes images only: an unknown material there either is an image or fails the task.
 */
export const modeOf = (tier: Tier, materials: ReadonlyArray<Material>): string => {
  if (materials.length === 0) return "text-to-video"
  if (materials.some((m) => m.type === "video" || m.type === "audio")) return "multimodal-reference"
  if (tier !== "motion-1.5-pro" && materials.some((m) => m.type === "unknown")) return "undetermined"
  return materials.length === 1 ? "first-frame" : materials.length === 2 ? "first-last-frame" : "multi-image-reference"
}

/**
 * Why a motion-2.0 or motion-2.0-fast request never falls back, or undefined when it may:
 * the spec's multimodal requests (video or audio, more than 2 images, @ references), and
 * requests with unknown materials, which may be video or audio.
 */
export const noFallbackReason = (prompt: string, materials: ReadonlyArray<Material>): string | undefined => {
  const images = materials.filter((m) => m.type === "image").length
  if (materials.some((m) => m.type === "video" || m.type === "audio") || images > 2 || hasReferences(prompt)) {
    return "multimodal requests (video or audio, more than 2 images, @ references) never fall back"
  }
  if (materials.some((m) => m.type === "unknown")) {
    return "materials whose type the URL does not tell may be video or audio, which never fall back"
  }
  return undefined
}

/**
 * A reference to a material by position: `@1`, `@图1`, `@image1` (any case), as a whole
 * token. The neighbours are checked against ASCII letters and digits only, so Chinese
 * prompts, which have no spaces, still reference (`参考@图1跳舞`), while an e-mail address
 * (`bob@1mail.com`), `@1abc` or a number (`@1.5x`) does not.
 */
const reference = /(?<![A-Za-z0-9_])@(?:image|图)?[1-9]\d*(?![A-Za-z0-9_]|[.,-][A-Za-z0-9])/i

/** Whether the prompt references materials by position (spec: @1, @图1, @image1). */
export const hasReferences = (prompt: string): boolean => reference.test(prompt)

/** Seconds as messages show them: 15.2 s. */
const seconds = (value: number) => `${Math.round(value * 10) / 10} s`

/**
 * The rules on a job's materials that need their files: the spec's in its order (at most 9
 * images, total video at most 15 s, total audio at most 15 s), then `rejectionOf` with each
 * file's type; a job that keeps them has its mode and images from those types.
 */
export const materialRules = (tier: Tier): MaterialRules => {
  // imageUrls is accepted as another name for mediaUrls; messages use the spec's name.
  const field = "mediaUrls"
  return {
    field,
    maxSeconds: 15,
    of: (job) => {
      const materials = job.params["materials"]
      return Array.isArray(materials) ? (materials as ReadonlyArray<Material>) : []
    },
    check: (job, files, maxSeconds) => {
      const images = files.filter((file) => file.type === "image").length
      if (images > 9) return Either.left(`input.${field} may contain at most 9 images (it has ${images})`)
      for (const kind of ["video", "audio"] as const) {
        const total = files.filter((file) => file.type === kind).reduce((sum, file) => sum + (file.durationSeconds ?? 0), 0)
        if (total > maxSeconds) return Either.left(`input.${field}: the ${kind} materials last ${seconds(total)} in all; at most ${maxSeconds} s`)
      }
      const typed: ReadonlyArray<Material> = files.map((file) => ({ url: file.url, type: file.type }))
      const rejection = rejectionOf(tier, `input.${field}`, typed)
      if (rejection !== undefined) return Either.left(rejection)
      return Either.right({
        ...job,
        mode: modeOf(tier, typed),
        imageUrls: typed.filter((material) => material.type === "image").map((material) => material.url),
        params: { ...job.params, materials: typed }
      })
    }
  }
}

const known = ["prompt", "mediaUrls", "imageUrls", "ratio", "resolution", "duration", "fallback"]

const schemaOf = (tier: Tier) =>
  Schema.Struct({
    prompt: Prompt,
    mediaUrls: Schema.optional(Schema.Array(HttpUrl).annotations({ [MediaUrls]: true, message: () => "must be an array of URLs", description: "1 to 12 material URLs: images, videos, audio." })),
    imageUrls: Schema.optional(Schema.Array(HttpUrl).annotations({ [MediaUrls]: true, message: () => "must be an array of URLs", description: "Accepted as another name for mediaUrls." })),
    ratio: Schema.optional(oneOf(["1:1", "4:3", "3:4", "16:9", "9:16"], "Default 16:9.")),
    resolution: Schema.optional(oneOf(["480p", "720p", "1080p"], "Default 720p.")),
    duration: Schema.optional(
      tier === "motion-1.5-pro" ? intOneOf([5, 10], "Seconds: 5 or 10. Default 5.") : intBetween(4, 15, "Seconds: 4 to 15. Default 5.")
    ),
    fallback: Schema.optional(Flag("Default true: on failure, retry on motion-1.5-pro. Ignored by motion-1.5-pro."))
  })
type Decoded = Schema.Schema.Type<ReturnType<typeof schemaOf>> & Record<string, unknown>

const normalize = (tier: Tier) => {
  const schema = schemaOf(tier)
  return (input: unknown): Either.Either<Normalized, ValidationError> =>
    Either.gen(function*() {
      const raw = typeof input === "object" && input !== null ? (input as Record<string, unknown>) : {}
      const textOnly = raw["mediaUrls"] === undefined && raw["imageUrls"] === undefined
      // Text-to-video field lists are open in the spec: unknown fields pass through.
      const decoded = (yield* decodeInput(tier, schema, input, { passThrough: textOnly, mediaMode: "media-to-video" })) as Decoded
      if (decoded.mediaUrls !== undefined && decoded.imageUrls !== undefined) {
        return yield* Either.left(invalid(tier, "imageUrls", "cannot be combined with mediaUrls"))
      }
      const field = decoded.imageUrls !== undefined ? "imageUrls" : "mediaUrls"
      const materials = materialsOf(decoded.mediaUrls ?? decoded.imageUrls ?? [])
      // The spec's mediaUrls rules fail the task, not the submit call.
      const rejection = textOnly ? undefined : rejectionOf(tier, field, materials)
      const mode = modeOf(tier, materials)

      const adjustments: Array<Adjustment> = []
      let fallbackModel: string | null = null
      if (tier === "motion-1.5-pro") {
        adjustments.push(...adjusted("fallback", decoded.fallback === true ? true : undefined, false, "motion-1.5-pro has no fallback"))
      } else {
        const never = noFallbackReason(decoded.prompt, materials)
        const wanted = decoded.fallback ?? true
        if (wanted && never === undefined) fallbackModel = "motion-1.5-pro"
        if (wanted && never !== undefined) adjustments.push(...adjusted("fallback", decoded.fallback, false, never))
      }
      const ratio = decoded.ratio ?? "16:9"
      const resolution = decoded.resolution ?? "720p"
      const [width, height] = videoSize(ratio, resolution)
      return {
        job: draft({
          model: tier,
          mode,
          output: "video",
          prompt: decoded.prompt,
          ratio,
          resolution,
          width,
          height,
          duration: decoded.duration ?? 5,
          imageUrls: materials.filter((m) => m.type === "image").map((m) => m.url),
          params: { materials, ...extras(decoded, known) },
          fallbackModel,
          adjustments
        }),
        ...(rejection === undefined ? {} : { rejection })
      }
    })
}

const spec = <T extends Tier>(tier: T): ModelSpec<T, ReturnType<typeof schemaOf>> => ({
  id: tier,
  family: "motion",
  output: "video",
  modes: tier === "motion-1.5-pro"
    ? ["text-to-video", "first-frame", "first-last-frame"]
    : ["text-to-video", "first-frame", "first-last-frame", "multi-image-reference", "multimodal-reference"],
  inputSchema: schemaOf(tier),
  mediaUrls: mediaUrlsOf(schemaOf(tier)),
  passThrough: true,
  defaults: { ratio: "16:9", resolution: "720p", duration: 5, fallback: tier === "motion-1.5-pro" ? "ignored" : true },
  limits: [
    "mediaUrls 1 to 12, at most 9 images, total video at most 15 s, total audio at most 15 s, in that order (a violation fails the task with INVALID_PARAMETERS); the counts by URL at submit, then every rule again with each file's type and duration from its bytes when the upstream is wrapped with MediaUpstream (the standalone server)",
    tier === "motion-1.5-pro"
      ? "duration 5 or 10; at most 2 images and no video or audio (a violation fails the task with INVALID_PARAMETERS)"
      : "duration 4 to 15",
    tier === "motion-1.5-pro"
      ? "material type from the URL's extension; a URL without a known one is kept as type unknown (typed from the file's bytes where MediaUpstream runs, as in the standalone server) and counts as one of the 2 images"
      : "material type from the URL's extension; a URL without a known one is kept as type unknown (typed from the file's bytes where MediaUpstream runs, as in the standalone server): it counts toward the 12 URLs but not as an image, and the request does not fall back",
    "unknown fields pass through to the upstream for text-to-video only, except another name for mediaUrls (images, image_urls, ...), which is refused"
  ],
  priceRule: "per second of video (price table)",
  deadline: Duration.hours(6),
  normalize: normalize(tier),
  price: (job, prices) => lookup(prices.videoPerSecond, job.model, "model") * (job.duration ?? 0),
  // Only motion-2.0 and motion-2.0-fast jobs that may fall back carry a fallbackModel.
  fallback: (job, failure) => (job.fallbackModel === null ? undefined : fallbackJob(job, failure)),
  examples: [
    { input: { prompt: "a heron taking flight", duration: 5 }, type: "video", count: 1 },
    { input: { prompt: "the scene comes alive", mediaUrls: ["https://example.com/first.png", "https://example.com/last.jpg"], duration: tier === "motion-1.5-pro" ? 10 : 8 }, type: "video", count: 1 }
  ],
  hostsResults: false,
  transcodesWebp: false,
  materials: materialRules(tier)
})

/** motion-2.0, motion-2.0-fast and motion-1.5-pro. */
export const motion20 = spec("motion-2.0")
export const motion20Fast = spec("motion-2.0-fast")
export const motion15Pro = spec("motion-1.5-pro")

/**
 * The job a failed motion-2.0 or motion-2.0-fast job falls back to: the same request on
 * motion-1.5-pro, its duration mapped to 5 or 10 seconds. The attempt is recorded in
 * `adjustments`; the task stays non-terminal.
 */
export const fallbackJob = (job: UpstreamJob, failure: string): UpstreamJob => {
  const model = job.fallbackModel ?? "motion-1.5-pro"
  const duration = (job.duration ?? 5) <= 7 ? 5 : 10
  return {
    ...job,
    model,
    duration,
    fallbackModel: null,
    adjustments: [
      ...job.adjustments,
      { field: "model", requested: job.model, applied: model, reason: `fallback after the upstream failed: ${failure}` },
      ...adjusted("duration", job.duration ?? undefined, duration, "motion-1.5-pro runs 5 or 10 seconds")
    ]
  }
}
