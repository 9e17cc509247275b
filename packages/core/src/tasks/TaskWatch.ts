/**
 * Watching a task: its states as they change (the events stream) and the wait for its end
 * (`?wait=`). Woken by the writes of this process (`TaskChanges`, where `TaskWrites`
 * publishes) and, with a relay between nodes, by the changes of status other nodes write;
 * read again every `recheckInterval` when nothing came, the safety net for a change no
 * relay carried.
 */
import { Duration, Effect, Option, Queue, Stream } from "effect"
import type { StoreError } from "../domain/Errors.js"
import { TaskNotFound } from "../domain/Errors.js"
import type { TaskId } from "../domain/Ids.js"
import type { Task, TaskRecord } from "../domain/Task.js"
import { isTerminal, toWire } from "../domain/Task.js"
import type { Account } from "../services/Accounts.js"
import { shows, TaskChanges } from "../services/TaskChanges.js"
import { TaskStore } from "../services/TaskStore.js"
import { traced } from "./SpanOptions.js"

/**
 * How often a waiter reads its task again when no change was published: the safety net for
 * writes this process does not hear of (another node on the same database without a relay,
 * or a notification lost).
 */
export const recheckInterval = Duration.seconds(5)

/** `watch` and `wait` over the store and the composition's TaskChanges; `query` answers a wait that saw no end. */
export const make = (
  query: (account: Account, taskId: TaskId) => Effect.Effect<Task, TaskNotFound | StoreError>
) => Effect.gen(function*() {
  const store = yield* TaskStore
  const changes = yield* TaskChanges

  /** The caller's task, read again, as its waiter last saw it or newer. */
  const reread = (account: Account, last: TaskRecord) =>
    Effect.map(store.getOwned(last.id, account.id), (found) => Option.getOrElse(Option.filter(found, (task) => task.version > last.version), () => last))

  /**
   * The caller's task as it changes: its state now, then every new status (or update),
   * ending with a terminal state. The stream fails with StoreError when a re-read does.
   */
  const watch = traced("TaskService.watch")(function*(account: Account, taskId: TaskId) {
    if (Option.isNone(yield* store.getOwned(taskId, account.id))) return yield* new TaskNotFound({ taskId })
    return Stream.unwrapScoped(Effect.gen(function*() {
      // Subscribed before the read, so no write falls between them.
      const queue = yield* changes.subscribe(taskId)
      const first = yield* store.getOwned(taskId, account.id)
      if (Option.isNone(first)) return Stream.empty
      const next = (last: TaskRecord): Effect.Effect<TaskRecord, StoreError> =>
        Queue.take(queue).pipe(
          Effect.timeout(recheckInterval),
          Effect.catchTag("TimeoutException", () => reread(account, last)),
          Effect.flatMap((seen) => (shows(last, seen) ? Effect.succeed(seen) : next(seen.version > last.version ? seen : last)))
        )
      return Stream.concat(
        Stream.succeed(first.value),
        Stream.unfoldEffect(first.value, (last) =>
          isTerminal(last.status) ? Effect.succeedNone : Effect.map(next(last), (seen) => Option.some([seen, seen] as const)))
      ).pipe(Stream.map(toWire))
    }))
  })

  /**
   * The caller's task once it has ended, or after `wait` with its state then: answered as
   * soon as a write ends it, not at the next look.
   */
  const wait = traced("TaskService.wait")(function*(account: Account, taskId: TaskId, wait: Duration.DurationInput) {
    const changes = yield* watch(account, taskId)
    const last = yield* changes.pipe(Stream.interruptWhen(Effect.sleep(wait)), Stream.runLast)
    return Option.isSome(last) && isTerminal(last.value.status) ? last.value : yield* query(account, taskId)
  })

  return { watch, wait } as const
})
