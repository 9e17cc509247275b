import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { randomBytes } from "node:crypto"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { RateLimit } from "../src/index.js"

/** Heap in use after a full collection. */
const heapAfterGc = () => {
  setFlagsFromString("--expose-gc")
  ;(runInNewContext("gc") as () => void)()
  return process.memoryUsage().heapUsed
}

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

  it.effect("6,000 distinct 15 KB wrong keys: at most maxKeys buckets, and no key kept (heap grows by under 4 MB, not 90)", () =>
    Effect.gen(function*() {
      const limit = RateLimit.make({ perSecond: 50 })
      const before = heapAfterGc()
      for (let i = 0; i < 6_000; i++) yield* limit.take(randomBytes(7_500).toString("hex"))
      const grown = heapAfterGc() - before
      expect(yield* limit.size).toBe(6_000)
      // Kept as Map keys, the keys alone were 90 MB (6,000 x 15 KB).
      expect(grown).toBeLessThan(4 * 1024 * 1024)
      // The cap holds past the default of 10,000.
      for (let i = 0; i < 6_000; i++) yield* limit.take(`other-${i}`)
      expect(yield* limit.size).toBe(10_000)
    }))

  it.effect("a bucket idle long enough to be full again is dropped", () =>
    Effect.gen(function*() {
      const limit = RateLimit.make({ perSecond: 5, burst: 10 })
      for (let i = 0; i < 100; i++) yield* limit.take(`key-${i}`)
      expect(yield* limit.size).toBe(100)
      yield* TestClock.adjust("1999 millis")
      yield* limit.take("late")
      expect(yield* limit.size).toBe(101)
      yield* TestClock.adjust("1 millis")
      yield* limit.take("late")
      expect(yield* limit.size).toBe(1)
    }))
})
