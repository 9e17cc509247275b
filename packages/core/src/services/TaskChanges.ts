/**
 * Changes of tasks, as the write path makes them: every write of `TaskWrites` publishes the
 * task as written, and a request waiting on a task (`?wait=`, the events stream) subscribes
 * to that task alone. In-process only: a change written by another node sharing the
 * database is seen by the waiter's periodic re-read.
 */
import type { Scope } from "effect"
import { Context, Effect, Layer, Queue } from "effect"
import type { TaskId } from "../domain/Ids.js"
import type { TaskRecord } from "../domain/Task.js"

/** Task changes in this process. */
export class TaskChanges extends Context.Tag("@mediagate/core/TaskChanges")<TaskChanges, {
  /** Tells the task's subscribers that it was written as `task`. */
  readonly publish: (task: TaskRecord) => Effect.Effect<void>
  /** The task's writes from now on, until the scope closes. */
  readonly subscribe: (taskId: TaskId) => Effect.Effect<Queue.Dequeue<TaskRecord>, never, Scope.Scope>
}>() {}

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
      )
  }
})

/** The TaskChanges layer: one per composition, shared by every writer and waiter. */
export const layer: Layer.Layer<TaskChanges> = Layer.effect(TaskChanges, make)
