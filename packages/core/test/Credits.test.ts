import { describe, expect, it } from "@effect/vitest"
import { Credits } from "@mediagate/core"

describe("Credits.usdDecimal", () => {
  it("writes micro-USD as dollars with exactly six decimals, no currency sign", () => {
    expect([0, 1, 1_500, 50_000, 400_000, 1_000_000, 12_345_678, -20_000].map(Credits.usdDecimal)).toEqual([
      "0.000000",
      "0.000001",
      "0.001500",
      "0.050000",
      "0.400000",
      "1.000000",
      "12.345678",
      "-0.020000"
    ])
  })

  it("reads back as the same amount", () => {
    for (const micro of [1, 999_999, 1_000_001, 123_456_789_012]) {
      expect(Math.round(Number(Credits.usdDecimal(micro)) * 1_000_000)).toBe(micro)
    }
  })
})
