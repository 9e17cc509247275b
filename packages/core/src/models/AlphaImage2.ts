/**
 * alpha-image-2: text-to-image and image-to-image (spec section 4.3). The upstream is
 * synchronous; the service still exposes the submit, query and callback flow.
 */
import { Duration, Schema } from "effect"
import { draft, normalizeWith } from "./Draft.js"
import { intBetween, mediaUrlsOf, oneOf, Prompt, urlList } from "./Fields.js"
import type { DraftJob, ModelSpec } from "./ModelSpec.js"

/** The 13 ratios. */
export const ratios = [
  "1:1", "3:2", "2:3", "4:3", "3:4", "5:4", "4:5", "16:9", "9:16", "2:1", "1:2", "21:9", "9:21"
] as const
export type Ratio = typeof ratios[number]

/** The ratios allowed at 4k. */
export const ratios4k: ReadonlyArray<Ratio> = ["16:9", "9:16", "2:1", "1:2", "21:9", "9:21"]

export const resolutions = ["1k", "2k", "4k"] as const
export type Resolution = typeof resolutions[number]

/** Pixel sizes [width, height] per ratio and resolution; null where the spec's table has a dash. */
export const pixelSizes: Readonly<Record<Ratio, Readonly<Record<Resolution, readonly [number, number] | null>>>> = {
  "1:1": { "1k": [1024, 1024], "2k": [2048, 2048], "4k": null },
  "3:2": { "1k": [1536, 1024], "2k": [2048, 1360], "4k": null },
  "2:3": { "1k": [1024, 1536], "2k": [1360, 2048], "4k": null },
  "4:3": { "1k": [1024, 768], "2k": [2048, 1536], "4k": null },
  "3:4": { "1k": [768, 1024], "2k": [1536, 2048], "4k": null },
  "5:4": { "1k": [1280, 1024], "2k": [2560, 2048], "4k": null },
  "4:5": { "1k": [1024, 1280], "2k": [2048, 2560], "4k": null },
  "16:9": { "1k": [1536, 864], "2k": [2048, 1152], "4k": [3840, 2160] },
  "9:16": { "1k": [864, 1536], "2k": [1152, 2048], "4k": [2160, 3840] },
  "2:1": { "1k": [2048, 1024], "2k": [2688, 1344], "4k": [3840, 1920] },
  "1:2": { "1k": [1024, 2048], "2k": [1344, 2688], "4k": [1920, 3840] },
  "21:9": { "1k": [2016, 864], "2k": [2688, 1152], "4k": [3840, 1648] },
  "9:21": { "1k": [864, 2016], "2k": [1152, 2688], "4k": [1648, 3840] }
}

/**
 * The ratio the upstream picks when the client names none: 1:1, or 16:9 at 4k where
 * 1:1 is not allowed.
 */
export const defaultRatio = (resolution: Resolution): Ratio => (resolution === "4k" ? "16:9" : "1:1")

/** Unit price per image in micro-USD, by resolution. */
export const unitPriceMicroUsd: Readonly<Record<Resolution, number>> = { "1k": 20_000, "2k": 40_000, "4k": 60_000 }

const fields = {
  prompt: Prompt,
  ratio: Schema.optional(oneOf(ratios, "Aspect ratio. When omitted the upstream chooses.")),
  resolution: Schema.optional(oneOf(resolutions, "Output resolution. Default 1k.")),
  n: Schema.optional(intBetween(1, 10, "Number of images. Default 1."))
}

const ratioAllowedAtResolution = <A extends { readonly ratio?: Ratio | undefined; readonly resolution?: Resolution | undefined }>(
  input: A
) =>
  input.resolution === "4k" && input.ratio !== undefined && !ratios4k.includes(input.ratio)
    ? { path: ["ratio"], message: `must be one of ${ratios4k.join(", ")} when resolution is 4k` }
    : undefined

/** Input of alpha-image-2/text-to-image. */
export const TextToImageInput = Schema.Struct(fields).pipe(Schema.filter(ratioAllowedAtResolution))

/** Input of alpha-image-2/image-to-image. */
export const ImageToImageInput = Schema.Struct({
  ...fields,
  imageUrls: urlList(1, 1, "Exactly 1 public HTTPS URL. WebP input is transcoded to JPEG (by MediaUpstream, which the standalone server runs).")
}).pipe(Schema.filter(ratioAllowedAtResolution))

type Decoded = {
  readonly prompt: string
  readonly ratio?: Ratio | undefined
  readonly resolution?: Resolution | undefined
  readonly n?: number | undefined
  readonly imageUrls?: ReadonlyArray<string> | undefined
}

const toJob = (mode: string, input: Decoded): DraftJob => {
  const resolution = input.resolution ?? "1k"
  const size = input.ratio === undefined ? null : pixelSizes[input.ratio][resolution]
  return draft({
    model: "alpha-image-2",
    mode,
    output: "image",
    prompt: input.prompt,
    n: input.n ?? 1,
    ratio: input.ratio ?? null,
    resolution,
    width: size?.[0] ?? null,
    height: size?.[1] ?? null,
    imageUrls: input.imageUrls ?? [],
    sync: true
  })
}

const spec = <Mode extends "text-to-image" | "image-to-image", S extends Schema.Schema.Any>(
  mode: Mode,
  schema: S,
  examples: ModelSpec["examples"]
): ModelSpec<`alpha-image-2/${Mode}`, S> => {
  const id = `alpha-image-2/${mode}` as const
  return {
    id,
    family: "alpha-image-2",
    output: "image",
    modes: [mode],
    inputSchema: schema,
    mediaUrls: mediaUrlsOf(schema),
    passThrough: false,
    defaults: { resolution: "1k", n: 1, ratio: "chosen by the upstream (1:1; 16:9 at 4k)" },
    limits: ["n 1 to 10", "at 4k, ratio one of 16:9, 9:16, 2:1, 1:2, 21:9, 9:21", ...(mode === "image-to-image" ? ["imageUrls exactly 1 https URL"] : [])],
    priceRule: "0.02 USD per image at 1k, 0.04 at 2k, 0.06 at 4k, times n",
    deadline: Duration.minutes(10),
    normalize: normalizeWith(id, schema as unknown as Schema.Schema<Decoded, any>, (decoded) => toJob(mode, decoded)),
    price: (job) => unitPriceMicroUsd[(job.resolution ?? "1k") as Resolution] * job.n,
    examples,
    hostsResults: true,
    transcodesWebp: mode === "image-to-image"
  }
}

/** alpha-image-2/text-to-image. */
export const textToImage = spec("text-to-image", TextToImageInput, [
  { input: { prompt: "a lighthouse at dawn", ratio: "16:9", n: 2 }, type: "image", count: 2 }
])

/** alpha-image-2/image-to-image. */
export const imageToImage = spec("image-to-image", ImageToImageInput, [
  { input: { prompt: "make it autumn", imageUrls: ["https://example.com/in.jpg"], resolution: "2k", ratio: "3:4" }, type: "image", count: 1 }
])
