/**
 * Every way a task ends owes its callback, written with the terminal transition: a failure
 * at submit, a cancel, an engine FAILURE and an engine TIMEOUT. Each test looks at the
 * store's outbox, so dropping the callback on any of these paths fails one of them.
 */
import { describe, expect, it } from "@effect/vitest"
import {
  Api,
  IdempotencyKeys,
  Ids,
  Ledger,
  ModelCatalog,
  Moderation,
  TaskChanges,
  TaskEvents,
  TaskService,
  TaskServiceAlone,
  TaskStore,
  TaskWrites,
  Upstream,
  UpstreamError
} from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryTaskStore } from "@mediagate/store-memory"
import { Effect, Layer, TestClock } from "effect"
import { Engine } from "../src/index.js"

const hook = "https://hooks.example.com/cb"
const account = { id: Ids.AccountId.make("acct_cb"), name: "cb" }

/** TaskService and the engine over one memory store and one write path, with an upstream the test chooses. */
const world = (upstream: UpstreamService) => {
  const upstreamLayer = Layer.succeed(Upstream.Upstream, upstream)
  return TaskService.Default.pipe(
    Layer.provide([Engine.layer().pipe(Layer.provide(upstreamLayer)), upstreamLayer, Moderation.layerAllowAll]),
    Layer.provide(TaskServiceAlone.writes),
    Layer.provide([TaskChanges.layer, Ledger.layerUnbilled, IdempotencyKeys.layerMemory, TaskEvents.CallbackWakeup.layerNone]),
    Layer.provideMerge(ModelCatalog.layer),
    Layer.provideMerge(MemoryTaskStore.layer),
    Layer.provideMerge(Ids.layerTest)
  )
}
type UpstreamService = Upstream.Upstream["Type"]

const failing: UpstreamService = {
  submit: () => Effect.fail(new UpstreamError({ message: "refused", reason: null, retryable: false })),
  poll: () => Effect.never
}
const hanging: UpstreamService = { submit: () => Effect.never, poll: () => Effect.never }

const submit = (body: unknown) =>
  Effect.flatMap(TaskService, (service) => Effect.flatMap(Api.decodeSubmitRequest(body), (request) => service.submit(account, request)))

const owed = (taskId: Ids.TaskId) =>
  Effect.flatMap(TaskStore.TaskStore, (store) => Effect.all([store.get(taskId), store.callbacks(taskId)]))

const advance = (seconds: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < seconds; i++) {
      yield* TestClock.adjust("1 second")
      for (let j = 0; j < 20; j++) yield* Effect.yieldNow()
    }
  })

describe("a terminal task owes exactly one callback", () => {
  it("the rule, as a pure function: terminal, with a callBackUrl, and not terminal before", () => {
    const record = (status: "PENDING" | "FAILURE", callBackUrl: string | null) =>
      Testing.record({ id: "t", status, callBackUrl })
    expect(TaskWrites.owesCallback(null, record("FAILURE", hook))).toBe(true)
    expect(TaskWrites.owesCallback("PROCESSING", record("FAILURE", hook))).toBe(true)
    expect(TaskWrites.owesCallback(null, record("PENDING", hook))).toBe(false)
    expect(TaskWrites.owesCallback("PROCESSING", record("FAILURE", null))).toBe(false)
    expect(TaskWrites.owesCallback("FAILURE", record("FAILURE", hook))).toBe(false)
  })

  it.effect("a task that fails at submit (motion with 13 materials)", () =>
    Effect.gen(function*() {
      const urls = Array.from({ length: 13 }, (_, i) => `https://example.com/${i}.png`)
      const { taskId } = yield* submit({ model: "motion-2.0", input: { prompt: "p", mediaUrls: urls }, callBackUrl: hook })
      const [task, callbacks] = yield* owed(taskId)
      expect(task._tag === "Some" && task.value.status).toBe("FAILURE")
      expect(callbacks.map((row) => row.url)).toEqual([hook])
    }).pipe(Effect.provide(world(hanging)), Effect.scoped))

  it.effect("a cancelled task", () =>
    Effect.gen(function*() {
      const { taskId } = yield* submit({ model: "dream-4", input: { prompt: "p" }, callBackUrl: hook })
      expect((yield* owed(taskId))[1]).toEqual([])
      yield* Effect.flatMap(TaskService, (service) => service.cancel(account, taskId))
      const [task, callbacks] = yield* owed(taskId)
      expect(task._tag === "Some" && task.value.status).toBe("CANCELLED")
      expect(callbacks.map((row) => row.url)).toEqual([hook])
    }).pipe(Effect.provide(world(hanging)), Effect.scoped))

  it.effect("a task the engine ends in FAILURE", () =>
    Effect.gen(function*() {
      const { taskId } = yield* submit({ model: "dream-4", input: { prompt: "p" }, callBackUrl: hook })
      yield* advance(3)
      const [task, callbacks] = yield* owed(taskId)
      expect(task._tag === "Some" && task.value.status).toBe("FAILURE")
      expect(callbacks.map((row) => row.url)).toEqual([hook])
    }).pipe(Effect.provide(world(failing)), Effect.scoped))

  it.effect("a task the engine ends in TIMEOUT", () =>
    Effect.gen(function*() {
      // The upstream never answers; the task's deadline is 20 s away.
      const task0 = Testing.record({ id: "0190c8a4-0000-7000-8000-000000000001", callBackUrl: hook, deadlineAt: 20_000, job: Testing.job({ sync: false }) })
      yield* Effect.flatMap(TaskStore.TaskStore, (store) => store.create(task0))
      const taskId = task0.id
      yield* advance(25)
      const [task, callbacks] = yield* owed(taskId)
      expect(task._tag === "Some" && task.value.status).toBe("TIMEOUT")
      expect(callbacks.map((row) => row.url)).toEqual([hook])
    }).pipe(Effect.provide(world(hanging)), Effect.scoped))
})
