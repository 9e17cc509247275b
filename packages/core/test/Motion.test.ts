/**
 * motion-2.0, motion-2.0-fast, motion-1.5-pro (spec 4.3): @ references, the ordered
 * mediaUrls rules at every boundary, materials whose type the URL does not tell.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, Option } from "effect"
import { ModelCatalog, Motion } from "../src/index.js"
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
