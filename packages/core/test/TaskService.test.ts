/**
 * Submit, query and a provider's webhook (spec sections 4.1 and 4.2) without HTTP, against a small memory
 * TaskStore written here, the production Ids and the real model catalog.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Context, Effect, Exit, Fiber, Layer, Option, Ref, TestClock } from "effect"
import {
  Api,
  IdempotencyKeys,
  Ids,
  Ledger,
  ModelCatalog,
  Moderation,
  ModerationRejected,
  SubmitPolicy,
  Task,
  TaskConflict,
  TaskEvents,
  TaskNotFound,
  Pricing,
  TaskChanges,
  TaskService,
  TaskServiceAlone,
  TaskStore,
  TaskWrites,
  Transition,
  Upstream,
  ValidationError,
  webhookWatch
} from "../src/index.js"

// ---------------------------------------------------------------------------
// Test doubles

/** The tasks the in-test store holds, so tests can look behind the service. */
class StoredTasks extends Context.Tag("test/StoredTasks")<StoredTasks, Map<string, Task.TaskRecord>>() {}

const makeMemoryStore = (tasks: Map<string, Task.TaskRecord>): Context.Tag.Service<TaskStore.TaskStore> => ({
  create: (task) => Effect.sync(() => void tasks.set(task.id, task)),
  get: (id) => Effect.sync(() => Option.fromNullable(tasks.get(id))),
  getOwned: (id, owner) => Effect.sync(() => Option.fromNullable(tasks.get(id)).pipe(Option.filter((task) => task.ownerId === owner))),
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
    Effect.sync(() =>
      [...tasks.values()]
        .filter((task) =>
          !Task.isTerminal(task.status) && task.dueAt !== null && task.dueAt <= now &&
          (task.leaseUntil === null || task.leaseUntil <= now)
        )
        .sort((a, b) => a.dueAt! - b.dueAt!)
        .slice(0, limit)
        .map((task) => {
          const leased = new Task.TaskRecord({ ...task, leaseOwner: worker, leaseUntil, version: task.version + 1 })
          tasks.set(task.id, leased)
          return leased
        })
    ),
  releaseLeases: () => Effect.die("not used by TaskService"),
  list: () => Effect.die("not used by TaskService"),
  listAll: () => Effect.die("not used by TaskService"),
  callbacks: () => Effect.succeed([]),
  redeliverCallbacks: () => Effect.die("not used by these tests"),
  claimCallbacks: () => Effect.succeed([]),
  recordCallbackAttempt: () => Effect.void,
  recordCallbackAttempts: () => Effect.void,
  callbackAttempts: () => Effect.succeed([])
})

/** A fresh, empty store each time the layer is built (once per test). */
const MemoryStore = Layer.effect(TaskStore.TaskStore, Effect.map(StoredTasks, makeMemoryStore)).pipe(
  Layer.provideMerge(Layer.sync(StoredTasks, () => new Map()))
)

/** The prompts moderation was asked about. */
class ModerationLog extends Context.Tag("test/ModerationLog")<ModerationLog, Ref.Ref<ReadonlyArray<string>>>() {}

/** Moderation that flags the given categories for every prompt, and records what it saw. */
const flagging = (categories: ReadonlyArray<Moderation.ModerationCategory>) =>
  Layer.effect(
    Moderation.Moderation,
    Effect.map(ModerationLog, (log) => ({
      check: (prompt: string) => Effect.as(Ref.update(log, (seen) => [...seen, prompt]), Moderation.verdict(categories))
    }))
  ).pipe(Layer.provideMerge(Layer.effect(ModerationLog, Ref.make<ReadonlyArray<string>>([]))))

/** TaskService over the doubles, with no scheduler (`TaskServiceAlone`): everything it needs comes from here. */
const serviceWith = <R>(moderation: Layer.Layer<Moderation.Moderation | R>, upstream = TaskServiceAlone.noUpstream) =>
  TaskServiceAlone.layer.pipe(Layer.provideMerge(Layer.mergeAll(MemoryStore, Ids.layer, ModelCatalog.layer, moderation, upstream)))

const Service = serviceWith(Moderation.layerAllowAll)

// ---------------------------------------------------------------------------

const alice = { id: Ids.AccountId.make("acct-alice"), name: "Alice" }
const bob = { id: Ids.AccountId.make("acct-bob"), name: "Bob" }
const T2I = "alpha-image-2/text-to-image"
const I2I = "alpha-image-2/image-to-image"
const NOW = 1_767_225_600_123 // 2026-01-01T00:00:00.123Z
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const notPublic = "must name a public host (localhost and private addresses are not supported; for local development allow them with MEDIAGATE_ALLOW_PRIVATE_URLS=true, or allowPrivateUrls: true in Deployment.services (or Mediagate.layer) when embedding)"

/** Submit as the HTTP edge does it: decode the body with the request Schema, then call the use case. */
const submit = (body: unknown) =>
  Effect.flatMap(TaskService, (service) => Effect.flatMap(Api.decodeSubmitRequest(body), (request) => service.submit(alice, request)))

/** The ValidationError message of a refused submit; also checks nothing was stored. */
const refusal = (body: unknown) =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(submit(body))
    expect(error).toBeInstanceOf(ValidationError)
    expect((yield* StoredTasks).size).toBe(0)
    return (error as ValidationError).message
  })

describe("TaskService.submit: accepted", () => {
  it.effect("returns a UUIDv7 taskId and stores a PENDING record with the echoed input and the normalised job", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const { taskId } = yield* submit({
        model: T2I,
        input: { prompt: "a lighthouse at dusk", ratio: "4:3", resolution: "2k", n: 2 },
        callBackUrl: "https://hooks.example.com/mediagate",
        user_id: "user-42"
      })
      expect(taskId).toMatch(UUID_V7)
      expect(parseInt(taskId.replace(/-/g, "").slice(0, 12), 16)).toBe(NOW)

      const stored = (yield* StoredTasks).get(taskId)!
      expect(stored).toBeInstanceOf(Task.TaskRecord)
      expect({ ...stored }).toEqual({
        attempts: [],
        id: taskId,
        ownerId: alice.id,
        status: "PENDING",
        input: { model: T2I, prompt: "a lighthouse at dusk", ratio: "4:3", resolution: "2k", n: 2 },
        job: {
          model: "alpha-image-2",
          mode: "text-to-image",
          output: "image",
          prompt: "a lighthouse at dusk",
          n: 2,
          ratio: "4:3",
          resolution: "2k",
          width: 2048,
          height: 1536,
          duration: null,
          imageUrls: [],
          params: {},
          fallbackModel: null,
          sync: true,
          priceMicroUsd: 80_000,
          adjustments: []
        },
        result: null,
        failureReason: null,
        errorMessage: null,
        callBackUrl: "https://hooks.example.com/mediagate",
        userId: "user-42",
        upstreamId: null,
        createdAt: NOW,
        updatedAt: NOW,
        deadlineAt: NOW + 10 * 60_000,
        dueAt: NOW,
        leaseOwner: null,
        leaseUntil: null,
        version: 1,
        provider: null,
        progress: null,
        callbackEvents: null,
        keyId: null
      })
    }).pipe(Effect.provide(Service)))

  it.effect("the task names the provider its upstream will run it on, for that provider's running limit", () =>
    Effect.gen(function*() {
      const { taskId } = yield* submit({ model: T2I, input: { prompt: "a lighthouse" } })
      expect((yield* StoredTasks).get(taskId)!.provider).toBe("fal:alpha-image-2")
    }).pipe(Effect.provide(serviceWith(Moderation.layerAllowAll, Layer.succeed(Upstream.Upstream, {
      submit: () => Effect.die("not used"),
      poll: () => Effect.die("not used"),
      provider: (job) => `fal:${job.model}`
    })))))

  it.effect("the echo holds what the client sent, without the defaults the job resolved", () =>
    Effect.gen(function*() {
      const { taskId } = yield* submit({ model: T2I, input: { prompt: "p" } })
      const stored = (yield* StoredTasks).get(taskId)!
      expect(stored.input).toEqual({ model: T2I, prompt: "p" })
      expect(stored.job).toMatchObject({ resolution: "1k", n: 1, ratio: null, width: null, height: null })
      expect([stored.callBackUrl, stored.userId]).toEqual([null, null])
    }).pipe(Effect.provide(Service)))

  it.effect("image-to-image echoes imageUrls and carries them into the job", () =>
    Effect.gen(function*() {
      const input = { prompt: "make it winter", imageUrls: ["https://images.example.com/a.jpg"], ratio: "16:9", resolution: "4k" }
      const { taskId } = yield* submit({ model: I2I, input })
      const stored = (yield* StoredTasks).get(taskId)!
      expect(stored.input).toEqual({ model: I2I, ...input })
      expect(stored.job).toMatchObject({ mode: "image-to-image", imageUrls: input.imageUrls, width: 3840, height: 2160 })
    }).pipe(Effect.provide(Service)))

  it.effect("null callBackUrl and user_id count as absent", () =>
    Effect.gen(function*() {
      const { taskId } = yield* submit({ model: T2I, input: { prompt: "p" }, callBackUrl: null, user_id: null })
      const stored = (yield* StoredTasks).get(taskId)!
      expect([stored.callBackUrl, stored.userId]).toEqual([null, null])
    }).pipe(Effect.provide(Service)))

  it.effect("ids of later submissions sort after earlier ones", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const first = yield* submit({ model: T2I, input: { prompt: "p" } })
      yield* TestClock.adjust("1 millis")
      const second = yield* submit({ model: T2I, input: { prompt: "p" } })
      expect(second.taskId > first.taskId).toBe(true)
      expect((yield* StoredTasks).size).toBe(2)
    }).pipe(Effect.provide(Service)))

  it.effect("a submitted task is due at once for the engine", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const { taskId } = yield* submit({ model: T2I, input: { prompt: "p" } })
      const store = yield* TaskStore.TaskStore
      const claimed = yield* store.claimDue({ now: NOW, limit: 10, worker: "w1", leaseUntil: NOW + 30_000 })
      expect(claimed.map((t) => [t.id, t.status, t.leaseOwner])).toEqual([[taskId, "PENDING", "w1"]])
      expect(yield* store.claimDue({ now: NOW, limit: 10, worker: "w2", leaseUntil: NOW + 30_000 })).toEqual([])
    }).pipe(Effect.provide(Service)))

  it.effect("with a TaskWakeup present, each accepted submit wakes the engine once; a refused one does not", () =>
    Effect.gen(function*() {
      const wakes = yield* Ref.make(0)
      const run = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.provide(effect, Layer.succeed(TaskEvents.TaskWakeup, { wake: Ref.update(wakes, (n) => n + 1) }))
      const service = yield* run(Effect.provide(TaskService, TaskService.Default.pipe(
        Layer.provide(TaskWrites.layer),
        Layer.provide([TaskChanges.layer, Ledger.layerUnbilled, IdempotencyKeys.layerMemory, TaskEvents.CallbackWakeup.layerNone, TaskServiceAlone.noUpstream]),
        Layer.provide(Layer.mergeAll(MemoryStore, Ids.layer, ModelCatalog.layer, Moderation.layerAllowAll))
      )))
      yield* service.submit(alice, { model: T2I, input: { prompt: "p" } })
      yield* service.submit(alice, { model: T2I, input: { prompt: "q" } })
      yield* Effect.flip(service.submit(alice, { model: T2I, input: {} }))
      expect(yield* Ref.get(wakes)).toBe(2)
    }))
})

describe("TaskService.query", () => {
  it.effect("the owner gets the Task wire shape of spec section 2", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const service = yield* TaskService
      const { taskId } = yield* service.submit(alice, { model: T2I, input: { prompt: "p", n: 3 }, user_id: "u" })
      const task = yield* service.query(alice, taskId)
      expect(task).toEqual({
        taskId,
        status: "PENDING",
        input: { model: T2I, prompt: "p", n: 3 },
        result: null,
        failure_reason: null,
        created_at: "2026-01-01T00:00:00.123Z",
        updated_at: "2026-01-01T00:00:00.123Z",
        adjustments: [],
        error: null,
        attempts: [],
        // alpha-image-2 at 1k: $0.02 an image, 3 images.
        price_micro_usd: 60_000,
        progress: null
      })
      // The spec's seven fields plus the documented additive `adjustments`, `error`, `attempts` and `progress`; nothing internal leaks.
      expect(Object.keys(task).sort()).toEqual(
        ["adjustments", "attempts", "created_at", "error", "failure_reason", "input", "price_micro_usd", "progress", "result", "status", "taskId", "updated_at"]
      )
    }).pipe(Effect.provide(Service)))

  it.effect("created_at and updated_at are ISO 8601 UTC with milliseconds even on a whole second", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(1_767_225_600_000)
      const service = yield* TaskService
      const { taskId } = yield* service.submit(alice, { model: T2I, input: { prompt: "p" } })
      const task = yield* service.query(alice, taskId)
      expect(task.created_at).toBe("2026-01-01T00:00:00.000Z")
      expect(task.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    }).pipe(Effect.provide(Service)))

  it.effect("another account, or an unknown id, gets TaskNotFound", () =>
    Effect.gen(function*() {
      const service = yield* TaskService
      const { taskId } = yield* service.submit(alice, { model: T2I, input: { prompt: "p" } })
      const forBob = yield* Effect.flip(service.query(bob, taskId))
      expect(forBob).toBeInstanceOf(TaskNotFound)
      expect(forBob).toMatchObject({ _tag: "TaskNotFound", taskId })
      const unknown = yield* Effect.flip(service.query(alice, Ids.TaskId.make("0190c8a4-b2c3-7fff-bfff-ffffffffffff")))
      expect(unknown).toBeInstanceOf(TaskNotFound)
      expect(unknown).toMatchObject({ taskId: "0190c8a4-b2c3-7fff-bfff-ffffffffffff" })
    }).pipe(Effect.provide(Service)))

  it.effect("after the engine finishes a task the query shows its result, and a stale write is a TaskConflict", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const service = yield* TaskService
      const store = yield* TaskStore.TaskStore
      const { taskId } = yield* service.submit(alice, { model: T2I, input: { prompt: "p" } })
      const [claimed] = yield* store.claimDue({ now: NOW, limit: 1, worker: "w1", leaseUntil: NOW + 30_000 })
      const result: Task.TaskResult = { type: "image", urls: ["https://cdn.example.com/1.png"] }
      const done = yield* Transition.apply(claimed!, { to: "SUCCESS", result }, NOW + 2_000)
      yield* store.update(done, claimed!.version)

      // A second writer that read the task before the first write loses.
      const stale = yield* Transition.apply(claimed!, { to: "FAILURE", reason: null, message: "late" }, NOW + 3_000)
      const conflict = yield* Effect.flip(store.update(stale, claimed!.version))
      expect(conflict).toBeInstanceOf(TaskConflict)
      expect(conflict).toMatchObject({ taskId, expectedVersion: claimed!.version })

      expect(yield* service.query(alice, taskId)).toMatchObject({
        status: "SUCCESS",
        result,
        failure_reason: null,
        created_at: "2026-01-01T00:00:00.123Z",
        updated_at: "2026-01-01T00:00:02.123Z"
      })
    }).pipe(Effect.provide(Service)))

  it.effect("a failed task shows its failure_reason and result null", () =>
    Effect.gen(function*() {
      const service = yield* TaskService
      const store = yield* TaskStore.TaskStore
      const { taskId } = yield* service.submit(alice, { model: T2I, input: { prompt: "p" } })
      const current = Option.getOrThrow(yield* store.get(taskId))
      const failed = yield* Transition.apply(current, { to: "FAILURE", reason: "INSUFFICIENT_POINTS", message: "0 credits" }, 5)
      yield* store.update(failed, current.version)
      expect(yield* service.query(alice, taskId)).toMatchObject({
        status: "FAILURE",
        result: null,
        failure_reason: "INSUFFICIENT_POINTS"
      })
    }).pipe(Effect.provide(Service)))
})

describe("TaskService.submit: the request envelope", () => {
  const ok = { model: T2I, input: { prompt: "p" } }
  const cases: ReadonlyArray<readonly [string, unknown, string]> = [
    ["body is an array", [], "request body must be a JSON object"],
    ["body is a string", "hello", "request body must be a JSON object"],
    ["body is null", null, "request body must be a JSON object"],
    ["body is a number", 42, "request body must be a JSON object"],
    ["model missing", { input: { prompt: "p" } }, "model is required"],
    ["model null", { model: null, input: { prompt: "p" } }, "model is required"],
    ["model empty", { model: "", input: { prompt: "p" } }, "model is required"],
    ["model a number", { model: 7, input: { prompt: "p" } }, "model must be a string"],
    ["model an array", { model: [T2I], input: { prompt: "p" } }, "model must be a string"],
    ["model unknown", { model: "x", input: { prompt: "p" } }, "model 'x' is not supported; GET /api/v1/models lists every model"],
    ["model in the wrong case", { model: "Alpha-Image-2/Text-To-Image", input: { prompt: "p" } }, `model 'Alpha-Image-2/Text-To-Image' is not supported; did you mean ${T2I}? GET /api/v1/models lists every model`],
    ["model a family name", { model: "clip", input: { prompt: "p" } }, "model 'clip' is not supported; did you mean clip3, clip3_fast or clip3_lite? GET /api/v1/models lists every model"],
    ["model inside input", { model: "canvas-4.0", input: { prompt: "p", model: T2I } }, "input.model is not a supported field; the model is the top-level model field"],
    ["input null inside", { model: T2I, input: { prompt: "p" }, extra: null }, "extra is not a supported field"],
    ["input missing", { model: T2I }, "input is required"],
    ["input null", { model: T2I, input: null }, "input is required"],
    ["input an array", { model: T2I, input: [] }, "input must be an object"],
    ["input a string", { model: T2I, input: "p" }, "input must be an object"],
    ["unknown top-level field", { ...ok, webhook: "https://example.com" }, "webhook is not a supported field"],
    ["top-level prompt", { ...ok, prompt: "p" }, "prompt is not a supported field"],
    ["callBackUrl a number", { ...ok, callBackUrl: 1 }, "callBackUrl must be a string"],
    ["callBackUrl localhost", { ...ok, callBackUrl: "http://localhost:3000/cb" }, `callBackUrl ${notPublic}`],
    ["callBackUrl 10.0.0.1", { ...ok, callBackUrl: "http://10.0.0.1/cb" }, `callBackUrl ${notPublic}`],
    ["callBackUrl metadata", { ...ok, callBackUrl: "http://169.254.169.254/" }, `callBackUrl ${notPublic}`],
    ["callBackUrl [::1]", { ...ok, callBackUrl: "https://[::1]/cb" }, `callBackUrl ${notPublic}`],
    ["callBackUrl ftp", { ...ok, callBackUrl: "ftp://example.com/cb" }, "callBackUrl must be an http or https URL"],
    ["callBackUrl relative", { ...ok, callBackUrl: "/cb" }, "callBackUrl must be an absolute URL"],
    ["callBackUrl empty", { ...ok, callBackUrl: "" }, "callBackUrl must be an absolute URL"],
    ["callBackUrl credentials", { ...ok, callBackUrl: "https://u:p@example.com/cb" }, "callBackUrl must not contain credentials"],
    ["user_id an object", { ...ok, user_id: {} }, "user_id must be a string"],
    ["user_id a number", { ...ok, user_id: 42 }, "user_id must be a string"],
    ["user_id too long", { ...ok, user_id: "u".repeat(257) }, "user_id must be at most 256 characters"],
    ["input breaks the model's rules", { model: T2I, input: {} }, `input.prompt is required for ${T2I}`],
    ["input with an unknown field", { model: T2I, input: { prompt: "p", seed: 1 } }, `input.seed is not a supported field for ${T2I}`],
    ["imageUrls at 127.0.0.1", { model: I2I, input: { prompt: "p", imageUrls: ["https://127.0.0.1/a.png"] } }, `input.imageUrls[0] ${notPublic} for ${I2I}`],
    ["imageUrls at localhost", { model: I2I, input: { prompt: "p", imageUrls: ["https://localhost/a.png"] } }, `input.imageUrls[0] ${notPublic} for ${I2I}`],
    ["imageUrls at 192.168.1.10", { model: I2I, input: { prompt: "p", imageUrls: ["https://192.168.1.10/a.png"] } }, `input.imageUrls[0] ${notPublic} for ${I2I}`],
    ["imageUrls at [::ffff:127.0.0.1]", { model: I2I, input: { prompt: "p", imageUrls: ["https://[::ffff:127.0.0.1]/a.png"] } }, `input.imageUrls[0] ${notPublic} for ${I2I}`]
  ]

  it.effect.each(cases)("%s", ([, body, message]) =>
    Effect.gen(function*() {
      expect(yield* refusal(body)).toBe(message)
    }).pipe(Effect.provide(Service)))

  it.effect("every callBackUrl refusal starts with 'callBackUrl '", () =>
    Effect.gen(function*() {
      for (const callBackUrl of ["http://localhost/cb", "http://10.0.0.1/cb", "ftp://example.com/cb", "http://127.0.0.1:9/x"]) {
        expect(yield* refusal({ ...ok, callBackUrl })).toMatch(/^callBackUrl /)
      }
    }).pipe(Effect.provide(Service)))

  it.effect("a public http or https callBackUrl is accepted", () =>
    Effect.gen(function*() {
      for (const callBackUrl of ["http://hooks.example.com/cb", "https://8.8.8.8:8443/cb?x=1"]) {
        const { taskId } = yield* submit({ ...ok, callBackUrl })
        expect((yield* StoredTasks).get(taskId)!.callBackUrl).toBe(callBackUrl)
      }
    }).pipe(Effect.provide(Service)))
})

describe("TaskService.submit: SubmitPolicy", () => {
  const allowPrivate = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.provideService(effect, SubmitPolicy, { ...SubmitPolicy.defaultValue(), allowPrivateUrls: true })

  it.effect("allowPrivateUrls accepts localhost and private callback and media URLs", () =>
    Effect.gen(function*() {
      const tasks = yield* StoredTasks
      for (const callBackUrl of ["http://localhost:9999/cb", "http://10.0.0.1/cb", "http://127.0.0.1/cb"]) {
        const { taskId } = yield* allowPrivate(submit({ ...{ model: T2I, input: { prompt: "p" } }, callBackUrl }))
        expect(tasks.get(taskId)!.callBackUrl).toBe(callBackUrl)
      }
      const { taskId } = yield* allowPrivate(
        submit({ model: I2I, input: { prompt: "p", imageUrls: ["https://127.0.0.1/a.png"] } })
      )
      expect(tasks.get(taskId)!.job.imageUrls).toEqual(["https://127.0.0.1/a.png"])
    }).pipe(Effect.provide(Service)))

  it.effect("allowPrivateUrls does not relax the scheme or credentials rules", () =>
    Effect.gen(function*() {
      const refused = (body: unknown) => Effect.map(Effect.flip(allowPrivate(submit(body))), (e) => (e as ValidationError).message)
      expect(yield* refused({ model: T2I, input: { prompt: "p" }, callBackUrl: "ftp://localhost/cb" })).toBe(
        "callBackUrl must be an http or https URL"
      )
      expect(yield* refused({ model: T2I, input: { prompt: "p" }, callBackUrl: "http://u:p@localhost/cb" })).toBe(
        "callBackUrl must not contain credentials"
      )
      expect(yield* refused({ model: I2I, input: { prompt: "p", imageUrls: ["http://127.0.0.1/a.png"] } })).toBe(
        `input.imageUrls[0] must be an absolute https URL for ${I2I}`
      )
    }).pipe(Effect.provide(Service)))
})

describe("TaskService.submit: moderation", () => {
  /** The spec's 13 categories (section 7), copied here. */
  const specCategories = [
    "harassment",
    "harassment/threatening",
    "sexual",
    "hate",
    "hate/threatening",
    "illicit",
    "illicit/violent",
    "self-harm/intent",
    "self-harm/instructions",
    "self-harm",
    "sexual/minors",
    "violence",
    "violence/graphic"
  ]

  it.effect("a flagged prompt is ModerationRejected with all 13 categories and nothing is stored", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(submit({ model: T2I, input: { prompt: "something hateful" } }))
      expect(error).toBeInstanceOf(ModerationRejected)
      const { categories } = error as ModerationRejected
      expect(Object.keys(categories).sort()).toEqual([...specCategories].sort())
      expect(Object.values(categories).every((v) => typeof v === "boolean")).toBe(true)
      expect(Object.entries(categories).filter(([, flagged]) => flagged).map(([name]) => name).sort()).toEqual(
        ["hate", "violence/graphic"]
      )
      expect((yield* StoredTasks).size).toBe(0)
      expect(yield* Ref.get(yield* ModerationLog)).toEqual(["something hateful"])
    }).pipe(Effect.provide(serviceWith(flagging(["hate", "violence/graphic"])))))

  it.effect("moderation sees the prompt of image-to-image too", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        submit({ model: I2I, input: { prompt: "edit", imageUrls: ["https://images.example.com/a.jpg"] } })
      )
      expect(error).toBeInstanceOf(ModerationRejected)
      expect(yield* Ref.get(yield* ModerationLog)).toEqual(["edit"])
    }).pipe(Effect.provide(serviceWith(flagging(["sexual/minors"])))))

  it.effect("an invalid request is refused before moderation is asked", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(submit({ model: T2I, input: { prompt: "p", n: 0 } }))
      expect(error).toBeInstanceOf(ValidationError)
      const privateImage = yield* Effect.flip(
        submit({ model: I2I, input: { prompt: "p", imageUrls: ["https://10.0.0.1/a.png"] } })
      )
      expect(privateImage).toBeInstanceOf(ValidationError)
      expect(yield* Ref.get(yield* ModerationLog)).toEqual([])
    }).pipe(Effect.provide(serviceWith(flagging(["hate"])))))

  it.effect("a clean verdict lets the task through", () =>
    Effect.gen(function*() {
      const { taskId } = yield* submit({ model: T2I, input: { prompt: "a cat" } })
      expect((yield* StoredTasks).get(taskId)!.status).toBe("PENDING")
      expect(yield* Ref.get(yield* ModerationLog)).toEqual(["a cat"])
    }).pipe(Effect.provide(serviceWith(flagging([])))))
})

describe("TaskService: the price table", () => {
  /** The defect a TaskService built on `table` dies with, or undefined when it builds. */
  const buildWith = (table: Pricing.PriceTable) =>
    Effect.map(Effect.exit(Effect.scoped(Layer.build(Service.pipe(Layer.provide(Layer.succeed(Pricing.Prices, table)))))), (exit) =>
      Exit.isSuccess(exit) ? undefined : Cause.pretty(exit.cause))

  it.effect("the default table prices every model, so the service builds", () =>
    Effect.gen(function*() {
      expect(yield* buildWith(Pricing.defaultPrices)).toBeUndefined()
    }))

  it.effect("a table without an entry stops the service when it is built, naming the entry", () =>
    Effect.gen(function*() {
      const { "motion-1.5-pro": _, ...video } = Pricing.defaultPrices.videoPerSecond
      expect(yield* buildWith({ ...Pricing.defaultPrices, videoPerSecond: video })).toContain(
        "the price table is incomplete: motion-1.5-pro: price table has no entry for model motion-1.5-pro"
      )
      // clip3 runs r2v as clip3_fast: its table must price every resolution the quality tier accepts.
      const clip3 = { ...Pricing.defaultPrices.clip3PerSecond, clip3_fast: { "720p": 1, "1080p": 2 } }
      expect(yield* buildWith({ ...Pricing.defaultPrices, clip3PerSecond: clip3 })).toContain(
        "price table has no entry for clip3_fast resolution 4k"
      )
      const { "4k": __, ...dream } = Pricing.defaultPrices.imagePerImage["dream-4"]!
      const images = { ...Pricing.defaultPrices.imagePerImage, "dream-4": dream }
      expect(yield* buildWith({ ...Pricing.defaultPrices, imagePerImage: images })).toContain(
        "dream-4: price table has no entry for dream-4 resolution 4k"
      )
    }))
})

describe("TaskService.submit: the moderation verdict", () => {
  it.effect("ModerationRejected carries the verdict's flagged and categories as given", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(submit({ model: T2I, input: { prompt: "p" } }))
      expect(error).toEqual(new ModerationRejected({ flagged: true, categories: { hate: true } }))
    }).pipe(Effect.provide(serviceWith(Layer.succeed(Moderation.Moderation, {
      check: () => Effect.succeed({ flagged: true, categories: { hate: true } as never })
    })))))
})

describe("TaskService.receiveWebhook", () => {
  /** How often the engine was woken. */
  class Wakes extends Context.Tag("test/Wakes")<Wakes, Ref.Ref<number>>() {}

  /** An upstream whose webhooks are genuine when they carry `x-signature: good`; nothing runs on it here. */
  const signedUpstream = Layer.succeed(Upstream.Upstream, {
    submit: () => Effect.die("not used by these tests"),
    poll: () => Effect.die("not used by these tests"),
    verifyWebhook: (webhook) => Effect.succeed(webhook.headers["x-signature"] === "good")
  })

  /** The service and the write path the engine would use, on one TaskChanges, with the engine's wake-ups counted. */
  const WebhookService = TaskService.Default.pipe(
    Layer.provideMerge(TaskWrites.layer),
    Layer.provide([
      TaskChanges.layer,
      Ledger.layerUnbilled,
      IdempotencyKeys.layerMemory,
      TaskEvents.CallbackWakeup.layerNone,
      Layer.effect(TaskEvents.TaskWakeup, Effect.map(Wakes, (wakes) => ({ wake: Ref.update(wakes, (n) => n + 1) }))),
      signedUpstream
    ]),
    Layer.provideMerge(Layer.mergeAll(MemoryStore, Ids.layer, ModelCatalog.layer, Moderation.layerAllowAll, Layer.effect(Wakes, Ref.make(0))))
  )

  const webhook = (taskId: string, signature = "good") =>
    Effect.flatMap(TaskService, (service) =>
      service.receiveWebhook({ provider: "fake", token: taskId, headers: { "x-signature": signature }, body: new Uint8Array() }))

  /**
   * A submitted task as the engine leaves it: its job accepted upstream and its next poll at
   * NOW + 30 s, held by a worker's step until NOW + 60 s when `held`. The engine's wake-ups
   * are counted from here.
   */
  const submittedTask = (held: boolean) =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const { taskId } = yield* submit({ model: T2I, input: { prompt: "p" } })
      const tasks = yield* StoredTasks
      const stored = tasks.get(taskId)!
      const record = new Task.TaskRecord({
        ...stored,
        status: "SUBMITTED",
        upstreamId: Ids.UpstreamId.make("job-1"),
        dueAt: NOW + 30_000,
        leaseOwner: held ? "worker-1" : null,
        leaseUntil: held ? NOW + 60_000 : null,
        version: stored.version + 1
      })
      tasks.set(taskId, record)
      yield* Ref.set(yield* Wakes, 0)
      return record
    })

  const stored = (taskId: string) => Effect.map(StoredTasks, (tasks) => tasks.get(taskId)!)

  it.effect("a genuine webhook makes a task nobody holds due now and wakes the engine", () =>
    Effect.gen(function*() {
      const task = yield* submittedTask(false)
      expect(yield* webhook(task.id)).toBe(true)
      expect((yield* stored(task.id)).dueAt).toBe(NOW)
      expect(yield* Ref.get(yield* Wakes)).toBe(1)
    }).pipe(Effect.provide(WebhookService)))

  it.effect("a webhook the upstream does not find genuine is refused and changes nothing", () =>
    Effect.gen(function*() {
      const task = yield* submittedTask(false)
      expect(yield* webhook(task.id, "forged")).toBe(false)
      expect(yield* stored(task.id)).toEqual(task)
      expect(yield* Ref.get(yield* Wakes)).toBe(0)
    }).pipe(Effect.provide(WebhookService)))

  it.effect("a webhook for an unknown task, or one not yet submitted upstream, is accepted and left alone", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(NOW)
      const { taskId } = yield* submit({ model: T2I, input: { prompt: "p" } })
      const before = yield* stored(taskId)
      expect(yield* webhook(taskId)).toBe(true)
      expect(yield* webhook("no-such-task")).toBe(true)
      expect(yield* stored(taskId)).toEqual(before)
    }).pipe(Effect.provide(WebhookService)))

  it.effect("for a task a worker holds, it waits for the step's write on this node and then makes the task due now", () =>
    Effect.gen(function*() {
      const task = yield* submittedTask(true)
      const answer = yield* Effect.fork(webhook(task.id))
      yield* TestClock.adjust(0)
      expect(Option.isNone(yield* Fiber.poll(answer))).toBe(true)
      // The step's write gives the lease up and puts the next poll at the safety net's time.
      const writes = yield* TaskWrites.TaskWrites
      yield* writes.reschedule(task, NOW + 30_000)
      // Woken by the write itself: no time passes.
      yield* TestClock.adjust(0)
      expect(yield* Fiber.poll(answer)).toEqual(Option.some(Exit.succeed(true)))
      const after = yield* stored(task.id)
      expect([after.dueAt, after.leaseOwner]).toEqual([NOW, null])
      expect(yield* Ref.get(yield* Wakes)).toBe(1)
    }).pipe(Effect.provide(WebhookService)))

  it.effect("a worker on another node, whose write is not published here, is seen at the re-read every webhookWatch.every ms", () =>
    Effect.gen(function*() {
      const task = yield* submittedTask(true)
      const answer = yield* Effect.fork(webhook(task.id))
      yield* TestClock.adjust(0)
      // The other node's step gives the lease up: written to the store only.
      const tasks = yield* StoredTasks
      tasks.set(task.id, new Task.TaskRecord({ ...task, leaseOwner: null, leaseUntil: null, version: task.version + 1 }))
      yield* TestClock.adjust(webhookWatch.every - 1)
      expect(Option.isNone(yield* Fiber.poll(answer))).toBe(true)
      yield* TestClock.adjust(1)
      expect(yield* Fiber.poll(answer)).toEqual(Option.some(Exit.succeed(true)))
      expect((yield* stored(task.id)).dueAt).toBe(NOW + webhookWatch.every)
    }).pipe(Effect.provide(WebhookService)))

  it.effect("a step that keeps the task past webhookWatch.limit ms is left to its own write; the engine is woken", () =>
    Effect.gen(function*() {
      const task = yield* submittedTask(true)
      const answer = yield* Effect.fork(webhook(task.id))
      yield* TestClock.adjust(webhookWatch.limit - 1)
      expect(Option.isNone(yield* Fiber.poll(answer))).toBe(true)
      yield* TestClock.adjust(1)
      expect(yield* Fiber.poll(answer)).toEqual(Option.some(Exit.succeed(true)))
      expect(yield* stored(task.id)).toEqual(task)
      expect(yield* Ref.get(yield* Wakes)).toBe(1)
    }).pipe(Effect.provide(WebhookService)))
})
