/**
 * Time limits of the engine's upstream calls, kept by one watchdog fiber.
 *
 * `Effect.timeoutOption` races a timer fiber against each call: two forks and a timer per
 * call, about 35 µs here, more than a whole step of the rest of the engine (bench:costs).
 * Here a call runs in one fiber of its own and is registered by the time its limit ends;
 * one watchdog sleeps until the earliest such time and interrupts the calls still running
 * then. Calls of one engine mostly share a limit, so a new one ends after those registered
 * before it and the watchdog sleeps on; it wakes early only for one that ends sooner.
 * All time is Effect's Clock: the test clock drives it.
 */
import { Heap } from "@mediagate/core"
import type { Scope } from "effect"
import { Clock, Effect, Exit, Fiber, Option, Queue } from "effect"
import * as Loops from "./Loops.js"

interface Entry {
  readonly at: number
  readonly seq: number
  /**
   * The call's fiber while it runs; undefined once it ended (the entry waits in the heap
   * until its time, then is dropped, and must not keep the fiber alive that long).
   */
  fiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
  /** The watchdog interrupted the call. */
  ranOut: boolean
}

export interface TimeLimits {
  /**
   * Runs `self` for at most `millis`: its answer, or None when the time ran out first (the
   * call is interrupted). Interrupting the caller interrupts the call.
   */
  readonly run: <A, E>(self: Effect.Effect<A, E>, millis: number) => Effect.Effect<Option.Option<A>, E>
}

/** Time limits whose watchdog runs for the scope's lifetime. */
export const make: Effect.Effect<TimeLimits, never, Scope.Scope> = Effect.gen(function*() {
  const entries = new Heap<Entry>((a, b) => a.at < b.at || (a.at === b.at && a.seq < b.seq))
  let seq = 0
  /** The time the watchdog sleeps until; infinite while it waits for a first call. */
  let armedAt = Number.POSITIVE_INFINITY
  const rearm = yield* Queue.sliding<void>(1)

  const watchdog = Effect.gen(function*() {
    for (;;) {
      while (entries.size > 0 && entries.peek()!.fiber === undefined) entries.pop()
      const next = entries.peek()
      if (next === undefined) {
        armedAt = Number.POSITIVE_INFINITY
        yield* rearm.take
        continue
      }
      const now = yield* Clock.currentTimeMillis
      if (next.at <= now) {
        entries.pop()
        next.ranOut = true
        yield* Fiber.interruptFork(next.fiber!)
        continue
      }
      armedAt = next.at
      // Never before the limit (Loops.sleepUntil): woken a fraction of a millisecond early,
      // the watchdog would find nothing to do and go round at that instant forever.
      yield* Effect.race(Loops.sleepUntil(next.at, now), rearm.take)
    }
  })
  yield* Effect.forkScoped(watchdog)

  return {
    run: <A, E>(self: Effect.Effect<A, E>, millis: number) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const fiber = yield* Effect.fork(self)
        const entry: Entry = { at: now + millis, seq: seq++, fiber, ranOut: false }
        entries.push(entry)
        if (entry.at < armedAt) {
          armedAt = entry.at
          yield* rearm.offer()
        }
        const exit = yield* Fiber.await(fiber).pipe(Effect.ensuring(Effect.sync(() => void (entry.fiber = undefined))))
        if (entry.ranOut && Exit.isInterrupted(exit)) return Option.none<A>()
        return Option.some(yield* exit)
      })
  }
})
