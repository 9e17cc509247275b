/**
 * Cancel: the caller's task ends CANCELLED unless it has ended (`Lifecycle`'s answer to a
 * cancel request, carried out here), read again and decided again when the engine moved it
 * meanwhile; the upstream is then asked to stop its job.
 */
import { Clock, Effect, Option } from "effect"
import type { Account } from "../services/Accounts.js"
import { TaskNotCancellable, TaskNotFound } from "../domain/Errors.js"
import type { TaskId } from "../domain/Ids.js"
import * as Lifecycle from "../domain/Lifecycle.js"
import type { TaskRecord } from "../domain/Task.js"
import { toWire } from "../domain/Task.js"
import { TaskWakeup } from "../services/TaskEvents.js"
import { TaskStore } from "../services/TaskStore.js"
import { Upstream } from "../services/Upstream.js"
import { TaskWrites } from "./TaskWrites.js"
import { traced } from "./SpanOptions.js"

/** `cancel` over the store, the write path, the engine's wake-up and the upstream. */
export const make = Effect.gen(function*() {
  const store = yield* TaskStore
  const wakeup = yield* TaskWakeup
  const upstream = yield* Upstream
  const writes = yield* TaskWrites

  /**
   * Cancels the caller's task unless it has ended. The engine's next write for the task
   * then meets a newer version and leaves the task CANCELLED.
   */
  const cancel = traced("TaskService.cancel")(function*(account: Account, taskId: TaskId) {
    for (let attempt = 0; ; attempt++) {
      const found = yield* store.getOwned(taskId, account.id)
      if (Option.isNone(found)) return yield* new TaskNotFound({ taskId })
      const record = found.value
      const now = yield* Clock.currentTimeMillis
      const answer = Lifecycle.decide(record, { _tag: "CancelRequested" }, now)
      if (answer.write._tag !== "Apply") return yield* new TaskNotCancellable({ taskId, status: record.status })
      const cancelled = yield* writes.apply(record, answer.write.change, now, answer.write.options).pipe(
        Effect.map(Option.some),
        // The engine moved the task meanwhile: read it again and decide again.
        Effect.catchTag("TaskConflict", (conflict) => (attempt < 5 ? Effect.succeed(Option.none()) : Effect.fail(conflict))),
        // Lifecycle answers CANCELLED only for a task not terminal when read, which the state machine allows.
        Effect.catchTag("IllegalTransition", Effect.die)
      )
      if (Option.isSome(cancelled)) {
        // Its running slot is free now: the engine may start waiting work at once.
        yield* wakeup.wake
        if (answer.then._tag === "CancelUpstream") yield* stopUpstreamJob(record)
        return toWire(cancelled.value)
      }
    }
  })

  /**
   * Asks the upstream to stop a cancelled task's job, best effort and in the background (the
   * client's answer does not wait for it); a failure is logged. A synchronous call in
   * flight is abandoned by its worker, whose heartbeat finds the task cancelled.
   */
  const stopUpstreamJob = (record: TaskRecord) => {
    const cancelJob = upstream.cancel
    if (record.upstreamId === null || cancelJob === undefined) return Effect.void
    return cancelJob(record.upstreamId, record.job).pipe(
      Effect.timeout("10 seconds"),
      Effect.catchAllCause((cause) => Effect.logWarning(`cancel: the upstream job of task ${record.id} was not stopped`, cause)),
      Effect.forkDaemon,
      Effect.asVoid
    )
  }

  return { cancel } as const
})
