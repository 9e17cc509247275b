/**
 * The settlement sweep: reservations a crash left open are settled as their task's status
 * says (charged on SUCCESS, released otherwise) whatever their age, released when the task
 * was never stored once older than the grace, left alone while the task runs; every page of
 * open reservations is read.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, Ledger, TaskStore } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryLedger, MemoryTaskStore } from "@mediagate/store-memory"
import { Effect, Layer, TestClock } from "effect"
import { Settlements } from "../src/index.js"

const stores = Layer.mergeAll(MemoryTaskStore.layer, MemoryLedger.layer, Ids.layerTest)
const owner = Ids.AccountId.make(Testing.owner)
const minute = 60_000

/** Holds `amount` for task `taskId` at `at`. */
const hold = (taskId: string, at: number, amount = 1_000) =>
  Effect.flatMap(Ledger.Ledger, (ledger) => ledger.reserve({ id: `r-${taskId}`, accountId: owner, taskId, amount, at }))

const kinds = (taskId: string) => Effect.flatMap(Ledger.Ledger, (ledger) => Effect.map(ledger.forTask(taskId), (entries) => entries.map((entry) => entry.kind)))

describe("Settlements.sweep", () => {
  it.effect("settles ended tasks by status at any age, releases never-stored ones past the grace, leaves running and young never-stored ones", () =>
    Effect.gen(function*() {
      const store = yield* TaskStore.TaskStore
      const ledger = yield* Ledger.Ledger
      yield* ledger.credit({ id: "c", accountId: owner, amount: 1_000_000, at: 0, note: null })
      yield* store.create(Testing.record({ id: "succeeded", status: "SUCCESS", result: { type: "image", urls: ["https://cdn/x.png"] }, dueAt: null }))
      yield* store.create(Testing.record({ id: "failed", status: "FAILURE", dueAt: null }))
      yield* store.create(Testing.record({ id: "cancelled", status: "CANCELLED", dueAt: null }))
      yield* store.create(Testing.record({ id: "running", status: "PROCESSING" }))
      for (const taskId of ["succeeded", "failed", "cancelled", "running", "never-stored"]) yield* hold(taskId, 0)
      yield* TestClock.setTime(20 * minute)
      yield* hold("young-orphan", 15 * minute)
      // Ended a minute ago and its settlement failed: the grace is for submits still running, not for this.
      yield* store.create(Testing.record({ id: "young-succeeded", status: "SUCCESS", result: { type: "image", urls: ["https://cdn/y.png"] }, dueAt: null }))
      yield* hold("young-succeeded", 19 * minute)

      expect(yield* Settlements.sweep("10 minutes")).toEqual({ settled: 4, orphans: 1 })
      expect(yield* kinds("young-succeeded")).toEqual(["reserve", "charge"])
      expect(yield* kinds("succeeded")).toEqual(["reserve", "charge"])
      expect(yield* kinds("failed")).toEqual(["reserve", "release"])
      expect(yield* kinds("cancelled")).toEqual(["reserve", "release"])
      expect(yield* kinds("never-stored")).toEqual(["reserve", "release"])
      expect(yield* kinds("running")).toEqual(["reserve"])
      expect(yield* kinds("young-orphan")).toEqual(["reserve"])
      expect(yield* ledger.balance(owner)).toEqual({ balance: 998_000, reserved: 2_000 })
      // A second sweep finds nothing more to do.
      expect(yield* Settlements.sweep("10 minutes")).toEqual({ settled: 0, orphans: 0 })
    }).pipe(Effect.provide(stores)))

  it.effect("reads every page of open reservations", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger.Ledger
      yield* ledger.credit({ id: "c", accountId: owner, amount: 10_000_000, at: 0, note: null })
      for (let i = 0; i < 450; i++) yield* hold(`orphan-${i}`, i % 7)
      yield* TestClock.setTime(11 * minute)
      expect(yield* Settlements.sweep("10 minutes")).toEqual({ settled: 0, orphans: 450 })
      expect(yield* ledger.balance(owner)).toEqual({ balance: 10_000_000, reserved: 0 })
    }).pipe(Effect.provide(stores)))

  it.effect("the layer sweeps at start and then every interval", () =>
    Effect.gen(function*() {
      const ledger = yield* Ledger.Ledger
      yield* ledger.credit({ id: "c", accountId: owner, amount: 100_000, at: 0, note: null })
      yield* hold("lost", 0)
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(Settlements.layer({ interval: "1 minute", grace: "5 minutes" }))
        yield* TestClock.adjust("4 minutes")
        expect(yield* kinds("lost")).toEqual(["reserve"])
        yield* TestClock.adjust("2 minutes")
        expect(yield* kinds("lost")).toEqual(["reserve", "release"])
      }))
    }).pipe(Effect.provide(stores)))
})
