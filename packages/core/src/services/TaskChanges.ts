/**
 * Changes of tasks, as the write path makes them: every write of `TaskWrites` publishes the
 * task as written, and a request waiting on a task (`?wait=`, the events stream) subscribes
 * to that task alone. Within a process that is all (`layer`). Nodes sharing a database tell
 * each other the ids of the tasks whose status they changed (`makeRelayed` over a `Relay`,
 * `PgNotify` on PostgreSQL): a node that hears of a task someone waits on here reads it
 * again and publishes it. The waiter's periodic re-read stays the safety net.
 */
import type { Scope } from "effect"
import { Context, Effect, Layer, Option, Queue } from "effect"
import type { TaskId } from "../domain/Ids.js"
import type { TaskRecord } from "../domain/Task.js"
import { TaskStore } from "./TaskStore.js"

/** Task changes in this process. */
export class TaskChanges extends Context.Tag("@mediagate/core/TaskChanges")<TaskChanges, {
  /** Tells the task's subscribers that it was written as `task` (over `previous`, the version it replaced). */
  readonly publish: (task: TaskRecord, previous: TaskRecord) => Effect.Effect<void>
  /** The task's writes from now on, until the scope closes. */
  readonly subscribe: (taskId: TaskId) => Effect.Effect<Queue.Dequeue<TaskRecord>, never, Scope.Scope>
  /** Of `taskIds` (default: all), those someone here subscribes to now; a map lookup each. */
  readonly subscribed: (taskIds?: Iterable<string>) => Effect.Effect<ReadonlyArray<TaskId>>
}>() {}

const progressTime = (task: TaskRecord): number | null => task.progress?.updatedAt ?? null

/**
 * Whether a waiter shows `next` after `last`: its status, its last update or its progress
 * differ. A reschedule (a poll, a backoff, a lease kept) changes none of them unless it
 * carries new progress, which the engine writes at most once per 500 ms per task
 * (`Progress.throttleMillis`), so that is as often as other nodes are told of it.
 */
export const shows = (last: TaskRecord, next: TaskRecord): boolean =>
  next.version > last.version &&
  (next.status !== last.status || next.updatedAt !== last.updatedAt || progressTime(next) !== progressTime(last))

/**
 * Subscribers by task id: a write costs one map lookup when nobody waits on its task. Each
 * subscriber keeps the latest 16 writes (a waiter that falls behind misses intermediate
 * ones, never the latest).
 */
export const make: Effect.Effect<Context.Tag.Service<TaskChanges>> = Effect.sync(() => {
  const subscribers = new Map<string, Set<Queue.Queue<TaskRecord>>>()
  return {
    publish: (task) =>
      Effect.suspend(() => {
        const queues = subscribers.get(task.id)
        return queues === undefined ? Effect.void : Effect.forEach(queues, (queue) => Queue.offer(queue, task), { discard: true })
      }),
    subscribe: (taskId) =>
      Effect.acquireRelease(
        Effect.tap(Queue.sliding<TaskRecord>(16), (queue) =>
          Effect.sync(() => {
            let queues = subscribers.get(taskId)
            if (queues === undefined) subscribers.set(taskId, queues = new Set())
            queues.add(queue)
          })),
        (queue) =>
          Effect.zipRight(
            Effect.sync(() => {
              const queues = subscribers.get(taskId)
              queues?.delete(queue)
              if (queues?.size === 0) subscribers.delete(taskId)
            }),
            Queue.shutdown(queue)
          )
      ),
    subscribed: (taskIds) =>
      Effect.sync(() =>
        (taskIds === undefined ? [...subscribers.keys()] : [...taskIds].filter((id) => subscribers.has(id))) as Array<TaskId>
      )
  }
})

/** The TaskChanges layer: one per composition, shared by every writer and waiter. */
export const layer: Layer.Layer<TaskChanges> = Layer.effect(TaskChanges, make)

/**
 * Carries task changes between the nodes on one store (`PgNotify.changes` on PostgreSQL),
 * for the scope's lifetime. The answer tells the other nodes that the tasks of these ids
 * were written; the others' tells run `heard` here with their ids (never this node's own),
 * and `missed` runs when tells may have been lost (the relay's connection was opened again,
 * or too many came at once).
 */
export type Relay = (local: {
  readonly heard: (taskIds: ReadonlyArray<string>) => Effect.Effect<void>
  readonly missed: Effect.Effect<void>
}) => Effect.Effect<(taskIds: ReadonlyArray<TaskId>) => Effect.Effect<void>, never, Scope.Scope>

/** How many tasks heard of at once are read again together. */
const rereadConcurrency = 8

/**
 * TaskChanges that also tells the other nodes of every write a waiter shows (a change of
 * status), and publishes here the tasks they tell of that someone waits on here, read again
 * from the TaskStore. A task nobody here waits on costs a map lookup; a failed read is
 * logged and left to the waiter's periodic re-read.
 */
export const makeRelayed = (relay: Relay): Effect.Effect<Context.Tag.Service<TaskChanges>, never, TaskStore | Scope.Scope> =>
  Effect.gen(function*() {
    const local = yield* make
    const store = yield* TaskStore
    const reread = (taskIds: ReadonlyArray<TaskId>) =>
      Effect.forEach(taskIds, (taskId) =>
        store.get(taskId).pipe(
          Effect.flatMap(Option.match({
            onNone: () => Effect.void,
            // The in-process publish: what another node wrote is not told on again.
            onSome: (task) => local.publish(task, task)
          })),
          Effect.catchAll((error) => Effect.logDebug(`task changes: task ${taskId} was written on another node; reading it failed`, error))
        ), { concurrency: rereadConcurrency, discard: true })
    const tell = yield* relay({
      heard: (taskIds) => Effect.flatMap(local.subscribed(taskIds), reread),
      missed: Effect.flatMap(local.subscribed(), reread)
    })
    return {
      ...local,
      publish: (task, previous) =>
        shows(previous, task) ? Effect.zipRight(local.publish(task, previous), tell([task.id])) : local.publish(task, previous)
    }
  })

/** `makeRelayed` as a layer. */
export const layerRelayed = (relay: Relay): Layer.Layer<TaskChanges, never, TaskStore> => Layer.scoped(TaskChanges, makeRelayed(relay))
