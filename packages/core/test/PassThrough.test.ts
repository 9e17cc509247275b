/**
 * Models whose field lists the spec leaves open pass unknown fields through, but a media
 * field under another model's name is refused, naming the field the model takes: it
 * would otherwise run in another mode than the client asked for (text instead of images).
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, Option } from "effect"
import { ModelCatalog } from "../src/index.js"

const catalog = ModelCatalog.make(ModelCatalog.allModels)
const normalize = (id: string, input: Record<string, unknown>) => Option.getOrThrow(catalog.find(id)).normalize(input)
const refused = (id: string, input: Record<string, unknown>): string => {
  const outcome = normalize(id, input)
  if (Either.isRight(outcome)) throw new Error(`${id} accepted ${JSON.stringify(input)} as ${outcome.right.job.mode}`)
  return outcome.left.message
}
const urls = ["https://example.com/a.png"]
const p = { prompt: "a test" }
const otherNames = ["imageUrls", "mediaUrls", "images", "image_urls", "media_urls", "image_url", "imageUrl"]

const cases: ReadonlyArray<[ids: ReadonlyArray<string>, own: ReadonlyArray<string>, hint: string]> = [
  [ModelCatalog.allModels.filter((m) => m.family === "canvas").map((m) => m.id), ["images"], "image-to-image takes input.images"],
  [
    ["motion-2.0-pro", "canvas-video-3.5-pro", "canvas-video-3.0-pro", "canvas-video-3.0", "canvas-video-2.0-pro", "canvas-video-2.0"],
    ["imageUrls"],
    "image-to-video takes input.imageUrls"
  ],
  [["motion-2.0", "motion-2.0-fast", "motion-1.5-pro"], ["mediaUrls", "imageUrls"], "media-to-video takes input.mediaUrls"]
]

describe("pass-through models refuse media fields they do not take", () => {
  for (const [ids, own, hint] of cases) {
    for (const id of ids) {
      it(`${id}: ${otherNames.filter((n) => !own.includes(n)).join(", ")} refused; ${own.join(", ")} and other unknown fields accepted`, () => {
        for (const name of otherNames.filter((n) => !own.includes(n))) {
          expect(refused(id, { ...p, [name]: urls })).toBe(`input.${name} is not a supported field for ${id}; ${hint}`)
          // Whatever the value: the field name is the client's intent.
          expect(refused(id, { ...p, [name]: "https://example.com/a.png" })).toBe(`input.${name} is not a supported field for ${id}; ${hint}`)
        }
        for (const name of own) expect(Either.isRight(normalize(id, { ...p, [name]: urls }))).toBe(true)
        expect(Either.getOrThrow(normalize(id, { ...p, style: "noir" })).job.params["style"]).toBe("noir")
      })
    }
  }
})
