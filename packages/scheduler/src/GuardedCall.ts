/**
 * An upstream call (or a result copy) of a claimed task, run within a time limit while this
 * worker keeps the task's lease: the part of a step that may outlast the claim's lease.
 */
import { Task, TaskStore } from "@mediagate/core"
import type { Scope } from "effect"
import { Deferred, Duration, Effect, Either, Fiber, Option, Ref } from "effect"
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

/**
 * Builds `guarded` for `worker`, whose heartbeat keeps a lease `heartbeatWindow` ms ahead; its
 * time limits' watchdog runs for the scope's lifetime.
 */
export const make = (worker: string, heartbeatWindow: number): Effect.Effect<
  <A, E>(claimed: Task.TaskRecord, limit: number, call: Effect.Effect<A, E>) => Effect.Effect<
    readonly [Task.TaskRecord, Guarded<A, E>, number]
  >,
  never,
  TaskStore.TaskStore | Scope.Scope
> =>
  Effect.gen(function*() {
    const store = yield* TaskStore.TaskStore
    const timeLimits = yield* TimeLimits.make

    /**
     * Keeps the task's lease ahead while this worker is busy with it; completes `lost` and
     * stops when the task changed under it (a client cancelled it).
     */
    const heartbeat = (current: Ref.Ref<Task.TaskRecord>, lost: Deferred.Deferred<void>) => {
      const beat = Effect.gen(function*() {
        const now = yield* Loops.currentMillis
        const latest = yield* Ref.get(current)
        const next = new Task.TaskRecord({
          ...latest,
          leaseOwner: worker,
          leaseUntil: Math.min(latest.deadlineAt, now + heartbeatWindow),
          version: latest.version + 1
        }, true)
        // Uninterruptible: the stored version and the Ref must never disagree.
        return yield* store.update(next, latest.version).pipe(
          Effect.zipRight(Ref.set(current, next)),
          Effect.as(true),
          Effect.catchTag("TaskConflict", () => Deferred.succeed(lost, undefined).pipe(Effect.as(false))),
          Effect.catchTag("StoreError", (error) => Effect.logWarning(`engine: heartbeat of task ${latest.id} failed`, error).pipe(Effect.as(true))),
          Effect.uninterruptible
        )
      })
      return beat.pipe(Effect.delay(Duration.millis(heartbeatWindow / 3)), Effect.repeat({ while: (going) => going }))
    }

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
        const timed = timeLimits.run(Effect.either(call), budget).pipe(
          Effect.map((answer): Guarded<A, E> => Option.isSome(answer) ? { _tag: "Answered", answer: answer.value } : { _tag: "RanOut" })
        )
        if (budget + leaseMargin < (claimed.leaseUntil ?? 0) - started) return [claimed, yield* timed, started] as const
        const current = yield* Ref.make(claimed)
        const lost = yield* Deferred.make<void>()
        const beating = yield* Effect.fork(heartbeat(current, lost))
        const outcome: Guarded<A, E> = yield* timed.pipe(Effect.raceFirst(Effect.as(Deferred.await(lost), { _tag: "Lost" } as const)))
        yield* Fiber.interrupt(beating)
        return [yield* Ref.get(current), outcome, started] as const
      })

    return guarded
  })
