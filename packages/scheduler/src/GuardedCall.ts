/**
 * An upstream call (or a result copy) of a claimed task, run within a time limit while this
 * worker keeps the task's lease: the part of a step that may outlast the claim's lease.
 *
 * The call runs in a fiber of its own (`TimeLimits`); its heartbeats are alarms of the same
 * watchdog, each beat a short fiber of its own, so a call costs one fork, and a long one a
 * fork per beat (one every third of the heartbeat window), not a heartbeat fiber and a race
 * per call.
 */
import { Task, TaskStore } from "@mediagate/core"
import type { Scope } from "effect"
import { Deferred, Effect, Either, Fiber, FiberId, Option } from "effect"
import * as Loops from "./Loops.js"
import * as TimeLimits from "./TimeLimits.js"

/** A call runs without a heartbeat only if it ends this long before the claim's lease does. */
const leaseMargin = 1_000

/** How an upstream call (or a result copy) under `guarded` ended. */
export type Guarded<A, E> =
  | { readonly _tag: "Answered"; readonly answer: Either.Either<A, E> }
  | { readonly _tag: "RanOut" }
  /** The task changed under the worker (a client cancelled it): the call was abandoned. */
  | { readonly _tag: "Lost" }

/** A call under heartbeat: the task as its last beat wrote it, and where its beats stand. */
interface Kept {
  current: Task.TaskRecord
  /** The call ended (or its caller was interrupted): no beat starts any more. */
  done: boolean
  /** A beat found the task changed under the worker: the call is abandoned. */
  lost: boolean
  /** The call's fiber, once forked. */
  call: Fiber.RuntimeFiber<unknown, unknown> | undefined
  /** Completed when the beat in flight, if any, has written. */
  beating: Deferred.Deferred<void> | undefined
  alarm: TimeLimits.Alarm | undefined
}

/**
 * Builds `guarded` for `worker`, whose heartbeat keeps a lease `heartbeatWindow` ms ahead; its
 * time limits are kept by `timeLimits` (the engine's), or by a watchdog of its own that runs
 * for the scope's lifetime.
 */
export const make = (worker: string, heartbeatWindow: number, timeLimits?: TimeLimits.TimeLimits): Effect.Effect<
  <A, E>(claimed: Task.TaskRecord, limit: number, call: Effect.Effect<A, E>) => Effect.Effect<
    readonly [Task.TaskRecord, Guarded<A, E>, number]
  >,
  never,
  TaskStore.TaskStore | Scope.Scope
> =>
  Effect.gen(function*() {
    const store = yield* TaskStore.TaskStore
    const limits = timeLimits ?? (yield* TimeLimits.make)
    const beatEvery = heartbeatWindow / 3

    /** The task changed under the worker: the call is abandoned (now, or as soon as it is forked). */
    const lose = (kept: Kept) => {
      kept.lost = true
      kept.call?.unsafeInterruptAsFork(FiberId.none)
    }

    /**
     * One beat: keeps the task's lease ahead while this worker is busy with it, then sets the
     * next beat; a task changed under the worker (a client cancelled it) ends the beats and
     * the call.
     */
    const beat = (kept: Kept): Effect.Effect<void> =>
      Effect.gen(function*() {
        const now = yield* Loops.currentMillis
        const latest = kept.current
        const next = new Task.TaskRecord({
          ...latest,
          leaseOwner: worker,
          leaseUntil: Math.min(latest.deadlineAt, now + heartbeatWindow),
          version: latest.version + 1
        }, true)
        // Uninterruptible: the stored version and `current` must never disagree.
        const going = yield* store.update(next, latest.version).pipe(
          Effect.zipRight(Effect.sync(() => void (kept.current = next))),
          Effect.as(true),
          Effect.catchTag("TaskConflict", () => Effect.sync(() => (lose(kept), false))),
          Effect.catchTag("StoreError", (error) =>
            Effect.logWarning(`engine: heartbeat of task ${latest.id} failed`, error).pipe(
              Effect.annotateLogs({ taskId: latest.id, model: String(latest.input["model"] ?? latest.job.model) }),
              Effect.as(true)
            )),
          Effect.uninterruptible
        )
        if (going) yield* schedule(kept, (yield* Loops.currentMillis) + beatEvery)
      })

    /** The next beat at `at`, unless the call has ended by then. */
    const schedule = (kept: Kept, at: number): Effect.Effect<void> =>
      Effect.map(
        limits.at(
          at,
          Effect.suspend(() => {
            if (kept.done) return Effect.void
            // Set in the same instant as `done` is looked at: the call's end waits for this beat.
            const beating = Deferred.unsafeMake<void>(FiberId.none)
            kept.beating = beating
            return Effect.asVoid(Effect.fork(Effect.ensuring(beat(kept), Deferred.succeed(beating, undefined))))
          })
        ),
        (alarm) => void (kept.alarm = alarm)
      )

    /**
     * Runs an upstream call for `claimed` within `limit` (never past the deadline) while a
     * heartbeat keeps the task for this worker; answers the task as it now stands and how
     * the call ended. A call that ends well inside the lease the claim took (a submit or poll
     * of an async upstream under the default settings) needs no heartbeat: a client's cancel
     * meanwhile is found when the step writes (a conflict), as it would be at the next beat.
     */
    const guarded = <A, E>(claimed: Task.TaskRecord, limit: number, call: Effect.Effect<A, E>) =>
      Effect.gen(function*() {
        const started = yield* Loops.currentMillis
        const budget = Math.max(0, Math.min(claimed.deadlineAt - started, limit))
        if (budget + leaseMargin < (claimed.leaseUntil ?? 0) - started) {
          const answer = yield* limits.run(Effect.either(call), budget)
          const outcome: Guarded<A, E> = Option.isSome(answer) ? { _tag: "Answered", answer: answer.value } : { _tag: "RanOut" }
          return [claimed, outcome, started] as const
        }
        const kept: Kept = { current: claimed, done: false, lost: false, call: undefined, beating: undefined, alarm: undefined }
        yield* schedule(kept, started + beatEvery)
        const ended = yield* limits.watch(Effect.either(call), budget, (fiber) => {
          kept.call = fiber
          if (kept.lost) lose(kept)
        }).pipe(
          Effect.ensuring(Effect.sync(() => {
            kept.done = true
            kept.alarm?.cancel()
          }))
        )
        // A beat in flight writes first: the step's write follows its version.
        if (kept.beating !== undefined) yield* Deferred.await(kept.beating)
        if (kept.lost) return [kept.current, { _tag: "Lost" } as Guarded<A, E>, started] as const
        if (Option.isNone(ended)) return [kept.current, { _tag: "RanOut" } as Guarded<A, E>, started] as const
        return [kept.current, { _tag: "Answered", answer: yield* ended.value } as Guarded<A, E>, started] as const
      })

    return guarded
  })
