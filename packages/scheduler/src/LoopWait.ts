/**
 * How a background loop (the engine's, the deliverer's) waits between rounds: for a wake-up
 * (work arrived, a slot freed) or until a time (a due time, the periodic scan), whichever
 * comes first.
 *
 * `Effect.race` of a sleep and the wake-up queue's take forked two fibers at every wait,
 * and a loop waits once per round: under load a round per batch of tasks, idle about two per
 * task (issue 37). Here the time is an alarm of a `TimeLimits` watchdog that offers a
 * wake-up when it comes, and the wait is the queue's take alone. One alarm per loop at a
 * time: a wait until a time at or after the pending alarm's keeps it (the loop goes round
 * once early, at worst: a scan's look that finds nothing), an earlier one replaces it.
 * All time is Effect's Clock (the watchdog's): the test clock drives it.
 */
import type { Scope } from "effect"
import { Effect, Queue } from "effect"
import * as Loops from "./Loops.js"
import * as TimeLimits from "./TimeLimits.js"

/** A loop's wait, and its wake-up. */
export interface LoopWait {
  /** Wakes the loop (at once if it waits, else its next wait returns at once). */
  readonly wake: Effect.Effect<void>
  /**
   * Waits for a wake-up or until `at` (Clock milliseconds; never before it). A wake-up lets
   * the event loop take a turn first, so that the work arriving together (submits read from
   * several sockets, steps ending together) is handled by one round; the wake-ups offered
   * meanwhile are answered by the same round.
   */
  readonly until: (at: number) => Effect.Effect<void>
}

interface Pending {
  readonly at: number
  fired: boolean
  readonly alarm: TimeLimits.Alarm
}

/**
 * A loop's wait, its alarms kept by `timeLimits` (the engine's, which also keeps its calls'
 * limits), or by a watchdog of its own for the scope's lifetime.
 */
export const make = (timeLimits?: TimeLimits.TimeLimits): Effect.Effect<LoopWait, never, Scope.Scope> => Effect.gen(function*() {
  const limits = timeLimits ?? (yield* TimeLimits.make)
  const wakeups = yield* Queue.sliding<void>(1)
  let pending: Pending | undefined

  const arm = (at: number) =>
    Effect.suspend(() => {
      if (pending !== undefined && !pending.fired && pending.at <= at) return Effect.void
      pending?.alarm.cancel()
      const state = { at, fired: false }
      return Effect.map(
        limits.at(at, Effect.suspend(() => ((state.fired = true), wakeups.offer()))),
        (alarm) => void (pending = Object.assign(state, { alarm }))
      )
    })

  const until = (at: number) =>
    arm(at).pipe(
      Effect.zipRight(wakeups.take),
      // Woken by its alarm: a time came, nothing arrived to wait for.
      Effect.zipRight(Effect.suspend(() => (pending?.fired === true ? Effect.void : Loops.nextTurn))),
      Effect.zipRight(Queue.takeAll(wakeups)),
      Effect.asVoid
    )

  return { wake: Effect.asVoid(wakeups.offer()), until }
})
