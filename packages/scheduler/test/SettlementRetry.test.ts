/**
 * A settlement that fails (the ledger's connection dropped) does not wait for the settlement
 * sweep: the write that ended the task returns at once, and its charge or release is tried
 * again in the background, soon (Credits.retrySchedule, on the Clock), written once. A write
 * that ends a task and fails after it was stored is settled the same way, as the stored task says.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, Ledger, StoreError, TaskChanges, TaskEvents, TaskStore, TaskWrites } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryLedger, MemoryTaskStore } from "@mediagate/store-memory"
import { Effect, Layer, TestClock } from "effect"

const owner = Ids.AccountId.make(Testing.owner)

/** The memory ledger, whose first `failures` charges and releases fail before they are written. */
const flakyLedger = (failures: number) =>
  Layer.effect(
    Ledger.Ledger,
    Effect.map(Ledger.Ledger, (inner) => {
      let left = failures
      const end = (kind: "charge" | "release") => (input: Parameters<typeof inner.charge>[0]) =>
        Effect.suspend(() => (left-- > 0 ? Effect.fail(new StoreError({ message: `connection terminated (${kind})` })) : inner[kind](input)))
      return { ...inner, charge: end("charge"), release: end("release") }
    })
  ).pipe(Layer.provideMerge(MemoryLedger.layer))

/** The memory store, whose next update that ends a task is stored and then fails (the answer was lost). */
const lossyStore = Layer.effect(
  TaskStore.TaskStore,
  Effect.map(TaskStore.TaskStore, (inner) => ({
    ...inner,
    update: (task, version, callbacks) =>
      inner.update(task, version, callbacks).pipe(Effect.zipRight(task.status === "SUCCESS" ? Effect.fail(new StoreError({ message: "connection terminated after commit" })) : Effect.void))
  }))
).pipe(Layer.provideMerge(MemoryTaskStore.layer))

const kinds = (taskId: string) => Effect.flatMap(Ledger.Ledger, (ledger) => Effect.map(ledger.forTask(taskId), (entries) => entries.map((entry) => entry.kind)))

/** A stored PROCESSING task with its price held. */
const running = (id: string) =>
  Effect.gen(function*() {
    const ledger = yield* Ledger.Ledger
    yield* ledger.credit({ id: "c", accountId: owner, amount: 1_000_000, at: 0, note: null })
    const task = Testing.record({ id, status: "PROCESSING" })
    yield* ledger.reserve({ id: `r-${id}`, accountId: owner, taskId: id, amount: task.job.priceMicroUsd, at: 0 })
    yield* Effect.flatMap(TaskStore.TaskStore, (store) => store.create(task))
    return task
  })

const success = { to: "SUCCESS", result: { type: "image", urls: ["https://cdn/x.png"] } } as const

describe("settlement retry", () => {
  it.effect("a failed charge is tried again in the background within a second, once", () =>
    Effect.gen(function*() {
      const task = yield* running("t1")
      const writes = yield* TaskWrites.make.pipe(Effect.provide([TaskChanges.layer, TaskEvents.CallbackWakeup.layerNone]))
      // The write returns at once, its settlement failed.
      const ended = yield* writes.apply(task, success, 0)
      expect(ended.status).toBe("SUCCESS")
      expect(yield* kinds("t1")).toEqual(["reserve"])
      // The background tries at once, 100 ms and 300 ms later die too; the one at 700 ms is written.
      yield* TestClock.adjust("699 millis")
      expect(yield* kinds("t1")).toEqual(["reserve"])
      yield* TestClock.adjust("1 millis")
      expect(yield* kinds("t1")).toEqual(["reserve", "charge"])
      yield* TestClock.adjust("1 minute")
      expect(yield* kinds("t1")).toEqual(["reserve", "charge"])
      expect(yield* Effect.flatMap(Ledger.Ledger, (ledger) => ledger.balance(owner))).toEqual({ balance: 1_000_000 - task.job.priceMicroUsd, reserved: 0 })
    }).pipe(Effect.provide(Layer.mergeAll(flakyLedger(4), MemoryTaskStore.layer, Ids.layerTest))))

  it.effect("a write that ended a task and failed after it was stored: settled as the stored task says", () =>
    Effect.gen(function*() {
      const task = yield* running("t2")
      const writes = yield* TaskWrites.make.pipe(Effect.provide([TaskChanges.layer, TaskEvents.CallbackWakeup.layerNone]))
      const exit = yield* Effect.exit(writes.apply(task, success, 0))
      expect(exit._tag).toBe("Failure")
      yield* TestClock.adjust("1 second")
      expect(yield* kinds("t2")).toEqual(["reserve", "charge"])
    }).pipe(Effect.provide(Layer.mergeAll(MemoryLedger.layer, lossyStore, Ids.layerTest))))
})
