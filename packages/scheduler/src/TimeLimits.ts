/**
 * Time limits of the engine's upstream calls, and its other timed actions (the heartbeats of
 * `GuardedCall`, the alarms its loop waits for, `LoopWait`), kept by one watchdog fiber.
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

/** An action the watchdog runs at a time, unless cancelled first. */
export interface Alarm {
  /** Drops the action (it stays in the heap until its time, holding nothing). */
  readonly cancel: () => void
}

interface Entry {
  readonly at: number
  readonly seq: number
  /**
   * What runs at `at`: a short action, never a wait (the watchdog runs it itself); undefined
   * once cancelled (the entry waits in the heap until its time, then is dropped, and must not
   * keep a call's fiber alive that long).
   */
  fire: Effect.Effect<void> | undefined
}

export interface TimeLimits {
  /**
   * Runs `self` for at most `millis`: its answer, or None when the time ran out first (the
   * call is interrupted). Interrupting the caller interrupts the call.
   */
  readonly run: <A, E>(self: Effect.Effect<A, E>, millis: number) => Effect.Effect<Option.Option<A>, E>
  /**
   * As `run`, for a caller that may also stop the call itself: `started` is handed the call's
   * fiber as soon as it is forked. Answers how the call ended (interrupted, when stopped), or
   * None when its time ran out first.
   */
  readonly watch: <A, E>(
    self: Effect.Effect<A, E>,
    millis: number,
    started: (fiber: Fiber.RuntimeFiber<A, E>) => void
  ) => Effect.Effect<Option.Option<Exit.Exit<A, E>>>
  /** Runs `fire` (short: a flag set, a fiber forked or interrupted) in the watchdog at `at` (Clock milliseconds). */
  readonly at: (at: number, fire: Effect.Effect<void>) => Effect.Effect<Alarm>
}

/** Time limits whose watchdog runs for the scope's lifetime. */
export const make: Effect.Effect<TimeLimits, never, Scope.Scope> = Effect.gen(function*() {
  const entries = new Heap<Entry>((a, b) => a.at < b.at || (a.at === b.at && a.seq < b.seq))
  let seq = 0
  /** The time the watchdog sleeps until; infinite while it waits for a first entry. */
  let armedAt = Number.POSITIVE_INFINITY
  const rearm = yield* Queue.sliding<void>(1)

  const watchdog = Effect.gen(function*() {
    for (;;) {
      while (entries.size > 0 && entries.peek()!.fire === undefined) entries.pop()
      const next = entries.peek()
      if (next === undefined) {
        armedAt = Number.POSITIVE_INFINITY
        yield* rearm.take
        continue
      }
      const now = yield* Clock.currentTimeMillis
      if (next.at <= now) {
        entries.pop()
        const fire = next.fire!
        next.fire = undefined
        yield* fire
        continue
      }
      armedAt = next.at
      // Never before the limit (Loops.sleepUntil): woken a fraction of a millisecond early,
      // the watchdog would find nothing to do and go round at that instant forever.
      yield* Effect.race(Loops.sleepUntil(next.at, now), rearm.take)
    }
  })
  yield* Effect.forkScoped(watchdog)

  const at = (time: number, fire: Effect.Effect<void>): Effect.Effect<Alarm> =>
    Effect.suspend(() => {
      const entry: Entry = { at: time, seq: seq++, fire }
      entries.push(entry)
      const alarm: Alarm = { cancel: () => void (entry.fire = undefined) }
      if (time >= armedAt) return Effect.succeed(alarm)
      armedAt = time
      return Effect.as(rearm.offer(), alarm)
    })

  const watch = <A, E>(self: Effect.Effect<A, E>, millis: number, started: (fiber: Fiber.RuntimeFiber<A, E>) => void) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const fiber = yield* Effect.fork(self)
      started(fiber)
      let ranOut = false
      const alarm = yield* at(now + millis, Effect.suspend(() => (ranOut = true, Fiber.interruptFork(fiber))))
      const exit = yield* Fiber.await(fiber).pipe(Effect.ensuring(Effect.sync(alarm.cancel)))
      return ranOut && Exit.isInterrupted(exit) ? Option.none() : Option.some(exit)
    })

  const ignore = () => {}
  return {
    at,
    watch,
    run: <A, E>(self: Effect.Effect<A, E>, millis: number) =>
      Effect.flatMap(watch(self, millis, ignore), (ended) => (Option.isNone(ended) ? Effect.succeedNone : Effect.asSome(ended.value)))
  }
})
