/**
 * motion-2.0-pro and the canvas-video models: image-to-video (mode from the image count)
 * and text-to-video (spec 4.3).
 */
import { Duration, Schema } from "effect"
import { draft, extras, normalizeWith, specsOf } from "./Draft.js"
import { intOneOf, mediaUrlsOf, oneOf, Prompt, urlList } from "./Fields.js"
import type { ModelSpec } from "./ModelSpec.js"
import { lookup } from "./Pricing.js"
import { videoSize } from "./Sizes.js"

/** The models of this section. */
export const ids = [
  "motion-2.0-pro",
  "canvas-video-3.5-pro",
  "canvas-video-3.0-pro",
  "canvas-video-3.0",
  "canvas-video-2.0-pro",
  "canvas-video-2.0"
] as const

const schema = Schema.Struct({
  prompt: Prompt,
  imageUrls: Schema.optional(urlList(1, 3, "1 gives first-frame mode, 2 first and last frame, 3 multi-image reference.", { http: true })),
  ratio: Schema.optional(oneOf(["1:1", "4:3", "3:4", "16:9", "9:16"], "Default 16:9.")),
  resolution: Schema.optional(oneOf(["480p", "720p", "1080p"], "Default 720p.")),
  duration: Schema.optional(intOneOf([5, 10, 15], "Seconds. Default 5."))
})
const known = ["prompt", "imageUrls", "ratio", "resolution", "duration"]
const modes = ["text-to-video", "first-frame", "first-last-frame", "multi-image-reference"] as const

const spec = <Id extends typeof ids[number]>(id: Id): ModelSpec<Id, typeof schema> => ({
  id,
  family: id.startsWith("motion") ? "motion" : "canvas-video",
  output: "video",
  modes,
  inputSchema: schema,
  mediaUrls: mediaUrlsOf(schema),
  passThrough: true,
  defaults: { ratio: "16:9", resolution: "720p", duration: 5 },
  limits: ["imageUrls 1 to 3", "unknown fields pass through to the upstream for text-to-video only, except another name for imageUrls (images, mediaUrls, image_urls, ...), which is refused"],
  priceRule: "per second of video (price table)",
  deadline: Duration.hours(2),
  // Text-to-video field lists are open in the spec: unknown fields pass through.
  normalize: normalizeWith(id, schema, (decoded) => {
    const images = decoded.imageUrls ?? []
    const ratio = decoded.ratio ?? "16:9"
    const resolution = decoded.resolution ?? "720p"
    const [width, height] = videoSize(ratio, resolution)
    return draft({
      model: id,
      mode: modes[images.length]!,
      output: "video",
      prompt: decoded.prompt,
      ratio,
      resolution,
      width,
      height,
      duration: decoded.duration ?? 5,
      imageUrls: images,
      params: extras(decoded as Record<string, unknown>, known)
    })
  }, (raw) => ({ passThrough: raw["imageUrls"] === undefined, mediaMode: "image-to-video" })),
  price: (job, prices) => lookup(prices.videoPerSecond, job.model, "model") * (job.duration ?? 0),
  examples: [
    { input: { prompt: "a city at night", ratio: "16:9", duration: 5 }, type: "video", count: 1 },
    { input: { prompt: "@1 walks towards @2", imageUrls: ["https://example.com/1.png", "https://example.com/2.png", "https://example.com/3.png"], duration: 10 }, type: "video", count: 1 }
  ],
  hostsResults: false,
  transcodesWebp: false
})

/** One spec per model of the section, each typed with its own id. */
export const models = specsOf(ids, spec)
