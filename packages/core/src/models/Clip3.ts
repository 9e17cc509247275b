/**
 * clip3, clip3_fast, clip3_lite: text-to-video and image-to-video with three modes
 * (spec 4.3, rules 1 to 7).
 */
import { Duration, Either, Schema } from "effect"
import type { ValidationError } from "../domain/Errors.js"
import type { Adjustment } from "../domain/Task.js"
import { adjusted, draft } from "./Draft.js"
import { decodeInput, intOneOf, invalid, mediaUrlsOf, oneOf, Prompt, urlList } from "./Fields.js"
import type { ModelSpec, Normalized } from "./ModelSpec.js"
import { lookup } from "./Pricing.js"
import { videoSize } from "./Sizes.js"

export type Tier = "clip3" | "clip3_fast" | "clip3_lite"
export type Clip3Mode = "t2v" | "i2v" | "i2v-fl" | "r2v"

/** The mode an image count selects when `mode` is omitted. */
export const inferMode = (images: number): Clip3Mode => (["t2v", "i2v", "i2v-fl", "r2v"] as const)[images] ?? "r2v"

const schema = Schema.Struct({
  prompt: Prompt,
  ratio: Schema.optional(oneOf(["16:9", "9:16"], "Default 16:9.")),
  resolution: Schema.optional(oneOf(["1080p", "4k"], "Default: standard resolution (720p), no upscale.")),
  duration: Schema.optional(intOneOf([4, 6, 8], "Seconds. Default 8.")),
  imageUrls: Schema.optional(urlList(1, 3, "1, 2 or 3 public HTTPS image URLs (JPEG, PNG or WebP).")),
  mode: Schema.optional(oneOf(["i2v", "i2v-fl", "r2v"], "Overrides the mode inferred from the image count."))
})
type Decoded = typeof schema.Type

const check = (condition: boolean, error: () => ValidationError) => (condition ? Either.left(error()) : Either.right(undefined))

const normalize = (tier: Tier) => (input: unknown): Either.Either<Normalized, ValidationError> =>
  Either.gen(function*() {
    const decoded: Decoded = yield* decodeInput(tier, schema, input)
    const images = decoded.imageUrls ?? []
    yield* check(decoded.mode !== undefined && images.length === 0, () => invalid(tier, "mode", "needs imageUrls"))
    const mode: Clip3Mode = decoded.mode ?? inferMode(images.length)
    yield* check(mode === "i2v" && images.length !== 1, () => invalid(tier, "imageUrls", "must contain exactly 1 URL in mode i2v"))
    yield* check(mode === "i2v-fl" && images.length !== 2, () => invalid(tier, "imageUrls", "must contain exactly 2 URLs (first and last frame) in mode i2v-fl"))
    if (tier === "clip3_lite") {
      // Rule 6: clip3_lite supports only i2v and i2v-fl.
      yield* check(images.length === 3, () => invalid(tier, "imageUrls", "must contain 1 or 2 URLs (clip3_lite supports only i2v and i2v-fl)"))
      yield* check(mode === "t2v", () => invalid(tier, "imageUrls", "is required (clip3_lite supports only i2v and i2v-fl)"))
      yield* check(mode === "r2v", () => invalid(tier, "mode", "r2v is not supported by clip3_lite (only i2v and i2v-fl)"))
    }
    const adjustments: Array<Adjustment> = []

    // Rule 5: r2v has no quality tier; clip3 runs it in fast mode.
    const model: Tier = mode === "r2v" && tier === "clip3" ? "clip3_fast" : tier
    if (model !== tier) adjustments.push({ field: "model", requested: tier, applied: model, reason: "r2v does not support the quality tier; it runs in fast mode" })

    // Rules 2, 3, 4 and 7: which durations each mode and tier honours.
    const requested = decoded.duration
    const duration = mode === "r2v"
      ? 8
      : mode === "i2v" && tier !== "clip3_lite"
      ? 8
      : mode === "t2v" && tier === "clip3"
      ? 8
      : requested ?? 8
    adjustments.push(...adjusted("duration", requested, duration,
      mode === "r2v" ? "r2v supports only 8 seconds" : mode === "i2v" ? "i2v on clip3 and clip3_fast supports only 8 seconds" : "t2v on the quality tier supports only 8 seconds"))

    // clip3_lite is 720p only; i2v ignores resolution (rule 3).
    const resolution = tier === "clip3_lite" || mode === "i2v" ? "720p" : decoded.resolution ?? "720p"
    adjustments.push(...adjusted("resolution", decoded.resolution, resolution === "720p" ? null : resolution,
      tier === "clip3_lite" ? "clip3_lite outputs 720p only" : "resolution is ignored for i2v"))

    const ratio = decoded.ratio ?? "16:9"
    const [width, height] = videoSize(ratio, resolution)
    return {
      job: draft({
        model,
        mode,
        output: "video",
        prompt: decoded.prompt,
        ratio,
        resolution,
        width,
        height,
        duration,
        imageUrls: images,
        params: { mode },
        adjustments
      })
    }
  })

const spec = <T extends Tier>(tier: T): ModelSpec<T, typeof schema> => ({
  id: tier,
  family: "clip3",
  output: "video",
  modes: tier === "clip3_lite" ? ["i2v", "i2v-fl"] : ["t2v", "i2v", "i2v-fl", "r2v"],
  inputSchema: schema,
  mediaUrls: mediaUrlsOf(schema),
  passThrough: false,
  defaults: { ratio: "16:9", resolution: "720p (standard, no upscale)", duration: 8, mode: "from the image count: 0 t2v, 1 i2v, 2 i2v-fl, 3 r2v" },
  limits: [
    "imageUrls 1 to 3",
    "i2v: clip3 and clip3_fast run 8 s whatever is asked; clip3_lite honours 4, 6, 8; resolution ignored",
    "i2v-fl: 4, 6, 8 on every tier",
    "r2v: 8 s only; on clip3 it runs as clip3_fast",
    "t2v on clip3 (quality): 8 s only",
    "clip3_lite: only i2v and i2v-fl, 720p"
  ],
  priceRule: "per second of video by tier and resolution (price table), linear in duration",
  deadline: Duration.minutes(30),
  normalize: normalize(tier),
  price: (job, prices) => lookup(prices.clip3PerSecond[job.model], job.resolution ?? "720p", `${job.model} resolution`) * (job.duration ?? 0),
  examples: tier === "clip3_lite"
    ? [{ input: { prompt: "a paper boat", imageUrls: ["https://example.com/a.jpg"], duration: 4 }, type: "video", count: 1 }]
    : [
      { input: { prompt: "a paper boat on a river", duration: 6 }, type: "video", count: 1 },
      { input: { prompt: "from dawn to dusk", imageUrls: ["https://example.com/a.jpg", "https://example.com/b.jpg"] }, type: "video", count: 1 }
    ],
  hostsResults: false,
  transcodesWebp: false
})

/** clip3 (quality), clip3_fast (speed), clip3_lite (720p, lowest cost). */
export const clip3 = spec("clip3")
export const clip3Fast = spec("clip3_fast")
export const clip3Lite = spec("clip3_lite")
