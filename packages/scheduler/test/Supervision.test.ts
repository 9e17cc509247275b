/**
 * The background loops outlive a bug: a defect in one claim or one sweep is logged, and the
 * loop starts again after a pause (not at once, not never), so the node goes on working.
 * All time is the TestClock's.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, Ledger, ModelCatalog, Outbound, Task, TaskServiceAlone, TaskStore, Upstream } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryAccounts, MemoryLedger, MemoryTaskStore } from "@mediagate/store-memory"
import { Effect, Layer, Logger, Option, Redacted, TestClock } from "effect"
import { Deliverer, Engine, Settlements } from "../src/index.js"

/** Error lines logged while the effect runs. */
const capturing = () => {
  const errors: Array<string> = []
  const logger = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ logLevel, message }) => {
      if (logLevel.label === "ERROR") errors.push(String(Array.isArray(message) ? message[0] : message))
    })
  )
  return { errors, logger }
}

/** Many turns of the runtime's microtask queue: what the loops do at one instant is done after it. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 500; i++) yield* Effect.yieldNow()
})

/** A defect, as a bug in the store's code would raise. */
const bug = () => Effect.die(new Error("a bug in the claim"))

/** The memory task store whose `claimDue` and `claimCallbacks` die on their first call; calls counted. */
const dyingOnce = (calls: { claimDue: number; claimCallbacks: number }) =>
  Layer.effect(
    TaskStore.TaskStore,
    Effect.map(TaskStore.TaskStore, (store) => ({
      ...store,
      claimDue: (options: Parameters<typeof store.claimDue>[0]) =>
        Effect.suspend(() => (++calls.claimDue === 1 ? bug() : store.claimDue(options))),
      claimCallbacks: (options: Parameters<typeof store.claimCallbacks>[0]) =>
        Effect.suspend(() => (++calls.claimCallbacks === 1 ? bug() : store.claimCallbacks(options)))
    }))
  ).pipe(Layer.provideMerge(MemoryTaskStore.layer))

const result: Task.TaskResult = { type: "image", urls: ["https://cdn.example/a.png"] }

/** An upstream that answers every submit with its result. */
const answering = Layer.succeed(Upstream.Upstream, {
  submit: () => Effect.succeed({ _tag: "Completed" as const, result }),
  poll: () => Effect.succeed({ _tag: "Running" as const })
})

const statusOf = (id: string) =>
  Effect.map(Effect.flatMap(TaskStore.TaskStore, (store) => store.get(Ids.TaskId.make(id))), (task) => Option.getOrThrow(task).status)

describe("supervised loops", () => {
  it.scoped("the engine: a claim that dies is logged, the loop starts again after a pause and finishes the work; the engine still runs", () => {
    const { errors, logger } = capturing()
    const calls = { claimDue: 0, claimCallbacks: 0 }
    return Effect.gen(function*() {
      yield* Effect.flatMap(TaskStore.TaskStore, (store) => store.create(Testing.record({ id: "t1", job: Testing.job({ sync: false }) }), []))
      const engine = yield* Engine.make({ pollInterval: "1 hour" })
      yield* settle
      expect(calls.claimDue).toBe(1)
      expect(errors).toEqual(["engine: the loop died (a bug); it starts again after a pause"])
      expect(yield* statusOf("t1")).toBe<Task.TaskStatus>("PENDING")
      expect(yield* engine.running).toBe(true)

      // Not a tight loop: nothing more until the pause has passed, a wake-up notwithstanding.
      yield* engine.wake
      yield* TestClock.adjust("999 millis")
      yield* settle
      expect(calls.claimDue).toBe(1)

      yield* TestClock.adjust("1 millis")
      yield* settle
      expect(yield* statusOf("t1")).toBe<Task.TaskStatus>("SUCCESS")
      expect(yield* engine.running).toBe(true)
      expect(errors).toHaveLength(1)
    }).pipe(
      Effect.provide(TaskServiceAlone.writes.pipe(Layer.provideMerge(dyingOnce(calls)), Layer.provideMerge(Layer.mergeAll(answering, Ids.layerTest, ModelCatalog.layer)))),
      Effect.provide(logger)
    )
  })

  it.scoped("a step that dies is logged with its task; the task is tried again once its lease runs out", () => {
    const { errors, logger } = capturing()
    let submits = 0
    const dyingUpstream = Layer.succeed(Upstream.Upstream, {
      submit: () => Effect.suspend(() => (++submits === 1 ? Effect.die(new Error("a bug in the adapter")) : Effect.succeed({ _tag: "Completed" as const, result }))),
      poll: () => Effect.succeed({ _tag: "Running" as const })
    })
    return Effect.gen(function*() {
      yield* Effect.flatMap(TaskStore.TaskStore, (store) => store.create(Testing.record({ id: "t1", job: Testing.job({ sync: false }) }), []))
      const engine = yield* Engine.make({ pollInterval: "1 second", leaseDuration: "15 seconds" })
      yield* settle
      expect(submits).toBe(1)
      expect(errors.filter((line) => line.startsWith("engine: step"))).toEqual([
        "engine: step of task t1 died (a bug); it is tried again once its lease runs out"
      ])
      expect(yield* statusOf("t1")).toBe<Task.TaskStatus>("PENDING")

      // Its lease holds: no other try before it runs out.
      yield* TestClock.adjust("14 seconds")
      yield* settle
      expect(submits).toBe(1)
      yield* TestClock.adjust("2 seconds")
      yield* settle
      expect(submits).toBe(2)
      expect(yield* statusOf("t1")).toBe<Task.TaskStatus>("SUCCESS")
      expect(yield* engine.running).toBe(true)
    }).pipe(
      Effect.provide(TaskServiceAlone.writes.pipe(Layer.provideMerge(MemoryTaskStore.layer), Layer.provideMerge(Layer.mergeAll(dyingUpstream, Ids.layerTest, ModelCatalog.layer)))),
      Effect.provide(logger)
    )
  })

  it.scoped("the deliverer: a claim that dies is logged, and the loop starts again after a pause and sends the callback", () => {
    const { errors, logger } = capturing()
    const calls = { claimDue: 0, claimCallbacks: 0 }
    const posted: Array<string> = []
    const outbound = Layer.succeed(Outbound.Outbound, {
      post: (request) => Effect.sync(() => (posted.push(request.url), { status: 204 }))
    })
    const accounts = MemoryAccounts.layer([{ id: Testing.owner, name: "t", apiKey: Redacted.make("k") }])
    return Effect.gen(function*() {
      const store = yield* TaskStore.TaskStore
      const task = Testing.record({ id: "t1", status: "SUCCESS", dueAt: null, result, callBackUrl: "https://receiver.example/hook" })
      yield* store.create(task, [{ id: "msg_1", taskId: task.id, url: task.callBackUrl!, createdAt: 0 }])
      yield* Layer.build(Deliverer.layer({ pollInterval: "1 hour" }).pipe(Layer.provide([accounts, outbound])))
      yield* settle
      expect(calls.claimCallbacks).toBe(1)
      expect(errors).toEqual(["deliverer: the loop died (a bug); it starts again after a pause"])
      expect(posted).toEqual([])

      yield* TestClock.adjust("999 millis")
      yield* settle
      expect(calls.claimCallbacks).toBe(1)

      yield* TestClock.adjust("1 millis")
      yield* settle
      expect(posted).toEqual(["https://receiver.example/hook"])
      expect((yield* store.callbackAttempts("msg_1")).map((attempt) => attempt.outcome._tag)).toEqual(["Delivered"])
      expect(errors).toHaveLength(1)
    }).pipe(Effect.provide(dyingOnce(calls)), Effect.provide(logger))
  })

  it.scoped("the settlement sweep: a sweep that dies is logged, and the sweeps start again after a pause", () => {
    const { errors, logger } = capturing()
    let opens = 0
    const ledger = Layer.effect(
      Ledger.Ledger,
      Effect.map(Ledger.Ledger, (ledger) => ({
        ...ledger,
        open: (options: Parameters<typeof ledger.open>[0]) => Effect.suspend(() => (++opens === 1 ? Effect.die(new Error("a bug in the sweep")) : ledger.open(options)))
      }))
    ).pipe(Layer.provideMerge(MemoryLedger.layer))
    const owner = Ids.AccountId.make(Testing.owner)
    return Effect.gen(function*() {
      const store = yield* TaskStore.TaskStore
      const credits = yield* Ledger.Ledger
      yield* credits.credit({ id: "c", accountId: owner, amount: 10_000, at: 0, note: null })
      yield* store.create(Testing.record({ id: "ended", status: "SUCCESS", result, dueAt: null }))
      yield* credits.reserve({ id: "r-ended", accountId: owner, taskId: "ended", amount: 1_000, at: 0 })
      const kinds = Effect.map(credits.forTask("ended"), (entries) => entries.map((entry) => entry.kind))

      yield* Layer.build(Settlements.layer({ interval: "5 minutes" }))
      yield* settle
      expect(errors).toEqual(["credits: settlement sweep: the loop died (a bug); it starts again after a pause"])
      expect(yield* kinds).toEqual(["reserve"])

      yield* TestClock.adjust("999 millis")
      yield* settle
      expect(opens).toBe(1)

      // Restarted after the pause, not at the next interval five minutes on.
      yield* TestClock.adjust("1 millis")
      yield* settle
      expect(yield* kinds).toEqual(["reserve", "charge"])
      expect(errors).toHaveLength(1)
    }).pipe(Effect.provide(Layer.mergeAll(ledger, MemoryTaskStore.layer, Ids.layerTest)), Effect.provide(logger))
  })
})
