import { describe, expect, it } from "@effect/vitest"
import { JsonDepth } from "../src/index.js"

const nested = (levels: number, open = "[", close = "]") => `${open.repeat(levels)}${close.repeat(levels)}`

describe("JsonDepth", () => {
  it("64 levels pass, 65 do not, arrays and objects alike", () => {
    expect(JsonDepth.maxDepth).toBe(64)
    expect(JsonDepth.exceeds(nested(64))).toBe(false)
    expect(JsonDepth.exceeds(nested(65))).toBe(true)
    const objects = (levels: number) => `${`{"a":`.repeat(levels)}1${"}".repeat(levels)}`
    expect(JsonDepth.exceeds(objects(64))).toBe(false)
    expect(JsonDepth.exceeds(objects(65))).toBe(true)
    // A 6 KB body 3,000 levels deep, the adversarial one.
    expect(JsonDepth.exceeds(`{"model":"m","input":${nested(3_000)}}`)).toBe(true)
  })

  it("brackets inside strings do not count, escaped quotes included; siblings do not add up", () => {
    expect(JsonDepth.exceeds(JSON.stringify({ prompt: "[".repeat(1_000) + "{".repeat(1_000) }))).toBe(false)
    expect(JsonDepth.exceeds(JSON.stringify({ prompt: `say \\"${"[".repeat(100)}` }))).toBe(false)
    expect(JsonDepth.exceeds(JSON.stringify({ prompt: "\\" }) + nested(65))).toBe(true)
    expect(JsonDepth.exceeds(Array.from({ length: 1_000 }, () => nested(60)).join(","))).toBe(false)
  })
})
