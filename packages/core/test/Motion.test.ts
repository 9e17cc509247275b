/**
 * motion-2.0, motion-2.0-fast, motion-1.5-pro (spec 4.3): @ references, the ordered
 * mediaUrls rules at every boundary, materials whose type the URL does not tell.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, Option } from "effect"
import { ModelCatalog, ModelInfo, Motion } from "../src/index.js"
import type { DraftJob, Normalized } from "../src/index.js"

const catalog = ModelCatalog.make(ModelCatalog.allModels)
const normalize = (id: string, input: Record<string, unknown>): Either.Either<Normalized, { message: string }> =>
  Option.getOrThrow(catalog.find(id)).normalize(input)
const accepted = (id: string, input: Record<string, unknown>): Normalized => {
  const outcome = normalize(id, input)
  if (Either.isLeft(outcome)) throw new Error(`${id} refused ${JSON.stringify(input)}: ${outcome.left.message}`)
  return outcome.right
}
const job = (id: string, input: Record<string, unknown>): DraftJob => accepted(id, input).job
const url = (name: string) => `https://example.com/${name}`
const many = (count: number, extension: string) => Array.from({ length: count }, (_, i) => url(`${i}${extension}`))
const p = { prompt: "a test" }

describe("@ references (whole tokens only)", () => {
  const table: ReadonlyArray<[string, boolean]> = [
    ["@1 dances", true],
    ["@12 dances", true],
    ["@9", true],
    ["@图1 dances", true],
    ["@image1 dances", true],
    ["@Image2 dances", true],
    ["@IMAGE3", true],
    ["from @1 to @2.", true],
    ["(@1)", true],
    ["@1, then @2", true],
    ["参考@图1跳舞", true],
    ["the cat in @1跳舞", true],
    ["mail bob@1mail.com", false],
    ["bob@1mail.com", false],
    ["x@12.example", false],
    ["@1abc", false],
    ["@1_x", false],
    ["@1.5x speed", false],
    ["@0", false],
    ["@image", false],
    ["@images1", false],
    ["@图", false],
    ["@ 1", false],
    ["no references at all", false],
    ["price@1", false],
    ["@1mail.com", false]
  ]
  for (const [prompt, expected] of table) {
    it(`${JSON.stringify(prompt)} ${expected ? "references" : "does not reference"} a material`, () => {
      expect(Motion.hasReferences(prompt)).toBe(expected)
      // The fallback is the behaviour a client sees: a reference disables it.
      expect(job("motion-2.0", { prompt }).fallbackModel).toBe(expected ? null : "motion-1.5-pro")
    })
  }
})

/** What a request leads to: a 400 (refused), a task that fails at once (rejection), or a task that runs. */
const outcome = (id: string, input: Record<string, unknown>): string => {
  const result = normalize(id, input)
  if (Either.isLeft(result)) return `400: ${result.left.message}`
  return result.right.rejection === undefined ? `runs ${result.right.job.mode}` : `FAILURE: ${result.right.rejection}`
}

describe("mediaUrls: the spec's rules in the spec's order fail the task, never the submit call", () => {
  const count = "FAILURE: mediaUrls must contain between 1 and 12 URLs"
  const nine = "FAILURE: mediaUrls may contain at most 9 images"
  const twoOnPro = "FAILURE: mediaUrls may contain at most 2 images for motion-1.5-pro"
  // [materials, motion-2.0 and motion-2.0-fast, motion-1.5-pro]
  const table: ReadonlyArray<[string, ReadonlyArray<string>, string, string]> = [
    ["no URLs", [], count, count],
    ["1 image", many(1, ".png"), "runs first-frame", "runs first-frame"],
    ["2 images", many(2, ".png"), "runs first-last-frame", "runs first-last-frame"],
    ["3 images", many(3, ".png"), "runs multi-image-reference", twoOnPro],
    ["9 images", many(9, ".png"), "runs multi-image-reference", twoOnPro],
    ["10 images", many(10, ".png"), nine, nine],
    ["12 images", many(12, ".png"), nine, nine],
    ["13 images", many(13, ".png"), count, count],
    ["13 URLs, one with an unknown extension", [...many(12, ".png"), url("notes.txt")], count, count],
    ["13 URLs, one without an extension", [...many(12, ".mp4"), url("signed?sig=abc")], count, count],
    ["12 URLs: 9 images, 3 untyped", [...many(9, ".png"), ...many(3, "")], "runs undetermined", twoOnPro],
    ["12 URLs: 10 images, 2 untyped", [...many(10, ".png"), ...many(2, "")], nine, nine],
    ["9 images, a video, an audio", [...many(9, ".png"), url("a.mp4"), url("b.wav")], "runs multimodal-reference", "FAILURE: mediaUrls[9] is a video material; motion-1.5-pro accepts images only"],
    ["1 video", [url("a.mp4")], "runs multimodal-reference", "FAILURE: mediaUrls[0] is a video material; motion-1.5-pro accepts images only"],
    ["1 audio", [url("a.mp3")], "runs multimodal-reference", "FAILURE: mediaUrls[0] is an audio material; motion-1.5-pro accepts images only"],
    ["2 images, an audio", [url("a.png"), url("b.png"), url("c.wav")], "runs multimodal-reference", "FAILURE: mediaUrls[2] is an audio material; motion-1.5-pro accepts images only"],
    ["12 videos", many(12, ".mov"), "runs multimodal-reference", "FAILURE: mediaUrls[0] is a video material; motion-1.5-pro accepts images only"],
    ["1 URL without an extension", [url("signed?X-Amz-Signature=abc")], "runs undetermined", "runs first-frame"],
    ["1 URL with an unknown extension", [url("clip.avi")], "runs undetermined", "runs first-frame"],
    ["an image and an untyped URL", [url("a.png"), url("b")], "runs undetermined", "runs first-last-frame"],
    ["a video and an untyped URL", [url("a.mp4"), url("b")], "runs multimodal-reference", "FAILURE: mediaUrls[0] is a video material; motion-1.5-pro accepts images only"],
    ["3 untyped URLs", many(3, ""), "runs undetermined", twoOnPro]
  ]
  for (const [name, urls, on20, on15] of table) {
    it(`${name}: motion-2.0 and -fast ${on20}; motion-1.5-pro ${on15}`, () => {
      expect(outcome("motion-2.0", { ...p, mediaUrls: urls })).toBe(on20)
      expect(outcome("motion-2.0-fast", { ...p, mediaUrls: urls })).toBe(on20)
      expect(outcome("motion-1.5-pro", { ...p, mediaUrls: urls })).toBe(on15)
    })
  }
  it("imageUrls, the other name of mediaUrls, follows the same rules and names itself", () => {
    expect(outcome("motion-1.5-pro", { ...p, imageUrls: many(3, ".png") })).toBe("FAILURE: imageUrls may contain at most 2 images for motion-1.5-pro")
    expect(outcome("motion-2.0", { ...p, imageUrls: many(13, "") })).toBe("FAILURE: imageUrls must contain between 1 and 12 URLs")
  })
  it("a URL that is not an absolute http(s) URL is still a 400", () => {
    expect(outcome("motion-2.0", { ...p, mediaUrls: ["not a url"] })).toBe("400: input.mediaUrls[0] must be an absolute http or https URL for motion-2.0")
  })
})

describe("materials whose type the URL does not tell", () => {
  it("are kept in order as type unknown, and not passed on as images", () => {
    const j = job("motion-2.0", { ...p, mediaUrls: [url("a.png"), url("signed?sig=1"), url("c.avi"), url("d.mp3")] })
    expect(j.params["materials"]).toEqual([
      { url: url("a.png"), type: "image" },
      { url: url("signed?sig=1"), type: "unknown" },
      { url: url("c.avi"), type: "unknown" },
      { url: url("d.mp3"), type: "audio" }
    ])
    expect(j.imageUrls).toEqual([url("a.png")])
  })
  it("never fall back on motion-2.0 (they may be video or audio); an explicit fallback: true is recorded as not applied", () => {
    for (const id of ["motion-2.0", "motion-2.0-fast"]) {
      expect(job(id, { ...p, mediaUrls: [url("signed")] }).fallbackModel).toBeNull()
      expect(job(id, { ...p, mediaUrls: [url("signed")] }).adjustments).toEqual([])
      expect(job(id, { ...p, mediaUrls: [url("a.png"), url("signed")], fallback: true }).adjustments).toEqual([
        { field: "fallback", requested: true, applied: false, reason: "materials whose type the URL does not tell may be video or audio, which never fall back" }
      ])
      expect(job(id, { ...p, mediaUrls: [url("a.png"), url("b.jpg")] }).fallbackModel).toBe("motion-1.5-pro")
    }
  })
})

describe("catalog text claims only what the code does", () => {
  for (const id of ["motion-2.0", "motion-2.0-fast", "motion-1.5-pro"]) {
    it(`${id}: the 15 s totals of video and audio are said to be checked where MediaUpstream runs; unknown materials explained`, () => {
      const limits = ModelInfo.describe(Option.getOrThrow(catalog.find(id))).limits
      expect(limits[0]).toBe(
        "mediaUrls 1 to 12, at most 9 images, total video at most 15 s, total audio at most 15 s, in that order (a violation fails the task with INVALID_PARAMETERS); the counts by URL at submit, then every rule again with each file's type and duration from its bytes when the upstream is wrapped with MediaUpstream (the standalone server)"
      )
      expect(limits).toContain(
        id === "motion-1.5-pro"
          ? "material type from the URL's extension; a URL without a known one is kept as type unknown (typed from the file's bytes where MediaUpstream runs, as in the standalone server) and counts as one of the 2 images"
          : "material type from the URL's extension; a URL without a known one is kept as type unknown (typed from the file's bytes where MediaUpstream runs, as in the standalone server): it counts toward the 12 URLs but not as an image, and the request does not fall back"
      )
    })
  }
})
