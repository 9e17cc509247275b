/**
 * Media URL fields are marked by an annotation in each model's schema: the submit policy
 * checks every URL the schema marks, whatever the field is called.
 */
import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { Fields, ModelCatalog } from "../src/index.js"

const a = "https://example.com/a.png"
const b = "https://example.com/b.png"

describe("the MediaUrls annotation", () => {
  it("finds a marked field whatever its name, optional or required, refined or not", () => {
    const schema = Schema.Struct({
      prompt: Fields.Prompt,
      refs: Schema.optional(Fields.urlList(1, 3)),
      cover: Fields.HttpsUrl.annotations({ [Fields.MediaUrls]: true }),
      notes: Schema.optional(Schema.Array(Schema.String))
    }).pipe(Schema.filter(() => true))
    expect(Fields.mediaUrlFields(schema)).toEqual(["refs", "cover"])
    expect(Fields.mediaUrlsOf(schema)({ prompt: "p", refs: [a, b], cover: a, notes: [b] })).toEqual([
      { path: "refs[0]", url: a },
      { path: "refs[1]", url: b },
      { path: "cover", url: a }
    ])
    expect(Fields.mediaUrlsOf(schema)({ prompt: "p", cover: b })).toEqual([{ path: "cover", url: b }])
  })
  it("an unmarked array of strings is no media", () => {
    expect(Fields.mediaUrlFields(Schema.Struct({ tags: Schema.Array(Schema.String) }))).toEqual([])
  })
})

describe("every model marks its media fields", () => {
  const expected: Readonly<Record<string, ReadonlyArray<string>>> = {
    "alpha-image-2/text-to-image": [],
    "alpha-image-2/image-to-image": ["imageUrls"],
    "beta-imagine/text-to-image-lite": [],
    "beta-imagine/text-to-image-standard": [],
    "beta-imagine/text-to-image-pro": [],
    "beta-imagine/text-to-video": [],
    "beta-imagine/image-to-video": ["imageUrls"],
    "motion-2.0": ["mediaUrls", "imageUrls"],
    "motion-2.0-fast": ["mediaUrls", "imageUrls"],
    "motion-1.5-pro": ["mediaUrls", "imageUrls"]
  }
  const fieldFor = (id: string): ReadonlyArray<string> =>
    expected[id] ?? (/^canvas-(\d|xl)/.test(id) ? ["images"] : ["imageUrls"])
  for (const model of ModelCatalog.allModels) {
    it(`${model.id}: ${fieldFor(model.id).join(", ") || "none"}`, () => {
      expect(Fields.mediaUrlFields(model.inputSchema)).toEqual(fieldFor(model.id))
      for (const field of fieldFor(model.id)) {
        expect(model.mediaUrls({ prompt: "p", [field]: [a, b] })).toEqual([
          { path: `${field}[0]`, url: a },
          { path: `${field}[1]`, url: b }
        ])
      }
      expect(model.mediaUrls({ prompt: "p" })).toEqual([])
    })
  }
})
