/**
 * TaskChanges between nodes (`makeRelayed`), over an in-test relay that hands every tell to
 * the other nodes at once: what is told (changes of status, not reschedules), what a node
 * that hears reads again (only tasks someone waits on there), and what a lost tell costs.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Option, Queue } from "effect"
import { record } from "../src/Testing.js"
import { TaskChanges, TaskStore } from "../src/index.js"
import type { Task } from "../src/index.js"

/** An in-test relay: what one node tells, the others hear; `lose` runs every node's `missed`. */
const makeBus = () => {
  const nodes: Array<Parameters<TaskChanges.Relay>[0]> = []
  const told: Array<ReadonlyArray<string>> = []
  const relay: TaskChanges.Relay = (local) =>
    Effect.gen(function*() {
      nodes.push(local)
      yield* Effect.addFinalizer(() => Effect.sync(() => nodes.splice(nodes.indexOf(local), 1)))
      return (taskIds) =>
        Effect.suspend(() => {
          told.push(taskIds)
          return Effect.forEach(nodes.filter((node) => node !== local), (node) => node.heard(taskIds), { discard: true })
        })
    })
  return { relay, told, lose: Effect.suspend(() => Effect.forEach(nodes, (node) => node.missed, { discard: true })) }
}

/** A store that only answers `get`, from `tasks`, and counts the reads. */
const readOnlyStore = (tasks: Map<string, Task.TaskRecord>, reads: Array<string>) =>
  Context.make(TaskStore.TaskStore, {
    get: (id: string) => Effect.sync(() => (reads.push(id), Option.fromNullable(tasks.get(id))))
  } as unknown as Context.Tag.Service<TaskStore.TaskStore>)

/** Two nodes on one bus and one stored map of tasks; node B's store reads are counted. */
const twoNodes = Effect.gen(function*() {
  const bus = makeBus()
  const tasks = new Map<string, Task.TaskRecord>()
  const readsB: Array<string> = []
  const a = yield* TaskChanges.makeRelayed(bus.relay).pipe(Effect.provide(readOnlyStore(tasks, [])))
  const b = yield* TaskChanges.makeRelayed(bus.relay).pipe(Effect.provide(readOnlyStore(tasks, readsB)))
  /** Node A writes `next` over `previous`, as TaskWrites does: stored, then published. */
  const write = (previous: Task.TaskRecord, next: Task.TaskRecord) =>
    Effect.suspend(() => (tasks.set(next.id, next), a.publish(next, previous)))
  return { bus, tasks, readsB, a, b, write }
})

const pending = record({ id: "0190c8a4-0000-7000-8000-00000000000a" })
const processing = record({ id: pending.id, status: "PROCESSING", updatedAt: 5, version: 2 })
const rescheduled = record({ id: pending.id, status: "PROCESSING", updatedAt: 5, version: 3, dueAt: 9 })
const ended = record({ id: pending.id, status: "SUCCESS", updatedAt: 9, version: 4, dueAt: null })

describe("TaskChanges.makeRelayed", () => {
  it.scoped("a change of status on one node is published on the other to its waiter, read from the store", () =>
    Effect.gen(function*() {
      const { b, readsB, write } = yield* twoNodes
      const queue = yield* b.subscribe(pending.id)
      yield* write(pending, processing)
      expect((yield* Queue.take(queue)).status).toBe("PROCESSING")
      yield* write(processing, ended)
      expect(yield* Queue.take(queue)).toMatchObject({ status: "SUCCESS", version: 4 })
      expect(readsB).toEqual([pending.id, pending.id])
    }))

  it.scoped("a reschedule (same status, same update time) is not told", () =>
    Effect.gen(function*() {
      const { b, bus, readsB, write } = yield* twoNodes
      yield* b.subscribe(pending.id)
      yield* write(processing, rescheduled)
      expect(bus.told).toEqual([])
      expect(readsB).toEqual([])
    }))

  it.scoped("a task nobody waits on in the node that hears of it costs no read there", () =>
    Effect.gen(function*() {
      const { bus, readsB, write } = yield* twoNodes
      yield* write(pending, processing)
      yield* write(processing, ended)
      expect(bus.told).toEqual([[pending.id], [pending.id]])
      expect(readsB).toEqual([])
    }))

  it.scoped("the task's own node publishes it once, and does not read it again", () =>
    Effect.gen(function*() {
      const { a, readsB, write } = yield* twoNodes
      const queue = yield* a.subscribe(pending.id)
      yield* write(pending, ended)
      expect(yield* Queue.takeAll(queue).pipe(Effect.map((all) => [...all].map((task) => task.status)))).toEqual(["SUCCESS"])
      expect(readsB).toEqual([])
    }))

  it.scoped("when tells may have been lost, every task waited on is read again and published", () =>
    Effect.gen(function*() {
      const { b, bus, readsB, tasks } = yield* twoNodes
      const other = record({ id: "0190c8a4-0000-7000-8000-00000000000b" })
      const queue = yield* b.subscribe(pending.id)
      yield* b.subscribe(other.id)
      // Written on node A while the tell was lost.
      tasks.set(ended.id, ended)
      tasks.set(other.id, other)
      yield* bus.lose
      expect([...readsB].sort()).toEqual([pending.id, other.id].sort())
      expect((yield* Queue.take(queue)).status).toBe("SUCCESS")
    }))
})
