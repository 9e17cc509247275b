/**
 * A loop's wait on the TestClock: until its time and never before, or until a wake-up;
 * a wake-up offered while the loop works ends its next wait at once; a later wait keeps the
 * pending alarm (the loop goes round once early), an earlier one replaces it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import * as LoopWait from "../src/LoopWait.js"
import * as TimeLimits from "../src/TimeLimits.js"

/** Waits until `at`, woken at once: the wait ends without the clock moving; its alarm stays pending. */
const wokenBefore = (wait: LoopWait.LoopWait, at: number) =>
  Effect.gen(function*() {
    const waiting = yield* Effect.fork(wait.until(at))
    yield* wait.wake
    yield* Fiber.join(waiting)
  })

/** Answers whether `fiber` ended after `millis` more of the clock. */
const endedAfter = <A>(fiber: Fiber.RuntimeFiber<A>, millis: number) =>
  Effect.gen(function*() {
    yield* TestClock.adjust(millis)
    yield* Effect.yieldNow()
    return fiber.unsafePoll() !== null
  })

describe("LoopWait", () => {
  it.scoped("a wait ends at its time, not before; on a watchdog of its own or a shared one", () =>
    Effect.gen(function*() {
      for (const wait of [yield* LoopWait.make(), yield* LoopWait.make(yield* TimeLimits.make)]) {
        const waiting = yield* Effect.fork(wait.until((yield* TestClock.currentTimeMillis) + 1_000))
        expect(yield* endedAfter(waiting, 999)).toBe(false)
        expect(yield* endedAfter(waiting, 1)).toBe(true)
      }
    }))

  it.scoped("a wake-up ends a wait before its time; one offered while the loop works ends the next wait at once", () =>
    Effect.gen(function*() {
      const wait = yield* LoopWait.make()
      yield* wokenBefore(wait, 1_000)
      expect(yield* TestClock.currentTimeMillis).toBe(0)
      yield* wait.wake
      yield* wait.until(5_000)
      expect(yield* TestClock.currentTimeMillis).toBe(0)
    }))

  it.scoped("a later wait keeps the pending alarm; an earlier one replaces it", () =>
    Effect.gen(function*() {
      const wait = yield* LoopWait.make()
      // Woken before its alarm at 1,000: the alarm stays pending.
      yield* wokenBefore(wait, 1_000)
      // Until 3,000: the pending alarm at 1,000 ends it then, early.
      const later = yield* Effect.fork(wait.until(3_000))
      expect(yield* endedAfter(later, 999)).toBe(false)
      expect(yield* endedAfter(later, 1)).toBe(true)
      // Until 5,000 (alarm at 5,000), then, woken, until 2,000: the earlier alarm replaces it.
      yield* wokenBefore(wait, 5_000)
      const sooner = yield* Effect.fork(wait.until(2_000))
      expect(yield* endedAfter(sooner, 999)).toBe(false)
      expect(yield* endedAfter(sooner, 1)).toBe(true)
    }))
})
