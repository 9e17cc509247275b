/**
 * Every model of the spec (section 4.3) and every row of the limits table (section 8):
 * valid requests normalise into the right job, broken rules fail naming field and rule.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, Option } from "effect"
import { ModelCatalog, ModelInfo, Motion, Pricing } from "../src/index.js"
import type { DraftJob, ModelSpec, Normalized } from "../src/index.js"

const catalog = ModelCatalog.make(ModelCatalog.allModels)
const spec = (id: string) => Option.getOrThrow(catalog.find(id))
const normalize = (id: string, input: Record<string, unknown>): Either.Either<Normalized, { message: string }> =>
  spec(id).normalize(input)
const job = (id: string, input: Record<string, unknown>): DraftJob => {
  const outcome = normalize(id, input)
  if (Either.isLeft(outcome)) throw new Error(`${id} refused ${JSON.stringify(input)}: ${outcome.left.message}`)
  return outcome.right.job
}
const refused = (id: string, input: Record<string, unknown>): string => {
  const outcome = normalize(id, input)
  if (Either.isRight(outcome)) throw new Error(`${id} accepted ${JSON.stringify(input)}`)
  return outcome.left.message
}
const price = (id: string, input: Record<string, unknown>) => spec(id).price(job(id, input), Pricing.defaultPrices)
const img = (name: string) => `https://example.com/${name}`
const p = { prompt: "a test" }

const allIds = [
  "alpha-image-2/text-to-image", "alpha-image-2/image-to-image",
  "beta-imagine/text-to-image-lite", "beta-imagine/text-to-image-standard", "beta-imagine/text-to-image-pro",
  "beta-imagine/text-to-video", "beta-imagine/image-to-video",
  "clip3", "clip3_fast", "clip3_lite",
  "motion-2.0", "motion-2.0-fast", "motion-1.5-pro", "motion-2.0-pro",
  "canvas-video-3.5-pro", "canvas-video-3.0-pro", "canvas-video-3.0", "canvas-video-2.0-pro", "canvas-video-2.0",
  "compact-image", "compact-image-2", "compact-image-pro",
  "canvas-5.0-preview", "canvas-4.6", "canvas-4.5", "canvas-4.1", "canvas-4.0", "canvas-3.1", "canvas-3.0",
  "canvas-2.1", "canvas-2.0-pro", "canvas-2.0", "canvas-1.4", "canvas-xl-pro",
  "dream-5-lite", "dream-4.5", "dream-4"
]

describe("the catalog", () => {
  it("lists every model of the spec exactly once", () => {
    expect(catalog.models.map((m) => m.id).sort()).toEqual([...allIds].sort())
  })
  for (const id of allIds) {
    it(`${id}: every example is accepted, priced in integer micro-USD, and needs a prompt`, () => {
      const model = spec(id)
      expect(model.examples.length).toBeGreaterThan(0)
      for (const example of model.examples) {
        const draft = job(id, example.input)
        expect(draft.output).toBe(example.type)
        expect(example.type === "video" ? 1 : draft.n).toBe(example.count)
        const cost = model.price(draft, Pricing.defaultPrices)
        expect(Number.isInteger(cost) && cost > 0).toBe(true)
        expect(draft.width! > 0 && draft.height! > 0).toBe(true)
      }
      expect(refused(id, {})).toBe(`input.prompt is required for ${id}`)
    })
  }  it("says what the service does around each model: results hosted for alpha-image-2 and beta-imagine, WebP input transcoded for alpha-image-2 image-to-image, materials checked from their files for motion-2.0, -fast and 1.5-pro", () => {
    const which = (has: (model: ModelSpec) => boolean) => catalog.models.filter(has).map((model) => model.id)
    expect(which((model) => model.hostsResults)).toEqual(allIds.filter((id) => id.startsWith("alpha-image-2/") || id.startsWith("beta-imagine/")))
    expect(which((model) => model.transcodesWebp)).toEqual(["alpha-image-2/image-to-image"])
    expect(which((model) => model.materials !== undefined)).toEqual(["motion-2.0", "motion-2.0-fast", "motion-1.5-pro"])
  })
  it("finds the spec of the model a job runs: each example's job, clip3 r2v (clip3_fast), a motion fallback (motion-1.5-pro)", () => {
    for (const model of catalog.models) {
      for (const example of model.examples) expect(Option.map(catalog.forJob(job(model.id, example.input)), (found) => found.id)).toEqual(Option.some(model.id))
    }
    const r2v = job("clip3", { ...p, imageUrls: [img("a.jpg"), img("b.jpg"), img("c.jpg")] })
    expect(Option.map(catalog.forJob(r2v), (found) => found.id)).toEqual(Option.some("clip3_fast"))
    const fallback = Motion.fallbackJob({ ...job("motion-2.0", p), priceMicroUsd: 0 }, "upstream failed")
    expect(Option.map(catalog.forJob(fallback), (found) => found.id)).toEqual(Option.some("motion-1.5-pro"))
    expect(catalog.forJob({ model: "no-such-model", mode: "text-to-image" })).toEqual(Option.none())
  })
})

describe("section 8 limits table", () => {
  const nRange = (id: string, max: number) => {
    expect(job(id, { ...p, n: 1 }).n).toBe(1)
    expect(job(id, { ...p, n: max }).n).toBe(max)
    expect(refused(id, { ...p, n: 0 })).toBe(`input.n must be an integer between 1 and ${max} for ${id}`)
    expect(refused(id, { ...p, n: max + 1 })).toBe(`input.n must be an integer between 1 and ${max} for ${id}`)
  }
  it("alpha-image-2 n 1 to 10", () => nRange("alpha-image-2/text-to-image", 10))
  it("beta-imagine lite n 1 to 4", () => nRange("beta-imagine/text-to-image-lite", 4))
  it("beta-imagine standard and pro n 1 to 10", () => {
    nRange("beta-imagine/text-to-image-standard", 10)
    nRange("beta-imagine/text-to-image-pro", 10)
  })
  it("dream-5-lite n 1 to 4", () => nRange("dream-5-lite", 4))
  it("dream-4 and dream-4.5 n 1 to 15", () => {
    nRange("dream-4", 15)
    nRange("dream-4.5", 15)
  })
  it("clip3 imageUrls 1 to 3", () => {
    expect(job("clip3", { ...p, imageUrls: [img("1.jpg"), img("2.jpg"), img("3.jpg")] }).imageUrls).toHaveLength(3)
    expect(refused("clip3", { ...p, imageUrls: [] })).toBe("input.imageUrls must contain between 1 and 3 URLs for clip3")
    expect(refused("clip3", { ...p, imageUrls: ["a", "b", "c", "d"].map(img) })).toBe("input.imageUrls must contain between 1 and 3 URLs for clip3")
  })
  it("beta-imagine/image-to-video imageUrls 1 to 5", () => {
    const id = "beta-imagine/image-to-video"
    expect(job(id, { ...p, imageUrls: ["1", "2", "3", "4", "5"].map(img) }).imageUrls).toHaveLength(5)
    expect(refused(id, { ...p, imageUrls: ["1", "2", "3", "4", "5", "6"].map(img) })).toBe(`input.imageUrls must contain between 1 and 5 URLs for ${id}`)
    expect(refused(id, { ...p, imageUrls: [] })).toBe(`input.imageUrls must contain between 1 and 5 URLs for ${id}`)
    expect(refused(id, p)).toBe(`input.imageUrls is required for ${id}`)
  })
  it("alpha-image-2/image-to-image imageUrls exactly 1", () => {
    const id = "alpha-image-2/image-to-image"
    expect(refused(id, { ...p, imageUrls: [img("a"), img("b")] })).toBe(`input.imageUrls must contain exactly 1 URL for ${id}`)
  })
  it("compact-image imageUrls up to 10", () => {
    for (const id of ["compact-image", "compact-image-2", "compact-image-pro"]) {
      expect(job(id, { ...p, imageUrls: Array.from({ length: 10 }, (_, i) => img(`${i}.png`)) }).mode).toBe("image-to-image")
      expect(refused(id, { ...p, imageUrls: Array.from({ length: 11 }, (_, i) => img(`${i}.png`)) })).toBe(`input.imageUrls must contain between 1 and 10 URLs for ${id}`)
    }
  })
  it("dream imageUrls 1 to 10 (image-to-image)", () => {
    expect(job("dream-4", { ...p, imageUrls: [img("a.png")] }).mode).toBe("image-to-image")
    expect(refused("dream-4", { ...p, imageUrls: Array.from({ length: 11 }, (_, i) => img(`${i}.png`)) })).toBe("input.imageUrls must contain between 1 and 10 URLs for dream-4")
  })
  it("motion mediaUrls 1 to 12 and at most 9 images fail the task with INVALID_PARAMETERS", () => {
    const thirteen = normalize("motion-2.0", { ...p, mediaUrls: Array.from({ length: 13 }, (_, i) => img(`${i}.mp3`)) })
    expect(Either.getOrThrow(thirteen).rejection).toBe("mediaUrls must contain between 1 and 12 URLs")
    const empty = normalize("motion-2.0", { ...p, mediaUrls: [] })
    expect(Either.getOrThrow(empty).rejection).toBe("mediaUrls must contain between 1 and 12 URLs")
    const tenImages = normalize("motion-2.0", { ...p, mediaUrls: Array.from({ length: 10 }, (_, i) => img(`${i}.png`)) })
    expect(Either.getOrThrow(tenImages).rejection).toBe("mediaUrls may contain at most 9 images")
    const nine = normalize("motion-2.0", { ...p, mediaUrls: [...Array.from({ length: 9 }, (_, i) => img(`${i}.png`)), img("a.mp4"), img("b.wav")] })
    expect(Either.getOrThrow(nine).rejection).toBeUndefined()
  })
  it("motion-2.0 and motion-2.0-fast duration 4 to 15 s", () => {
    for (const id of ["motion-2.0", "motion-2.0-fast"]) {
      expect(job(id, { ...p, duration: 4 }).duration).toBe(4)
      expect(job(id, { ...p, duration: 15 }).duration).toBe(15)
      expect(refused(id, { ...p, duration: 3 })).toBe(`input.duration must be an integer between 4 and 15 for ${id}`)
      expect(refused(id, { ...p, duration: 16 })).toBe(`input.duration must be an integer between 4 and 15 for ${id}`)
    }
  })
  it("motion-1.5-pro duration 5 or 10 s", () => {
    expect(job("motion-1.5-pro", { ...p, duration: 10 }).duration).toBe(10)
    expect(refused("motion-1.5-pro", { ...p, duration: 6 })).toBe("input.duration must be one of 5, 10 for motion-1.5-pro")
  })
})

describe("alpha-image-2 and beta-imagine prices (spec section 8)", () => {
  it("alpha-image-2 is n times 0.02, 0.04, 0.06 by resolution", () => {
    expect(price("alpha-image-2/text-to-image", { ...p, n: 3, resolution: "2k" })).toBe(120_000)
  })
  it("beta-imagine images 0.001, 0.0012, 0.0015 per image", () => {
    expect(price("beta-imagine/text-to-image-lite", { ...p, n: 4 })).toBe(4_000)
    expect(price("beta-imagine/text-to-image-standard", { ...p, n: 2 })).toBe(2_400)
    expect(price("beta-imagine/text-to-image-pro", { ...p, n: 10 })).toBe(15_000)
  })
  it("beta-imagine video 0.007 per second", () => {
    expect(price("beta-imagine/text-to-video", p)).toBe(42_000)
    expect(price("beta-imagine/image-to-video", { ...p, duration: 20, imageUrls: [img("a.png")] })).toBe(140_000)
  })
  it("dream scales linearly with n, clip3 with duration", () => {
    expect(price("dream-4", { ...p, n: 6 })).toBe(6 * price("dream-4", p))
    const four = price("clip3_fast", { ...p, duration: 4 })
    expect(price("clip3_fast", { ...p, duration: 8 })).toBe(2 * four)
  })
  it("a host's price table replaces the defaults", () => {
    const table = { ...Pricing.defaultPrices, videoPerSecond: { ...Pricing.defaultPrices.videoPerSecond, "motion-2.0": 1 } }
    expect(spec("motion-2.0").price(job("motion-2.0", { ...p, duration: 7 }), table)).toBe(7)
  })
})

describe("beta-imagine", () => {
  it("lite refuses ratio and resolution, naming the field", () => {
    expect(refused("beta-imagine/text-to-image-lite", { ...p, ratio: "16:9" })).toBe("input.ratio is not a supported field for beta-imagine/text-to-image-lite")
    expect(refused("beta-imagine/text-to-image-lite", { ...p, resolution: "720p" })).toBe("input.resolution is not a supported field for beta-imagine/text-to-image-lite")
  })
  it("lite infers the orientation from the prompt", () => {
    expect([job("beta-imagine/text-to-image-lite", { prompt: "a wide landscape" }).width, job("beta-imagine/text-to-image-lite", { prompt: "a wide landscape" }).height]).toEqual([1280, 720])
    expect(job("beta-imagine/text-to-image-lite", { prompt: "a portrait of a cat" }).ratio).toBe("9:16")
    expect(job("beta-imagine/text-to-image-lite", { prompt: "a cat" }).ratio).toBe("1:1")
  })
  it("defaults ratio 1:1 (1024x1024); resolution is ignored at 1:1 and the change recorded", () => {
    const plain = job("beta-imagine/text-to-image-pro", p)
    expect([plain.ratio, plain.width, plain.height, plain.adjustments]).toEqual(["1:1", 1024, 1024, []])
    const ignored = job("beta-imagine/text-to-image-pro", { ...p, ratio: "1:1", resolution: "1080p" })
    expect([ignored.width, ignored.height, ignored.resolution]).toEqual([1024, 1024, null])
    expect(ignored.adjustments).toEqual([{ field: "resolution", requested: "1080p", applied: null, reason: "ignored when ratio is 1:1 (output is always 1024x1024)" }])
  })
  it("16:9 and 9:16 at 720p (default) and 1080p", () => {
    const size = (ratio: string, resolution?: string) => {
      const j = job("beta-imagine/text-to-image-standard", { ...p, ratio, ...(resolution ? { resolution } : {}) })
      return [j.width, j.height]
    }
    expect(size("16:9")).toEqual([1280, 720])
    expect(size("9:16", "1080p")).toEqual([1080, 1920])
    expect(refused("beta-imagine/text-to-image-standard", { ...p, ratio: "4:3" })).toBe("input.ratio must be one of 1:1, 16:9, 9:16 for beta-imagine/text-to-image-standard")
  })
  it("video defaults: 6 s, 9:16, 720p, mode custom; every enumeration checked", () => {
    const v = job("beta-imagine/text-to-video", p)
    expect([v.duration, v.ratio, v.resolution, v.width, v.height, v.params["mode"]]).toEqual([6, "9:16", "720p", 720, 1280, "custom"])
    const id = "beta-imagine/text-to-video"
    expect(refused(id, { ...p, duration: 8 })).toBe(`input.duration must be one of 6, 10, 12, 16, 20 for ${id}`)
    expect(refused(id, { ...p, resolution: "1080p" })).toBe(`input.resolution must be one of 480p, 720p for ${id}`)
    expect(refused(id, { ...p, mode: "wild" })).toBe(`input.mode must be one of fun, normal, spicy, custom for ${id}`)
    expect(refused(id, { ...p, imageUrls: [img("a.png")] })).toBe(`input.imageUrls is not a supported field for ${id}`)
  })
})

describe("clip3", () => {
  const one = [img("1.jpg")]
  const two = [img("1.jpg"), img("2.jpg")]
  const three = [img("1.jpg"), img("2.jpg"), img("3.jpg")]
  it("infers the mode from the image count: 0 t2v, 1 i2v, 2 i2v-fl, 3 r2v", () => {
    expect(job("clip3_fast", p).mode).toBe("t2v")
    expect(job("clip3_fast", { ...p, imageUrls: one }).mode).toBe("i2v")
    expect(job("clip3_fast", { ...p, imageUrls: two }).mode).toBe("i2v-fl")
    expect(job("clip3_fast", { ...p, imageUrls: three }).mode).toBe("r2v")
  })
  it("an explicit mode overrides inference (r2v with 1 or 2 images)", () => {
    expect(job("clip3_fast", { ...p, imageUrls: one, mode: "r2v" }).mode).toBe("r2v")
    expect(job("clip3_fast", { ...p, imageUrls: two, mode: "r2v" }).mode).toBe("r2v")
    expect(refused("clip3", { ...p, mode: "i2v" })).toBe("input.mode needs imageUrls for clip3")
    expect(refused("clip3", { ...p, imageUrls: two, mode: "i2v" })).toBe("input.imageUrls must contain exactly 1 URL in mode i2v for clip3")
    expect(refused("clip3", { ...p, imageUrls: three, mode: "i2v-fl" })).toBe("input.imageUrls must contain exactly 2 URLs (first and last frame) in mode i2v-fl for clip3")
  })
  it("defaults: 16:9, standard 720p, 8 s", () => {
    const j = job("clip3_fast", p)
    expect([j.ratio, j.resolution, j.duration, j.width, j.height]).toEqual(["16:9", "720p", 8, 1280, 720])
    expect(job("clip3_fast", { ...p, resolution: "4k", ratio: "9:16" })).toMatchObject({ width: 2160, height: 3840 })
  })
  it("rule 1: credits scale linearly with duration", () => {
    expect(price("clip3_fast", { ...p, duration: 4, imageUrls: two }) * 2).toBe(price("clip3_fast", { ...p, duration: 8, imageUrls: two }))
  })
  it("rule 2: i2v-fl honours 4, 6, 8 on every tier", () => {
    for (const tier of ["clip3", "clip3_fast", "clip3_lite"]) {
      for (const duration of [4, 6, 8]) expect(job(tier, { ...p, imageUrls: two, duration }).duration).toBe(duration)
    }
  })
  it("rule 3: i2v: clip3_lite honours 4, 6, 8; clip3 and clip3_fast silently use 8; resolution ignored", () => {
    expect(job("clip3_lite", { ...p, imageUrls: one, duration: 4 }).duration).toBe(4)
    for (const tier of ["clip3", "clip3_fast"]) {
      const j = job(tier, { ...p, imageUrls: one, duration: 6, resolution: "1080p" })
      expect([j.duration, j.resolution]).toEqual([8, "720p"])
      expect(j.adjustments.map((a) => a.field)).toEqual(["duration", "resolution"])
      expect(j.adjustments[0]).toMatchObject({ requested: 6, applied: 8 })
    }
  })
  it("rule 4: r2v supports only 8; 4 or 6 silently become 8", () => {
    const j = job("clip3_fast", { ...p, imageUrls: three, duration: 4 })
    expect(j.duration).toBe(8)
    expect(j.adjustments).toEqual([{ field: "duration", requested: 4, applied: 8, reason: "r2v supports only 8 seconds" }])
  })
  it("rule 5: r2v on clip3 runs as clip3_fast", () => {
    const j = job("clip3", { ...p, imageUrls: three })
    expect(j.model).toBe("clip3_fast")
    expect(j.adjustments[0]).toMatchObject({ field: "model", requested: "clip3", applied: "clip3_fast" })
  })
  it("rule 6: clip3_lite supports only i2v (720p) and i2v-fl; 3 images fail", () => {
    expect(refused("clip3_lite", { ...p, imageUrls: three })).toBe("input.imageUrls must contain 1 or 2 URLs (clip3_lite supports only i2v and i2v-fl) for clip3_lite")
    expect(refused("clip3_lite", p)).toBe("input.imageUrls is required (clip3_lite supports only i2v and i2v-fl) for clip3_lite")
    expect(refused("clip3_lite", { ...p, imageUrls: one, mode: "r2v" })).toBe("input.mode r2v is not supported by clip3_lite (only i2v and i2v-fl) for clip3_lite")
    const lite = job("clip3_lite", { ...p, imageUrls: two, resolution: "4k" })
    expect([lite.resolution, lite.height]).toEqual(["720p", 720])
    expect(lite.adjustments).toEqual([{ field: "resolution", requested: "4k", applied: null, reason: "clip3_lite outputs 720p only" }])
  })
  it("rule 7: t2v on clip3 (quality) runs 8 s; clip3_fast honours the duration", () => {
    expect(job("clip3", { ...p, duration: 4 }).duration).toBe(8)
    expect(job("clip3_fast", { ...p, duration: 4 }).duration).toBe(4)
  })
  it("enumerations", () => {
    expect(refused("clip3", { ...p, duration: 5 })).toBe("input.duration must be one of 4, 6, 8 for clip3")
    expect(refused("clip3", { ...p, ratio: "1:1" })).toBe("input.ratio must be one of 16:9, 9:16 for clip3")
    expect(refused("clip3", { ...p, resolution: "720p" })).toBe("input.resolution must be one of 1080p, 4k for clip3")
    expect(refused("clip3", { ...p, imageUrls: ["http://example.com/a.jpg"] })).toBe("input.imageUrls[0] must be an absolute https URL for clip3")
  })
})

describe("motion", () => {
  const materialTable: ReadonlyArray<[string, string]> = [
    [".jpg", "image"], [".jpeg", "image"], [".png", "image"], [".webp", "image"], [".gif", "image"], [".bmp", "image"],
    [".mp4", "video"], [".mov", "video"], [".m4v", "video"], [".mp3", "audio"], [".wav", "audio"]
  ]
  for (const [extension, type] of materialTable) {
    it(`material ${extension} is ${type}; motion-1.5-pro takes it only if an image (else the task fails)`, () => {
      expect(Motion.materialType(img(`clip${extension}`))).toBe(type)
      expect(Motion.materialType(img(`CLIP${extension.toUpperCase()}?v=2`))).toBe(type)
      expect(job("motion-2.0", { ...p, mediaUrls: [img(`a${extension}`)] }).mode).toBe(type === "image" ? "first-frame" : "multimodal-reference")
      const outcome = Either.getOrThrow(normalize("motion-1.5-pro", { ...p, mediaUrls: [img(`a${extension}`)] }))
      expect(outcome.rejection === undefined).toBe(type === "image")
    })
  }

  it("material type from the extension selects the mode", () => {
    expect(job("motion-2.0", p).mode).toBe("text-to-video")
    expect(job("motion-2.0", { ...p, mediaUrls: [img("a.JPG?x=1")] }).mode).toBe("first-frame")
    expect(job("motion-2.0", { ...p, mediaUrls: [img("a.png"), img("b.webp")] }).mode).toBe("first-last-frame")
    expect(job("motion-2.0", { ...p, mediaUrls: [img("a.png"), img("b.gif"), img("c.bmp")] }).mode).toBe("multi-image-reference")
    expect(job("motion-2.0-fast", { ...p, mediaUrls: [img("a.png"), img("b.mov")] }).mode).toBe("multimodal-reference")
    expect(job("motion-2.0", { ...p, mediaUrls: [img("a.mp3")] }).mode).toBe("multimodal-reference")
    // The URL does not tell the type: kept, typed from the file when it is fetched.
    expect(Motion.materialType(img("a.txt"))).toBeUndefined()
    expect(job("motion-2.0", { ...p, mediaUrls: [img("a.txt")] }).mode).toBe("undetermined")
  })
  it("motion-1.5-pro takes at most 2 images and no video or audio; a violation fails the task", () => {
    const rejection = (input: Record<string, unknown>) => Either.getOrThrow(normalize("motion-1.5-pro", input)).rejection
    expect(job("motion-1.5-pro", { ...p, mediaUrls: [img("a.png"), img("b.png")] }).mode).toBe("first-last-frame")
    expect(rejection({ ...p, mediaUrls: [img("a.png"), img("b.png"), img("c.png")] })).toBe("mediaUrls may contain at most 2 images for motion-1.5-pro")
    expect(rejection({ ...p, mediaUrls: [img("a.png"), img("b.mp4")] })).toBe("mediaUrls[1] is a video material; motion-1.5-pro accepts images only")
    expect(rejection({ ...p, mediaUrls: [img("b.wav")] })).toBe("mediaUrls[0] is an audio material; motion-1.5-pro accepts images only")
  })
  it("fallback defaults to motion-1.5-pro for motion-2.0 and motion-2.0-fast", () => {
    expect(job("motion-2.0", p).fallbackModel).toBe("motion-1.5-pro")
    expect(job("motion-2.0-fast", { ...p, mediaUrls: [img("a.png"), img("b.png")] }).fallbackModel).toBe("motion-1.5-pro")
    expect(job("motion-2.0", { ...p, fallback: false }).fallbackModel).toBeNull()
    expect(job("motion-1.5-pro", p).fallbackModel).toBeNull()
  })
  it("multimodal requests never fall back: video, audio, more than 2 images, @ references in three forms", () => {
    const never = [
      { mediaUrls: [img("a.mp4")] },
      { mediaUrls: [img("a.wav")] },
      { mediaUrls: [img("a.png"), img("b.png"), img("c.png")] },
      { prompt: "@1 dances", mediaUrls: [img("a.png")] },
      { prompt: "@图1 dances" },
      { prompt: "@image2 dances" }
    ]
    for (const input of never) {
      const j = job("motion-2.0", { ...p, ...input, fallback: true })
      expect(j.fallbackModel).toBeNull()
      expect(j.adjustments[0]).toMatchObject({ field: "fallback", requested: true, applied: false })
    }
  })
  it("a failed job falls back to motion-1.5-pro with a 5 or 10 s duration, recorded", () => {
    const original = { ...job("motion-2.0", { ...p, duration: 12 }), priceMicroUsd: 0 }
    const fallback = Motion.fallbackJob(original, "upstream exploded")
    expect([fallback.model, fallback.duration, fallback.fallbackModel]).toEqual(["motion-1.5-pro", 10, null])
    expect(fallback.adjustments.map((a) => a.field)).toEqual(["model", "duration"])
    expect(Motion.fallbackJob({ ...original, duration: 4 }, "x").duration).toBe(5)
  })
  it("text-to-video passes unknown fields through; media-to-video refuses them", () => {
    expect(job("motion-2.0", { ...p, camera: "dolly" }).params["camera"]).toBe("dolly")
    expect(refused("motion-2.0", { ...p, mediaUrls: [img("a.png")], camera: "dolly" })).toBe("input.camera is not a supported field for motion-2.0")
  })
  it("defaults ratio 16:9, 720p, 5 s; enumerations checked", () => {
    expect(job("motion-2.0", p)).toMatchObject({ ratio: "16:9", resolution: "720p", duration: 5, width: 1280, height: 720 })
    expect(refused("motion-2.0", { ...p, ratio: "21:9" })).toBe("input.ratio must be one of 1:1, 4:3, 3:4, 16:9, 9:16 for motion-2.0")
    expect(refused("motion-2.0", { ...p, fallback: "yes" })).toBe("input.fallback must be true or false for motion-2.0")
  })
})

describe("motion-2.0-pro and canvas-video", () => {
  for (const id of ["motion-2.0-pro", "canvas-video-3.5-pro", "canvas-video-2.0"]) {
    it(`${id}: the image count chooses the mode; duration 5, 10, 15`, () => {
      expect(job(id, p).mode).toBe("text-to-video")
      expect(job(id, { ...p, imageUrls: [img("1.png")] }).mode).toBe("first-frame")
      expect(job(id, { ...p, imageUrls: [img("1.png"), img("2.png")] }).mode).toBe("first-last-frame")
      expect(job(id, { ...p, imageUrls: [img("1.png"), img("2.png"), img("3.png")] }).mode).toBe("multi-image-reference")
      expect(refused(id, { ...p, imageUrls: ["1", "2", "3", "4"].map(img) })).toBe(`input.imageUrls must contain between 1 and 3 URLs for ${id}`)
      expect(refused(id, { ...p, duration: 7 })).toBe(`input.duration must be one of 5, 10, 15 for ${id}`)
      expect(job(id, { ...p, seed: 42 }).params["seed"]).toBe(42)
      expect(refused(id, { ...p, imageUrls: [img("1.png")], seed: 42 })).toBe(`input.seed is not a supported field for ${id}`)
    })
  }
})

describe("compact-image", () => {
  it("compact-image accepts only 16:9 and 9:16 and always runs 1k", () => {
    expect(refused("compact-image", { ...p, ratio: "1:1" })).toBe("input.ratio must be one of 16:9, 9:16 for compact-image")
    const j = job("compact-image", { ...p, resolution: "4k" })
    expect(j.resolution).toBe("1k")
    expect(j.adjustments).toEqual([{ field: "resolution", requested: "4k", applied: "1k", reason: "compact-image is always 1k" }])
  })
  it("compact-image-2 and -pro take 5 ratios and 1k, 2k, 4k; default 16:9 1k", () => {
    expect(job("compact-image-pro", p)).toMatchObject({ ratio: "16:9", resolution: "1k", width: 1024, height: 576, n: 1 })
    expect(job("compact-image-2", { ...p, ratio: "3:4", resolution: "2k" })).toMatchObject({ width: 1536, height: 2048 })
    expect(refused("compact-image-2", { ...p, ratio: "21:9" })).toBe("input.ratio must be one of 16:9, 9:16, 1:1, 4:3, 3:4 for compact-image-2")
  })
})

describe("canvas image models", () => {
  it("the images field switches to image-to-image; several images are returned; unknown fields pass", () => {
    for (const id of allIds.filter((i) => /^canvas-(\d|xl)/.test(i))) {
      expect(job(id, p)).toMatchObject({ mode: "text-to-image", n: 4 })
      expect(job(id, { ...p, images: [img("a.png")] })).toMatchObject({ mode: "image-to-image", imageUrls: [img("a.png")] })
      expect(job(id, { ...p, style: "noir" }).params).toEqual({ style: "noir" })
    }
    expect(refused("canvas-4.0", { ...p, images: [] })).toBe("input.images must contain between 1 and 10 URLs for canvas-4.0")
  })
})

describe("dream", () => {
  it("imageUrls selects image-to-image; n images; ratio and resolution enumerations", () => {
    expect(job("dream-4.5", { ...p, n: 12 })).toMatchObject({ mode: "text-to-image", n: 12, ratio: "1:1", resolution: "2k" })
    expect(refused("dream-4.5", { ...p, ratio: "2:1" })).toBe("input.ratio must be one of 1:1, 4:3, 3:4, 16:9, 9:16, 3:2, 2:3, 21:9 for dream-4.5")
    expect(refused("dream-4.5", { ...p, resolution: "8k" })).toBe("input.resolution must be one of 1k, 2k, 4k for dream-4.5")
  })
})

describe("prices in the catalog", () => {
  it("come from the price table in force: an operator's table changes them", () => {
    const motion = ModelCatalog.allModels.find((model) => model.id === "motion-2.0")!
    const table = { ...Pricing.defaultPrices, videoPerSecond: { ...Pricing.defaultPrices.videoPerSecond, "motion-2.0": 100_000 } }
    const five = (info: ReturnType<typeof ModelInfo.describe>) => info.prices.find((priced) => priced.input["duration"] === 5)?.usd
    expect(five(ModelInfo.describe(motion))).toBe(0.2)
    expect(five(ModelInfo.describe(motion, table))).toBe(0.5)
  })
})
