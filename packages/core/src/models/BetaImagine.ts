/**
 * beta-imagine: text-to-image in three tiers, text-to-video and image-to-video (spec 4.3).
 */
import { Duration, Schema } from "effect"
import { adjusted, draft, normalizeWith } from "./Draft.js"
import { intBetween, intOneOf, mediaUrlsOf, oneOf, Prompt, urlList } from "./Fields.js"
import type { ModelSpec } from "./ModelSpec.js"
import { videoSize } from "./Sizes.js"

/** Tiers of text-to-image: n range and price per image (micro-USD, spec section 8). */
export const imageTiers = {
  lite: { maxN: 4, unitMicroUsd: 1_000 },
  standard: { maxN: 10, unitMicroUsd: 1_200 },
  pro: { maxN: 10, unitMicroUsd: 1_500 }
} as const
export type ImageTier = keyof typeof imageTiers

const imageRatios = ["1:1", "16:9", "9:16"] as const
const imageResolutions = ["720p", "1080p"] as const

/** Pixel sizes of beta-imagine images; 1:1 is always 1024x1024. */
export const imageSize = (ratio: string, resolution: string): readonly [number, number] =>
  ratio === "1:1" ? [1024, 1024] : videoSize(ratio, resolution)

/**
 * lite infers orientation from the prompt: words for wide pictures give 16:9, words for
 * tall ones 9:16, anything else a square.
 */
export const inferOrientation = (prompt: string): "1:1" | "16:9" | "9:16" =>
  /\b(landscape|widescreen|wide shot|panorama|panoramic|horizontal)\b/i.test(prompt)
    ? "16:9"
    : /\b(portrait|vertical|tall|full[- ]length)\b/i.test(prompt)
    ? "9:16"
    : "1:1"

/** Input of text-to-image-lite, whose n goes up to `maxN`. */
const liteImageSchema = (maxN: number) =>
  Schema.Struct({ prompt: Prompt, n: Schema.optional(intBetween(1, maxN, "Number of images. Default 1.")) })

/** Input of text-to-image-standard and -pro, whose n goes up to `maxN`. */
const imageSchema = (maxN: number) =>
  Schema.Struct({
    prompt: Prompt,
    n: Schema.optional(intBetween(1, maxN, "Number of images. Default 1.")),
    ratio: Schema.optional(oneOf(imageRatios, "Default 1:1.")),
    resolution: Schema.optional(oneOf(imageResolutions, "Default 720p. Ignored when ratio is 1:1."))
  })

/** The input Schema of a text-to-image tier. */
type ImageSchema<Tier extends ImageTier> = ReturnType<Tier extends "lite" ? typeof liteImageSchema : typeof imageSchema>

const textToImage = <Tier extends ImageTier>(tier: Tier) => {
  const id = `beta-imagine/text-to-image-${tier}` as const
  const { maxN, unitMicroUsd } = imageTiers[tier]
  const schema = tier === "lite" ? liteImageSchema(maxN) : imageSchema(maxN)
  const spec: ModelSpec<typeof id, ImageSchema<Tier>> = {
    id,
    family: "beta-imagine",
    output: "image",
    modes: ["text-to-image"],
    inputSchema: schema as ImageSchema<Tier>,
    mediaUrls: mediaUrlsOf(schema),
    passThrough: false,
    defaults: tier === "lite" ? { n: 1, ratio: "inferred from the prompt" } : { n: 1, ratio: "1:1", resolution: "720p" },
    limits: [
      `n 1 to ${maxN}`,
      tier === "lite" ? "ratio and resolution are not supported" : "resolution is ignored when ratio is 1:1 (1024x1024)"
    ],
    priceRule: `${unitMicroUsd / 1_000_000} USD per image`,
    deadline: Duration.minutes(10),
    normalize: normalizeWith(id, schema as Schema.Schema<{ prompt: string; n?: number; ratio?: string; resolution?: string }, any>, (decoded) => {
      const ratio = tier === "lite" ? inferOrientation(decoded.prompt) : decoded.ratio ?? "1:1"
      const resolution = ratio === "1:1" ? null : decoded.resolution ?? "720p"
      const [width, height] = imageSize(ratio, resolution ?? "720p")
      return draft({
        model: id,
        mode: "text-to-image",
        output: "image",
        prompt: decoded.prompt,
        n: decoded.n ?? 1,
        ratio,
        resolution,
        width,
        height,
        adjustments: ratio === "1:1"
          ? adjusted("resolution", decoded.resolution, null, "ignored when ratio is 1:1 (output is always 1024x1024)")
          : []
      })
    }),
    price: (job) => unitMicroUsd * job.n,
    examples: [
      { input: tier === "lite" ? { prompt: "a wide landscape of dunes", n: 2 } : { prompt: "a red fox", ratio: "16:9", resolution: "1080p", n: 3 }, type: "image", count: tier === "lite" ? 2 : 3 }
    ],
    hostsResults: true,
    transcodesWebp: false
  }
  return spec
}

/** beta-imagine/text-to-image-lite, -standard and -pro. */
export const textToImageLite = textToImage("lite")
export const textToImageStandard = textToImage("standard")
export const textToImagePro = textToImage("pro")

/** Price of beta-imagine video per second, micro-USD (spec section 8). */
export const videoPerSecondMicroUsd = 7_000

const videoFields = {
  prompt: Prompt,
  duration: Schema.optional(intOneOf([6, 10, 12, 16, 20], "Seconds. Default 6.")),
  ratio: Schema.optional(oneOf(["1:1", "16:9", "9:16"], "Default 9:16.")),
  resolution: Schema.optional(oneOf(["480p", "720p"], "Default 720p.")),
  mode: Schema.optional(oneOf(["fun", "normal", "spicy", "custom"], "Default custom."))
}

/** Input of text-to-video. */
const textToVideoSchema = Schema.Struct(videoFields)

/** Input of image-to-video. */
const imageToVideoSchema = Schema.Struct({
  ...videoFields,
  imageUrls: urlList(1, 5, "1 to 5 publicly reachable reference image URLs.", { http: true })
})

/** The input Schema of a video mode. */
type VideoSchema<Mode extends "text-to-video" | "image-to-video"> = Mode extends "text-to-video" ? typeof textToVideoSchema
  : typeof imageToVideoSchema

const video = <Mode extends "text-to-video" | "image-to-video">(mode: Mode) => {
  const id = `beta-imagine/${mode}` as const
  const schema = mode === "text-to-video" ? textToVideoSchema : imageToVideoSchema
  type Decoded = { prompt: string; duration?: number; ratio?: string; resolution?: string; mode?: string; imageUrls?: ReadonlyArray<string> }
  const spec: ModelSpec<typeof id, VideoSchema<Mode>> = {
    id,
    family: "beta-imagine",
    output: "video",
    modes: [mode],
    inputSchema: schema as VideoSchema<Mode>,
    mediaUrls: mediaUrlsOf(schema),
    passThrough: false,
    defaults: { duration: 6, ratio: "9:16", resolution: "720p", mode: "custom" },
    limits: mode === "image-to-video" ? ["imageUrls 1 to 5"] : [],
    priceRule: "0.007 USD per second of generated video",
    deadline: Duration.minutes(30),
    normalize: normalizeWith(id, schema as Schema.Schema<Decoded, any>, (decoded) => {
      const ratio = decoded.ratio ?? "9:16"
      const resolution = decoded.resolution ?? "720p"
      const [width, height] = videoSize(ratio, resolution)
      return draft({
        model: id,
        mode,
        output: "video",
        prompt: decoded.prompt,
        ratio,
        resolution,
        width,
        height,
        duration: decoded.duration ?? 6,
        imageUrls: decoded.imageUrls ?? [],
        params: { mode: decoded.mode ?? "custom" }
      })
    }),
    price: (job) => videoPerSecondMicroUsd * (job.duration ?? 0),
    examples: [
      {
        input: mode === "text-to-video"
          ? { prompt: "waves at night", duration: 10, ratio: "16:9" }
          : { prompt: "bring it to life", imageUrls: ["https://example.com/a.png", "https://example.com/b.png"] },
        type: "video",
        count: 1
      }
    ],
    hostsResults: true,
    transcodesWebp: false
  }
  return spec
}

/** beta-imagine/text-to-video and image-to-video. */
export const textToVideo = video("text-to-video")
export const imageToVideo = video("image-to-video")
