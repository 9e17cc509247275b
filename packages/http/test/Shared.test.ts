/**
 * The rate limit and the caps on held requests over a shared store (`SharedLimits`), and what
 * they do when it fails: the decision is the store's while it answers, one take at a time
 * per key for the requests that came meanwhile; a store that fails or does not answer within
 * the timeout is replaced by this node's own buckets (its share of the limit) and counts
 * (one warning until it answers again). The store here is a stand-in; the
 * PostgreSQL one is tested in packages/store-sql/test/PgLimits.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { SharedLimits, StoreError } from "@mediagate/core"
import type { Context } from "effect"
import { Cause, Chunk, Effect, Exit, Fiber, FiberStatus, Logger, Option, Scope, TestClock } from "effect"
import { HeldRequests, RateLimit } from "../src/index.js"

/**
 * A stand-in store: `mode` says whether it answers, fails or hangs; an answering store takes
 * `delay` of Clock time and gives each take what it asks (`tokens` counts down from 100), or
 * nothing when `limited`; the counts it was asked for are recorded.
 */
const standIn = () => {
  const state = {
    mode: "up" as "up" | "limited" | "down" | "hung" | "broken",
    delay: 0,
    nodes: 1,
    tokens: 100,
    counts: [] as Array<number>,
    released: [] as Array<string>,
    holds: 0
  }
  const answer = <A>(value: () => A): Effect.Effect<A, StoreError> =>
    Effect.suspend(() =>
      state.mode === "down"
        ? Effect.fail(new StoreError({ message: "connection refused" }))
        : state.mode === "hung"
        ? Effect.never
        : state.mode === "broken"
        ? Effect.dieMessage("a bug in the store")
        : Effect.delay(Effect.sync(value), state.delay)
    )
  const store: Context.Tag.Service<SharedLimits.SharedLimits> = {
    take: (_digest, _rate, count) =>
      Effect.suspend(() => {
        state.counts.push(count)
        return answer((): SharedLimits.Taken => {
          if (state.mode === "limited") return { granted: 0, tokens: 0 }
          const granted = Math.min(count, Math.floor(state.tokens))
          state.tokens -= granted
          return { granted, tokens: state.tokens }
        })
      }),
    nodes: Effect.sync(() => state.nodes),
    hold: () => answer(() => ({ _tag: "Held", id: `place-${++state.holds}` }) as const),
    release: (id) => answer(() => void state.released.push(id))
  }
  return { state, store }
}

/** Lets the other fibers run until `ready` holds (at most 1,000 turns). */
const until = (ready: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 1_000 && !(yield* ready); turn++) yield* Effect.yieldNow()
  })

/** Whether every one of `fibers` waits. */
const allWaiting = (fibers: ReadonlyArray<Fiber.RuntimeFiber<unknown, unknown>>) =>
  Effect.map(Effect.forEach(fibers, (fiber) => fiber.status), (statuses) => statuses.every(FiberStatus.isSuspended))

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
      expect(state.counts).toEqual([1])
      // Another key still asks the store.
      yield* limit.take("other")
      expect(state.counts).toEqual([1, 1])
      yield* TestClock.adjust("300 millis")
      state.mode = "up"
      expect((yield* limit.take("k"))._tag).toBe("Allowed")
      expect(state.counts).toEqual([1, 1, 1])
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

  it.effect("a key's requests while its take is on the way wait for one take of their count, answered in order from it", () =>
    Effect.gen(function*() {
      const { state, store } = standIn()
      state.tokens = 5
      state.delay = 100
      const limit = RateLimit.makeShared({ perSecond: 2, burst: 10 }, store)
      const first = yield* Effect.fork(limit.take("k"))
      yield* until(Effect.map(TestClock.sleeps(), (sleeps) => sleeps.length === 2))
      const rest = yield* Effect.forEach(Array.from({ length: 11 }), () => Effect.fork(limit.take("k")))
      yield* until(allWaiting(rest))
      expect(state.counts).toEqual([1])
      yield* TestClock.adjust("100 millis")
      expect(yield* Fiber.join(first)).toEqual({ _tag: "Allowed", remaining: 4 })
      // The eleven that came meanwhile: one take of 11, which got the 4 tokens left.
      yield* until(Effect.map(TestClock.sleeps(), (sleeps) => Chunk.some(sleeps, (at) => at === 200)))
      expect(state.counts).toEqual([1, 11])
      yield* TestClock.adjust("100 millis")
      const decisions = yield* Effect.forEach(rest, Fiber.join)
      expect(decisions.slice(0, 4)).toEqual([3, 2, 1, 0].map((remaining) => ({ _tag: "Allowed", remaining })))
      expect(decisions.slice(4)).toEqual(Array.from({ length: 7 }, () => ({ _tag: "Limited", retryAfterMs: 500 })))
      // The bucket is empty: the next is refused here, without a take, until it has a token
      // again (half a second after the take that emptied it began, at 100 ms).
      expect(yield* limit.take("k")).toEqual({ _tag: "Limited", retryAfterMs: 400 })
      expect(state.counts).toEqual([1, 11])
      // Another key is not held up by this one's take.
      state.tokens = 1
      const other = yield* Effect.fork(limit.take("other"))
      yield* until(Effect.map(TestClock.sleeps(), (sleeps) => Chunk.some(sleeps, (at) => at === 300)))
      yield* TestClock.adjust("100 millis")
      expect(yield* Fiber.join(other)).toEqual({ _tag: "Allowed", remaining: 0 })
      expect(state.counts).toEqual([1, 11, 1])
    }))

  it.effect("while the store cannot be reached, a node allows its share of the limit: 1/N, N the nodes seen recently", () =>
    Effect.gen(function*() {
      const { state, store } = standIn()
      state.mode = "down"
      state.nodes = 3
      const limit = RateLimit.makeShared({ perSecond: 3, burst: 6 }, store)
      const decisions = yield* Effect.forEach(Array.from({ length: 6 }), () => limit.take("k")).pipe(logged([]))
      // 2 at once (6 / 3), then 1 a second (3 / 3).
      expect(decisions.map((decision) => decision._tag)).toEqual(["Allowed", "Allowed", "Limited", "Limited", "Limited", "Limited"])
      expect(decisions[2]).toEqual({ _tag: "Limited", retryAfterMs: 1_000 })
      yield* TestClock.adjust("1 second")
      expect((yield* limit.take("k").pipe(logged([])))._tag).toBe("Allowed")
      expect((yield* limit.take("k").pipe(logged([])))._tag).toBe("Limited")
      // A share is at least one request: with more nodes than the burst, each still lets one through.
      state.nodes = 8
      expect(yield* limit.take("k2").pipe(logged([]))).toEqual({ _tag: "Allowed", remaining: 0 })
      expect((yield* limit.take("k2").pipe(logged([])))._tag).toBe("Limited")
    }))

  it.effect("a request waits for the store at most the timeout from its arrival, even behind a take that hangs", () =>
    Effect.gen(function*() {
      const { state, store } = standIn()
      state.mode = "hung"
      const limit = RateLimit.makeShared({ perSecond: 1, burst: 4, timeout: "500 millis" }, store)
      const first = yield* Effect.fork(limit.take("k").pipe(logged([])))
      yield* until(Effect.map(TestClock.sleeps(), (sleeps) => sleeps.length === 1))
      yield* TestClock.adjust("200 millis")
      const [second, third] = [yield* Effect.fork(limit.take("k").pipe(logged([]))), yield* Effect.fork(limit.take("k").pipe(logged([])))]
      yield* until(allWaiting([second, third]))
      yield* TestClock.adjust("300 millis")
      expect((yield* Fiber.join(first))._tag).toBe("Allowed")
      yield* until(Effect.map(TestClock.sleeps(), (sleeps) => Chunk.some(sleeps, (at) => at === 700)))
      // The two that came at 200 ms asked the store once together, and were decided here at 700 ms.
      yield* TestClock.adjust("199 millis")
      expect(yield* Fiber.poll(second)).toEqual(Option.none())
      yield* TestClock.adjust("1 millis")
      expect((yield* Fiber.join(second))._tag).toBe("Allowed")
      expect((yield* Fiber.join(third))._tag).toBe("Allowed")
      expect(state.counts).toEqual([1, 2])
    }))

  it.effect("a defect in the store's take is every waiting request's, and the key's next request asks again", () =>
    Effect.gen(function*() {
      const { state, store } = standIn()
      state.mode = "broken"
      const limit = RateLimit.makeShared({ perSecond: 1, burst: 4 }, store)
      const exits = yield* Effect.all([limit.take("k"), limit.take("k")].map(Effect.exit), { concurrency: "unbounded" })
      expect(exits.map((exit) => Exit.isFailure(exit) && Cause.isDie(exit.cause))).toEqual([true, true])
      state.mode = "up"
      expect((yield* limit.take("k"))._tag).toBe("Allowed")
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
