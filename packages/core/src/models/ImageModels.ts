/**
 * compact-image, canvas and dream image models (spec 4.3): text-to-image, and
 * image-to-image when the image field is present.
 */
import { Duration, Schema } from "effect"
import { adjusted, draft, extras, normalizeWith, specsOf } from "./Draft.js"
import { intBetween, mediaUrlsOf, oneOf, Prompt, urlList } from "./Fields.js"
import type { DraftJob, ModelSpec } from "./ModelSpec.js"
import { lookup } from "./Pricing.js"
import { imageSize } from "./Sizes.js"

const resolutions = ["1k", "2k", "4k"] as const
const priceImages = (job: DraftJob, prices: { imagePerImage: Readonly<Record<string, Readonly<Record<string, number>>>> }) =>
  lookup(prices.imagePerImage[job.model], job.resolution ?? "1k", `${job.model} resolution`) * job.n

/**
 * The job of one of these models: sized from its ratio and resolution, in image-to-image
 * mode when reference images came; `rest` sets the fields a model adds.
 */
const imageJob = (
  model: string,
  prompt: string,
  ratio: string,
  resolution: string,
  images: ReadonlyArray<string>,
  rest: Partial<DraftJob> = {}
): DraftJob => {
  const [width, height] = imageSize(ratio, resolution)
  return draft({
    model,
    mode: images.length > 0 ? "image-to-image" : "text-to-image",
    output: "image",
    prompt,
    ratio,
    resolution,
    width,
    height,
    imageUrls: images,
    ...rest
  })
}

// compact-image ---------------------------------------------------------------------------

/** The compact-image models. */
export const compactIds = ["compact-image", "compact-image-2", "compact-image-pro"] as const

const compactImageUrls = Schema.optional(urlList(1, 10, "Up to 10 public HTTPS image URLs; selects image-to-image."))

/** Input of compact-image: two ratios, resolution ignored (always 1k). */
const compactFixedSchema = Schema.Struct({
  prompt: Prompt,
  ratio: Schema.optional(oneOf(["16:9", "9:16"], "Default 16:9.")),
  resolution: Schema.optional(oneOf(resolutions, "Ignored: always 1k.")),
  imageUrls: compactImageUrls
})

/** Input of compact-image-2 and compact-image-pro. */
const compactSchema = Schema.Struct({
  prompt: Prompt,
  ratio: Schema.optional(oneOf(["16:9", "9:16", "1:1", "4:3", "3:4"], "Default 16:9.")),
  resolution: Schema.optional(oneOf(resolutions, "Default 1k.")),
  imageUrls: compactImageUrls
})

/** The input Schema of a compact-image model. */
type CompactSchema<Id extends typeof compactIds[number]> = Id extends "compact-image" ? typeof compactFixedSchema : typeof compactSchema

const compact = <Id extends typeof compactIds[number]>(id: Id): ModelSpec<Id, CompactSchema<Id>> => {
  const fixed = id === "compact-image"
  // compact-image's Schema accepts a subset of the others' input, so it decodes as theirs.
  const schema = (fixed ? compactFixedSchema : compactSchema) as typeof compactSchema
  return {
    id,
    family: "compact-image",
    output: "image",
    modes: ["text-to-image", "image-to-image"],
    inputSchema: schema as CompactSchema<Id>,
    mediaUrls: mediaUrlsOf(schema),
    passThrough: false,
    defaults: { ratio: "16:9", resolution: "1k" },
    limits: ["imageUrls up to 10", fixed ? "ratio 16:9 or 9:16; resolution ignored (always 1k)" : "resolution 1k, 2k, 4k", "one image per generation"],
    priceRule: "per image by resolution (price table)",
    deadline: Duration.minutes(10),
    normalize: normalizeWith(id, schema, (decoded) =>
      imageJob(id, decoded.prompt, decoded.ratio ?? "16:9", fixed ? "1k" : decoded.resolution ?? "1k", decoded.imageUrls ?? [], {
        adjustments: fixed ? adjusted("resolution", decoded.resolution, "1k", "compact-image is always 1k") : []
      })),
    price: priceImages,
    examples: [
      { input: { prompt: "a poster of a bicycle", ratio: "9:16" }, type: "image", count: 1 },
      { input: { prompt: "same style, new colours", imageUrls: ["https://example.com/a.jpg"] }, type: "image", count: 1 }
    ],
    hostsResults: false,
    transcodesWebp: false
  }
}

// canvas ----------------------------------------------------------------------------------

/** The 12 canvas image models. */
export const canvasIds = [
  "canvas-5.0-preview", "canvas-4.6", "canvas-4.5", "canvas-4.1", "canvas-4.0", "canvas-3.1",
  "canvas-3.0", "canvas-2.1", "canvas-2.0-pro", "canvas-2.0", "canvas-1.4", "canvas-xl-pro"
] as const

/** How many images a canvas generation returns ("typically several"). */
export const canvasImageCount = 4

const canvasRatios = ["1:1", "3:2", "2:3", "4:3", "3:4", "5:4", "4:5", "16:9", "9:16", "2:1", "1:2", "21:9", "9:21"] as const

/** Input of every canvas model. */
const canvasSchema = Schema.Struct({
  prompt: Prompt,
  ratio: Schema.optional(oneOf(canvasRatios, "Default 1:1.")),
  resolution: Schema.optional(oneOf(resolutions, "Default 2k.")),
  images: Schema.optional(urlList(1, 10, "Reference image URLs; selects image-to-image.", { http: true }))
})

const canvas = <Id extends typeof canvasIds[number]>(id: Id): ModelSpec<Id, typeof canvasSchema> => {
  const schema = canvasSchema
  return {
    id,
    family: "canvas",
    output: "image",
    modes: ["text-to-image", "image-to-image"],
    inputSchema: schema,
    mediaUrls: mediaUrlsOf(schema),
    passThrough: true,
    defaults: { ratio: "1:1", resolution: "2k" },
    limits: ["images 1 to 10", `${canvasImageCount} images per generation`, "unknown fields pass through to the upstream, except another name for images (imageUrls, image_urls, ...), which is refused"],
    priceRule: `per image by resolution (price table), ${canvasImageCount} images per generation`,
    deadline: Duration.minutes(15),
    normalize: normalizeWith(id, schema, (decoded) =>
      imageJob(id, decoded.prompt, decoded.ratio ?? "1:1", decoded.resolution ?? "2k", decoded.images ?? [], {
        n: canvasImageCount,
        params: extras(decoded as Record<string, unknown>, ["prompt", "ratio", "resolution", "images"])
      }), { passThrough: true, mediaMode: "image-to-image" }),
    price: priceImages,
    examples: [
      { input: { prompt: "a glass teapot", ratio: "16:9", resolution: "2k" }, type: "image", count: canvasImageCount },
      { input: { prompt: "as a watercolour", images: ["https://example.com/a.png"], resolution: "1k" }, type: "image", count: canvasImageCount }
    ],
    hostsResults: false,
    transcodesWebp: false
  }
}

// dream -----------------------------------------------------------------------------------

/** The dream models. */
export const dreamIds = ["dream-5-lite", "dream-4.5", "dream-4"] as const

/** Input of a dream model whose n goes up to `maxN`. */
const dreamSchema = (maxN: number) =>
  Schema.Struct({
    prompt: Prompt,
    ratio: Schema.optional(oneOf(["1:1", "4:3", "3:4", "16:9", "9:16", "3:2", "2:3", "21:9"], "Default 1:1.")),
    resolution: Schema.optional(oneOf(resolutions, "Default 2k.")),
    n: Schema.optional(intBetween(1, maxN, "Number of images. Default 1.")),
    imageUrls: Schema.optional(urlList(1, 10, "1 to 10 reference URLs; selects image-to-image.", { http: true }))
  })

const dream = <Id extends typeof dreamIds[number]>(id: Id): ModelSpec<Id, ReturnType<typeof dreamSchema>> => {
  const maxN = id === "dream-5-lite" ? 4 : 15
  const schema = dreamSchema(maxN)
  return {
    id,
    family: "dream",
    output: "image",
    modes: ["text-to-image", "image-to-image"],
    inputSchema: schema,
    mediaUrls: mediaUrlsOf(schema),
    passThrough: false,
    defaults: { ratio: "1:1", resolution: "2k", n: 1 },
    limits: [`n 1 to ${maxN}`, "imageUrls 1 to 10"],
    priceRule: "per image by resolution (price table), linear in n",
    deadline: Duration.minutes(15),
    normalize: normalizeWith(id, schema, (decoded) =>
      imageJob(id, decoded.prompt, decoded.ratio ?? "1:1", decoded.resolution ?? "2k", decoded.imageUrls ?? [], { n: decoded.n ?? 1 })),
    price: priceImages,
    examples: [
      { input: { prompt: "a koi pond", n: 3, ratio: "4:3", resolution: "1k" }, type: "image", count: 3 },
      { input: { prompt: "in the same style", imageUrls: ["https://example.com/a.jpg"], resolution: "1k" }, type: "image", count: 1 }
    ],
    hostsResults: false,
    transcodesWebp: false
  }
}

/** compact-image, canvas and dream specs, each typed with its own id and input Schema. */
export const compactModels = [compact("compact-image"), compact("compact-image-2"), compact("compact-image-pro")] as const
export const canvasModels = specsOf(canvasIds, canvas)
export const dreamModels = specsOf(dreamIds, dream)
