import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Option, Ref, TestClock } from "effect"
import * as TimeLimits from "../src/TimeLimits.js"

const settle = Effect.repeatN(Effect.yieldNow(), 20)

describe("TimeLimits", () => {
  it.scoped("a call that answers in time gives its answer; a failure stays a failure", () =>
    Effect.gen(function*() {
      const limits = yield* TimeLimits.make
      expect(yield* limits.run(Effect.succeed(7), 1_000)).toEqual(Option.some(7))
      expect(yield* Effect.flip(limits.run(Effect.fail("no"), 1_000))).toBe("no")
    }))

  it.scoped("a call still running at its limit is interrupted then, and gives None", () =>
    Effect.gen(function*() {
      const limits = yield* TimeLimits.make
      const stopped = yield* Ref.make<number | null>(null)
      const hanging = Effect.never.pipe(Effect.onInterrupt(() => Effect.flatMap(Clock.currentTimeMillis, (now) => Ref.set(stopped, now))))
      const fiber = yield* Effect.fork(limits.run(hanging, 10_000))
      yield* settle
      yield* TestClock.adjust("9999 millis")
      expect(yield* Ref.get(stopped)).toBeNull()
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.join(fiber)).toEqual(Option.none())
      expect(yield* Ref.get(stopped)).toBe(10_000)
    }))

  it.scoped("a shorter limit registered after a longer one ends first: the watchdog wakes for it", () =>
    Effect.gen(function*() {
      const limits = yield* TimeLimits.make
      const long = yield* Effect.fork(limits.run(Effect.never, 60_000))
      yield* settle
      const short = yield* Effect.fork(limits.run(Effect.never, 1_000))
      yield* settle
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.join(short)).toEqual(Option.none())
      expect(yield* Fiber.poll(long)).toEqual(Option.none())
      yield* TestClock.adjust("59 seconds")
      expect(yield* Fiber.join(long)).toEqual(Option.none())
    }))

  it.scoped("calls that ended leave the watchdog nothing to interrupt; later calls are timed as before", () =>
    Effect.gen(function*() {
      const limits = yield* TimeLimits.make
      for (let i = 0; i < 100; i++) expect(yield* limits.run(Effect.succeed(i), 5_000)).toEqual(Option.some(i))
      yield* TestClock.adjust("10 seconds")
      const slow = yield* Effect.fork(limits.run(Effect.as(Effect.sleep(Duration.seconds(3)), "done"), 5_000))
      yield* settle
      yield* TestClock.adjust("3 seconds")
      expect(yield* Fiber.join(slow)).toEqual(Option.some("done"))
    }))

  it.scoped("interrupting the caller interrupts the call", () =>
    Effect.gen(function*() {
      const limits = yield* TimeLimits.make
      const stopped = yield* Ref.make(false)
      const caller = yield* Effect.fork(limits.run(Effect.never.pipe(Effect.onInterrupt(() => Ref.set(stopped, true))), 60_000))
      yield* settle
      yield* Fiber.interrupt(caller)
      yield* settle
      expect(yield* Ref.get(stopped)).toBe(true)
    }))
})
