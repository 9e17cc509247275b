/**
 * The use cases as one service: submit and estimate (`Submit`, under an Idempotency-Key
 * `IdempotentSubmit`), query and list (spec sections 4.1 and 4.2), watching a task
 * (`TaskWatch`), cancel (`Cancel`), a provider's webhook (`WebhookIntake`), and a task's
 * callbacks and their redelivery (`Redelivery`). Each lives in its own module; this one
 * composes them into the one service the transports and embedders use.
 */
import { Effect, Option } from "effect"
import type { Account } from "../services/Accounts.js"
import type { ListQuery } from "../api/Api.js"
import { TaskNotFound } from "../domain/Errors.js"
import type { TaskId } from "../domain/Ids.js"
import type { Task } from "../domain/Task.js"
import { toWire } from "../domain/Task.js"
import { TaskStore } from "../services/TaskStore.js"
import * as Cancel from "./Cancel.js"
import * as Redelivery from "./Redelivery.js"
import * as Submit from "./Submit.js"
import * as TaskWatch from "./TaskWatch.js"
import * as WebhookIntake from "./WebhookIntake.js"
import { traced } from "./SpanOptions.js"

export { CallbackNotRedeliverable } from "./Redelivery.js"
export type { CallbackDelivery } from "./Redelivery.js"
export { Deadlines, SubmitPolicy } from "./Submit.js"
export type { Estimate, SubmitError, SubmitOptions } from "./Submit.js"
export { webhookWatch } from "./WebhookIntake.js"

/**
 * Submit and query, independent of any transport. Everything it works with is in its type:
 * a composition without an engine or a deliverer in this process provides the wake-ups'
 * `layerNone`, one without credits `Ledger.layerUnbilled`.
 */
export class TaskService extends Effect.Service<TaskService>()("@mediagate/core/TaskService", {
  effect: Effect.gen(function*() {
    const store = yield* TaskStore
    const { estimate, submit } = yield* Submit.make

    /** The caller's task with this id, as the query endpoint shows it. */
    const query = traced("TaskService.query")(
      function*(account: Account, taskId: TaskId) {
        const record = yield* store.getOwned(taskId, account.id)
        return yield* Option.match(record, {
          onNone: () => Effect.fail(new TaskNotFound({ taskId })),
          onSome: (found): Effect.Effect<Task> => Effect.succeed(toWire(found))
        })
      }
    )

    /** The caller's tasks, newest first, `limit` at a time, after the cursor's task, those the filters let through. */
    const list = traced("TaskService.list")(function*(account: Account, query: ListQuery) {
      const page = yield* store.list(account.id, {
        limit: query.limit,
        cursor: Option.getOrUndefined(query.cursor),
        filter: {
          statuses: query.status,
          model: query.model,
          createdAfter: query.created_after,
          createdBefore: query.created_before
        }
      })
      return { tasks: page.tasks.map(toWire), next_cursor: page.nextCursor }
    })

    const { wait, watch } = yield* TaskWatch.make(query)
    const { cancel } = yield* Cancel.make
    const { receiveWebhook } = yield* WebhookIntake.make
    const { callbacks, redeliver } = yield* Redelivery.make

    return { submit, estimate, query, wait, watch, list, cancel, receiveWebhook, callbacks, redeliver } as const
  })
}) {}
