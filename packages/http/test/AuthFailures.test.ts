import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { AuthFailures } from "../src/index.js"

describe("AuthFailures", () => {
  it.effect("an address gets its failures, then is limited until the window gives one back", () =>
    Effect.gen(function*() {
      const failures = AuthFailures.make({ failures: 3, window: "1 minute" })
      for (let i = 0; i < 3; i++) {
        expect((yield* failures.check("10.0.0.1", `wrong-${i}`))._tag).toBe("Allowed")
        yield* failures.record("10.0.0.1", `wrong-${i}`, false)
      }
      expect(yield* failures.check("10.0.0.1", "wrong-3")).toEqual({ _tag: "Limited", retryAfterMs: 20_000 })
      // Another address has its own count.
      expect((yield* failures.check("10.0.0.2", "wrong-3"))._tag).toBe("Allowed")
      yield* TestClock.adjust("19999 millis")
      expect((yield* failures.check("10.0.0.1", "wrong-3"))._tag).toBe("Limited")
      yield* TestClock.adjust("1 millis")
      expect((yield* failures.check("10.0.0.1", "wrong-3"))._tag).toBe("Allowed")
    }))

  it.effect("a key known to be good still goes through from a limited address; one that fails again is forgotten", () =>
    Effect.gen(function*() {
      const failures = AuthFailures.make({ failures: 1, window: "1 minute" })
      yield* failures.record("10.0.0.1", "good", true)
      yield* failures.record("10.0.0.1", "wrong", false)
      expect((yield* failures.check("10.0.0.1", "wrong"))._tag).toBe("Limited")
      expect((yield* failures.check("10.0.0.1", "good"))._tag).toBe("Allowed")
      // Revoked since: its next 401 takes it off the list.
      yield* failures.record("10.0.0.1", "good", false)
      expect((yield* failures.check("10.0.0.1", "good"))._tag).toBe("Limited")
    }))

  it.effect("memory stays bounded: addresses with no failures are not kept, idle ones are dropped, at most maxEntries", () =>
    Effect.gen(function*() {
      const failures = AuthFailures.make({ failures: 5, window: "1 minute", maxEntries: 100 })
      for (let i = 0; i < 1_000; i++) yield* failures.check(`10.0.${i >> 8}.${i & 255}`, "k")
      expect(failures.size()).toBe(0)
      for (let i = 0; i < 1_000; i++) yield* failures.record(`10.0.${i >> 8}.${i & 255}`, `k${i}`, false)
      expect(failures.size()).toBe(100)
      yield* TestClock.adjust("1 minute")
      yield* failures.record("10.9.9.9", "k", false)
      expect(failures.size()).toBe(1)
    }))
})
