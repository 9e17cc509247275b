/**
 * TaskStore in memory: for tests, demos and single-process embedding without persistence.
 */
import { Task, TaskConflict, TaskStore } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option } from "effect"

/** A TaskStore over a Map. Every method is atomic: JavaScript runs it without interleaving. */
export const make: Effect.Effect<Context.Tag.Service<TaskStore.TaskStore>> = Effect.sync(() => {
  const tasks = new Map<string, Task.TaskRecord>()
  return {
    create: (task) => Effect.sync(() => void tasks.set(task.id, task)),
    get: (id, ownerId) =>
      Effect.sync(() => {
        const task = tasks.get(id)
        return task !== undefined && (ownerId === undefined || task.ownerId === ownerId)
          ? Option.some(task)
          : Option.none()
      }),
    update: (next, expectedVersion) =>
      Effect.suspend(() => {
        const current = tasks.get(next.id)
        if (current === undefined || current.version !== expectedVersion) {
          return Effect.fail(new TaskConflict({ taskId: next.id, expectedVersion }))
        }
        tasks.set(next.id, next)
        return Effect.void
      }),
    claimDue: ({ leaseUntil, limit, now, worker }) =>
      Effect.sync(() => {
        const claimed: Array<Task.TaskRecord> = []
        for (const task of tasks.values()) {
          if (claimed.length >= limit) break
          if (task.dueAt === null || task.dueAt > now) continue
          if (task.leaseUntil !== null && task.leaseUntil > now) continue
          const record = new Task.TaskRecord({ ...task, leaseOwner: worker, leaseUntil, version: task.version + 1 })
          tasks.set(task.id, record)
          claimed.push(record)
        }
        return claimed
      })
  }
})

/** The memory TaskStore layer. */
export const layer: Layer.Layer<TaskStore.TaskStore> = Layer.effect(TaskStore.TaskStore, make)
