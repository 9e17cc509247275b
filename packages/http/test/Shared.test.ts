/**
 * The rate limit and the caps on held requests over a shared store (`SharedLimits`), and what
 * they do when it fails: the decision is the store's while it answers; a store that fails
 * or does not answer within the timeout is replaced by this node's own buckets and counts
 * (fail open, one warning until it answers again). The store here is a stand-in; the
 * PostgreSQL one is tested in packages/store-sql/test/PgLimits.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { SharedLimits, StoreError } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Exit, Fiber, Logger, Scope, TestClock } from "effect"
import { HeldRequests, RateLimit } from "../src/index.js"

/** A stand-in store: `mode` says whether it answers, fails or hangs; what it was asked is recorded. */
const standIn = () => {
  const state = { mode: "up" as "up" | "limited" | "down" | "hung", takes: 0, released: [] as Array<string>, holds: 0 }
  const answer = <A>(value: () => A): Effect.Effect<A, StoreError> =>
    Effect.suspend(() =>
      state.mode === "down"
        ? Effect.fail(new StoreError({ message: "connection refused" }))
        : state.mode === "hung"
        ? Effect.never
        : Effect.sync(value)
    )
  const store: Context.Tag.Service<SharedLimits.SharedLimits> = {
    take: () =>
      answer((): SharedLimits.Decision =>
        state.mode === "limited"
          ? (state.takes++, { _tag: "Limited", retryAfterMs: 500 })
          : { _tag: "Allowed", remaining: 99 - state.takes++ }
      ),
    hold: () => answer(() => ({ _tag: "Held", id: `place-${++state.holds}` }) as const),
    release: (id) => answer(() => void state.released.push(id))
  }
  return { state, store }
}

/** Runs `effect` with its warnings collected into `logs`. */
const logged = (logs: Array<string>) =>
  Effect.provide(Logger.replace(Logger.defaultLogger, Logger.make(({ logLevel, message }) => {
    logs.push(`${logLevel.label} ${Array.isArray(message) ? String(message[0]) : String(message)}`)
  })))

describe("shared limits", () => {
  it.effect("the rate limit takes from the store; down, from this node's bucket, with one warning until it is back", () =>
    Effect.gen(function*() {
      const { state, store } = standIn()
      const logs: Array<string> = []
      const limit = RateLimit.makeShared({ perSecond: 1, burst: 2 }, SharedLimits.SharedLimits.of(store))
      expect(yield* limit.take("k")).toEqual({ _tag: "Allowed", remaining: 99 })
      state.mode = "down"
      const local = yield* Effect.forEach([1, 2, 3], () => limit.take("k")).pipe(logged(logs))
      expect(local.map((d) => d._tag)).toEqual(["Allowed", "Allowed", "Limited"])
      expect(logs.filter((line) => line.startsWith("WARN"))).toHaveLength(1)
      state.mode = "up"
      expect(yield* limit.take("k").pipe(logged(logs))).toEqual({ _tag: "Allowed", remaining: 98 })
      expect(logs.filter((line) => line.startsWith("INFO"))).toHaveLength(1)
    }))

  it.effect("a key the store refused is refused without asking it again until its Retry-After", () =>
    Effect.gen(function*() {
      const { state, store } = standIn()
      const limit = RateLimit.makeShared({ perSecond: 2, burst: 2 }, store)
      state.mode = "limited"
      expect(yield* limit.take("k")).toEqual({ _tag: "Limited", retryAfterMs: 500 })
      yield* TestClock.adjust("200 millis")
      expect(yield* limit.take("k")).toEqual({ _tag: "Limited", retryAfterMs: 300 })
      expect(state.takes).toBe(1)
      // Another key still asks the store.
      yield* limit.take("other")
      expect(state.takes).toBe(2)
      yield* TestClock.adjust("300 millis")
      state.mode = "up"
      expect((yield* limit.take("k"))._tag).toBe("Allowed")
      expect(state.takes).toBe(3)
    }))

  it.effect("a store that does not answer within the timeout: this node's bucket decides", () =>
    Effect.gen(function*() {
      const { state, store } = standIn()
      state.mode = "hung"
      const limit = RateLimit.makeShared({ perSecond: 1, burst: 1, timeout: "500 millis" }, store)
      const fiber = yield* Effect.fork(limit.take("k").pipe(logged([])))
      yield* TestClock.adjust("500 millis")
      expect(yield* Fiber.join(fiber)).toEqual({ _tag: "Allowed", remaining: 0 })
    }))

  it.effect("held places come from the store and go back to it; down, this node counts them under the same caps", () =>
    Effect.gen(function*() {
      const { state, store } = standIn()
      const held = HeldRequests.makeShared({ perKey: 1, total: 10 }, store)
      const scope = yield* Scope.make()
      expect(yield* HeldRequests.hold(held, "k").pipe(Scope.extend(scope))).toBeUndefined()
      yield* Scope.close(scope, Exit.void)
      expect(state.released).toEqual(["place-1"])
      state.mode = "down"
      const logs: Array<string> = []
      const scopes = [yield* Scope.make(), yield* Scope.make()]
      expect(yield* HeldRequests.hold(held, "k").pipe(Scope.extend(scopes[0]!), logged(logs))).toBeUndefined()
      expect(yield* HeldRequests.hold(held, "k").pipe(Scope.extend(scopes[1]!), logged(logs))).toBe("key")
      expect(logs.filter((line) => line.startsWith("WARN"))).toHaveLength(1)
    }))
})
