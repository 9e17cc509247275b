/**
 * A task's callbacks: every attempt made to deliver them, and sending the callback of an
 * ended task again.
 */
import { Clock, Effect, Option, Schema } from "effect"
import type { Account } from "../services/Accounts.js"
import type { StoreError } from "../domain/Errors.js"
import { TaskNotFound } from "../domain/Errors.js"
import type { TaskId } from "../domain/Ids.js"
import { isTerminal, TaskStatus } from "../domain/Task.js"
import { CallbackWakeup } from "../services/TaskEvents.js"
import type { CallbackAttempt, CallbackState } from "../services/TaskStore.js"
import { TaskStore } from "../services/TaskStore.js"
import { traced } from "./SpanOptions.js"

/** A task's callback has nothing to redeliver: the task has not ended, or it has no callBackUrl. */
export class CallbackNotRedeliverable extends Schema.TaggedError<CallbackNotRedeliverable>()("CallbackNotRedeliverable", {
  taskId: Schema.String,
  reason: Schema.Literal("NotEnded", "NoCallBackUrl"),
  status: TaskStatus
}) {
  override get message() {
    return this.reason === "NotEnded"
      ? `task is still ${this.status}; its callback is sent when it ends`
      : "task has no callBackUrl, so there is no callback to redeliver"
  }
}

/** A callback and every attempt made to deliver it, oldest first. */
export interface CallbackDelivery {
  readonly callback: CallbackState
  readonly attempts: ReadonlyArray<CallbackAttempt>
}

/** `callbacks` and `redeliver` over the store and the deliverer's wake-up. */
export const make = Effect.gen(function*() {
  const store = yield* TaskStore
  const deliverer = yield* CallbackWakeup

  /** A task's callbacks, each with its attempts. */
  const deliveries = (taskId: TaskId): Effect.Effect<ReadonlyArray<CallbackDelivery>, StoreError> =>
    Effect.flatMap(store.callbacks(taskId), (callbacks) =>
      Effect.forEach(callbacks, (callback) => Effect.map(store.callbackAttempts(callback.id), (attempts) => ({ callback, attempts }))))

  /** The callbacks of the caller's task, each with every attempt made to deliver it. */
  const callbacks = traced("TaskService.callbacks")(function*(account: Account, taskId: TaskId) {
    if (Option.isNone(yield* store.getOwned(taskId, account.id))) return yield* new TaskNotFound({ taskId })
    return yield* deliveries(taskId)
  })

  /**
   * Sends the callback of the caller's ended task again, now: a new delivery round under the
   * same webhook-id, whether the last one delivered it, gave up or is still retrying (as
   * Stripe resends a delivered event). The deliverer is woken so it goes at once.
   */
  const redeliver = traced("TaskService.redeliver")(function*(account: Account, taskId: TaskId) {
    const found = yield* store.getOwned(taskId, account.id)
    if (Option.isNone(found)) return yield* new TaskNotFound({ taskId })
    const { callBackUrl, status } = found.value
    if (!isTerminal(status)) return yield* new CallbackNotRedeliverable({ taskId, reason: "NotEnded", status })
    if (callBackUrl === null) return yield* new CallbackNotRedeliverable({ taskId, reason: "NoCallBackUrl", status })
    // An ended task with a callBackUrl owes its callback from the write that ended it (TaskWrites).
    if ((yield* store.redeliverCallbacks(taskId, yield* Clock.currentTimeMillis)) === 0) {
      return yield* Effect.dieMessage(`task ${taskId} ended with a callBackUrl but owes no callback`)
    }
    yield* deliverer.wake
    return yield* deliveries(taskId)
  })

  return { callbacks, redeliver } as const
})
