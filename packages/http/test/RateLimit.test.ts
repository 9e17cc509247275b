import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { RateLimit } from "../src/index.js"

describe("RateLimit", () => {
  it.effect("a key gets its burst at once, then perSecond a second; other keys have their own buckets", () =>
    Effect.gen(function*() {
      const limit = RateLimit.make({ perSecond: 5, burst: 10 })
      for (let i = 0; i < 10; i++) expect((yield* limit.take("a"))._tag).toBe("Allowed")
      expect(yield* limit.take("a")).toEqual({ _tag: "Limited", retryAfterMs: 200 })
      expect((yield* limit.take("b"))._tag).toBe("Allowed")
      yield* TestClock.adjust("199 millis")
      expect((yield* limit.take("a"))._tag).toBe("Limited")
      yield* TestClock.adjust("1 millis")
      expect(yield* limit.take("a")).toEqual({ _tag: "Allowed", remaining: 0 })
      // An idle key refills up to its burst, not beyond.
      yield* TestClock.adjust("1 hour")
      for (let i = 0; i < 10; i++) expect((yield* limit.take("a"))._tag).toBe("Allowed")
      expect((yield* limit.take("a"))._tag).toBe("Limited")
    }))

  it.effect("at most maxKeys buckets are kept; the least recently used goes first and comes back full", () =>
    Effect.gen(function*() {
      const limit = RateLimit.make({ perSecond: 1, burst: 1, maxKeys: 2 })
      expect((yield* limit.take("a"))._tag).toBe("Allowed")
      expect((yield* limit.take("b"))._tag).toBe("Allowed")
      expect((yield* limit.take("b"))._tag).toBe("Limited")
      expect((yield* limit.take("c"))._tag).toBe("Allowed")
      // "a" was dropped: a new, full bucket.
      expect((yield* limit.take("a"))._tag).toBe("Allowed")
    }))

  it("a 429's headers: Retry-After in whole seconds, at least 1, and the IETF fields", () => {
    const limit = RateLimit.make({ perSecond: 5 })
    expect(RateLimit.limitedHeaders(limit, 200)).toEqual({
      "retry-after": "1",
      "ratelimit-policy": `"per-key";q=5;w=1`,
      ratelimit: `"per-key";r=0;t=1`
    })
    expect(RateLimit.limitedHeaders(limit, 2_500)["retry-after"]).toBe("3")
  })
})
