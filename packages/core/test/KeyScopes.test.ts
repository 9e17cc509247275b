import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { ApiKeys, KeyScopes } from "../src/index.js"

const scope = (models: ReadonlyArray<string> | null): ApiKeys.KeyScope => ({ ...ApiKeys.unscoped, models })

describe("KeyScopes", () => {
  it("models: glob patterns match whole model ids; no patterns is every model", () => {
    const s = scope(["alpha-*", "motion-2.0?fast", "clip[0-9]"])
    expect(KeyScopes.modelAllowed(s, "alpha-image-2")).toBe(true)
    expect(KeyScopes.modelAllowed(s, "alpha-image-2/text-to-image")).toBe(true)
    expect(KeyScopes.modelAllowed(scope(["*/edit"]), "alpha-image-2/edit")).toBe(true)
    expect(KeyScopes.modelAllowed(scope(["*/edit"]), "alpha-image-2/text-to-image")).toBe(false)
    expect(KeyScopes.modelAllowed(scope(["clip3"]), "clip3/x")).toBe(false)
    expect(KeyScopes.modelAllowed(s, "motion-2.0-fast")).toBe(true)
    expect(KeyScopes.modelAllowed(s, "clip3")).toBe(true)
    expect(KeyScopes.modelAllowed(s, "clip33")).toBe(false)
    expect(KeyScopes.modelAllowed(s, "beta-imagine")).toBe(false)
    expect(KeyScopes.modelAllowed(s, "xalpha-image-2")).toBe(false)
    expect(KeyScopes.modelAllowed(s, "motion-2.0-pro")).toBe(false)
    expect(KeyScopes.modelAllowed(scope(["*"]), "anything.v2")).toBe(true)
    expect(KeyScopes.modelAllowed(scope(null), "clip3")).toBe(true)
    expect(KeyScopes.modelAllowed(undefined, "clip3")).toBe(true)
    expect(KeyScopes.modelAllowed(scope([]), "clip3")).toBe(false)
  })

  it("parseModels: a comma list, trimmed, repeats dropped; bad patterns name the rule", () => {
    expect(KeyScopes.parseModels(" alpha-* , clip3,alpha-*")).toEqual(Either.right(["alpha-*", "clip3"]))
    expect(Either.getLeft(KeyScopes.parseModels(""))).toEqual(Either.getLeft(KeyScopes.parseModels(" , ")))
    expect(Either.isLeft(KeyScopes.parseModels("alpha-*,"))).toBe(true)
    expect(Either.getLeft(KeyScopes.parseModels("{a,b}"))._tag).toBe("Some")
    expect(Either.getLeft(KeyScopes.parseModels("!clip3"))).toEqual(
      Either.getLeft(KeyScopes.parsePattern("!clip3"))
    )
    expect(Either.getOrThrow(Either.flip(KeyScopes.parseModels("clip[3")))).toContain("not a valid glob")
    expect(Either.getOrThrow(Either.flip(KeyScopes.parseModels("a b")))).toContain("may hold only")
    expect(Either.isLeft(KeyScopes.parseModels("x".repeat(129)))).toBe(true)
    expect(Either.isLeft(KeyScopes.parseModels(Array.from({ length: 65 }, (_, i) => `m${i}`).join(",")))).toBe(true)
    expect(KeyScopes.checkModels(["alpha-*", "clip3"])).toEqual(Either.right(["alpha-*", "clip3"]))
    expect(Either.isLeft(KeyScopes.checkModels(["a,b"]))).toBe(true)
    expect(Either.isLeft(KeyScopes.checkModels([]))).toBe(true)
  })

  it("parseMonthlyCap: dollars to micro-USD, with the rule when refused", () => {
    expect(KeyScopes.parseMonthlyCap("50")).toEqual(Either.right(50_000_000))
    expect(KeyScopes.parseMonthlyCap("$12.50")).toEqual(Either.right(12_500_000))
    expect(Either.getOrThrow(Either.flip(KeyScopes.parseMonthlyCap("0")))).toBe("the monthly cap must be more than zero")
    expect(Either.getOrThrow(Either.flip(KeyScopes.parseMonthlyCap("ten")))).toContain("the monthly cap must be an amount in US dollars")
  })

  it("parseRateLimit: per second, minute or hour; burst the per-second figure rounded up, at least 1", () => {
    expect(KeyScopes.parseRateLimit("10/s")).toEqual(Either.right({ perSecond: 10, burst: 10 }))
    expect(KeyScopes.parseRateLimit("600/min")).toEqual(Either.right({ perSecond: 10, burst: 10 }))
    expect(KeyScopes.parseRateLimit("36000/h")).toEqual(Either.right({ perSecond: 10, burst: 10 }))
    expect(KeyScopes.parseRateLimit(" 90 / MIN ")).toEqual(Either.right({ perSecond: 1.5, burst: 2 }))
    expect(KeyScopes.parseRateLimit("1/h")).toEqual(Either.right({ perSecond: 1 / 3600, burst: 1 }))
    for (const bad of ["0/s", "10", "10/day", "-1/s", "1.5/s", "2000000/s", ""]) {
      expect(Either.isLeft(KeyScopes.parseRateLimit(bad)), bad).toBe(true)
    }
    expect(KeyScopes.formatRateLimit({ perSecond: 10, burst: 10 })).toBe("10/s")
    expect(KeyScopes.formatRateLimit({ perSecond: 1.5, burst: 2 })).toBe("90/min")
    expect(KeyScopes.formatRateLimit({ perSecond: 1 / 3600, burst: 1 })).toBe("1/h")
    expect(KeyScopes.formatRateLimit({ perSecond: 5, burst: 20 })).toBe("5/s (burst 20)")
  })

  it("refusals name the rule; months are UTC", () => {
    expect(KeyScopes.modelRefusal(scope(["alpha-*", "motion-*"]), "clip3")).toBe("this key may not use clip3; it may use: alpha-*, motion-*")
    expect(KeyScopes.capRefusal({ capMicroUsd: 50_000_000, month: "2026-12" })).toBe("this key has spent its $50.00 cap for 2026-12")
    expect(KeyScopes.monthOf(Date.UTC(2026, 11, 31, 23, 59, 59, 999))).toBe("2026-12")
    expect(KeyScopes.monthOf(Date.UTC(2027, 0, 1))).toBe("2027-01")
    expect(KeyScopes.nextMonthStart(Date.UTC(2026, 11, 15))).toBe(Date.UTC(2027, 0, 1))
    expect(KeyScopes.describe(undefined)).toBe("unscoped")
    expect(KeyScopes.describe({ models: ["clip3"], monthlyCapMicroUsd: 50_000_000, rateLimit: { perSecond: 10, burst: 10 } }))
      .toBe("models clip3; cap $50.00 a month; 10/s")
  })
})
