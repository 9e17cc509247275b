/**
 * Idempotency-Key on POST /api/v1/task/submit (additive; draft-ietf-httpapi-idempotency-key-header),
 * over HTTP with the TestClock: the same key and body answer the same task with one credit
 * reservation; another body is 422; a duplicate while the first request runs is 409; keys
 * are per account, expire after 24 hours, survive a restart on SQLite, and a crash between
 * the task and its key never leaves the key pointing at nothing.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import {
  IdempotencyKeys,
  Ids,
  ModelCatalog,
  Moderation,
  TaskChanges,
  TaskEvents,
  TaskService,
  TaskServiceAlone,
  TaskStore,
  TaskWrites
} from "@mediagate/core"
import { MediagateHttp } from "@mediagate/http"
import { MemoryAccounts, MemoryLedger, MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlIdempotencyKeys, SqlTaskStore } from "@mediagate/store-sql"
import { Deferred, Effect, Fiber, Layer, Redacted, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Submitted } from "./support.js"
import { apiKey, client, memoryAdmin, otherApiKey, Raw, testServer } from "./support.js"

const api = client()

const body = (prompt: string) => JSON.stringify({ model: "dream-4", input: { prompt } })

/** A submit of `text` as it is (the same JSON can be written two ways), with an Idempotency-Key when given. */
const submit = (text: string, idempotencyKey?: string, key?: string) =>
  api.call<Submitted>("POST", "/api/v1/task/submit", { body: new Raw(text), key, headers: idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey } })

const account = (key?: string) => Effect.map(api.call("GET", "/api/v1/account", { key }), (answer) => answer.body.data)
const tasks = (key?: string) =>
  Effect.map(api.call("GET", "/api/v1/tasks?limit=100", { key }), (answer) => answer.body.data.tasks.map((task: any) => task.taskId))

// ---------------------------------------------------------------------------
// Compositions of our own: a moderation that holds a request, stores that die, SQLite.

const accounts = MemoryAccounts.layer([
  { id: "acct_a", name: "a", apiKey: Redacted.make(apiKey) },
  { id: "acct_b", name: "b", apiKey: Redacted.make(otherApiKey) }
])

const server = (options: {
  readonly store?: Layer.Layer<TaskStore.TaskStore, unknown>
  readonly keys?: Layer.Layer<IdempotencyKeys.IdempotencyKeys, unknown>
  readonly moderation?: Layer.Layer<Moderation.Moderation>
}) => {
  const ledger = MemoryLedger.layerWithCredits([{ accountId: "acct_a", amount: 1_000_000_000 }])
  return MediagateHttp.serve.pipe(
    // The admin API's services in memory, on the same store and ids (layers are memoised by reference).
    Layer.provide(memoryAdmin.pipe(Layer.provide([options.store ?? MemoryTaskStore.layer, Ids.layerTest]))),
    Layer.provide(
      Layer.mergeAll(
        TaskService.Default.pipe(
          Layer.provide(TaskWrites.layer),
          Layer.provide([TaskChanges.layer, TaskEvents.TaskWakeup.layerNone, TaskEvents.CallbackWakeup.layerNone, TaskServiceAlone.noUpstream]),
          Layer.provide([
            options.store ?? MemoryTaskStore.layer,
            options.keys ?? IdempotencyKeys.layerMemory,
            options.moderation ?? Moderation.layerAllowAll,
            ModelCatalog.layer,
            ledger
          ])
        ),
        accounts,
        ledger,
        MemoryMediaStore.layer({ baseUrl: "http://127.0.0.1/media" }),
        ModelCatalog.layer
      ).pipe(Layer.provide(Ids.layerTest))
    ),
    Layer.provideMerge(NodeHttpServer.layerTest)
  )
}

describe("Idempotency-Key on submit", () => {
  it.effect("the same key and body answer the same task, with one task and one reservation; a different body is 422", () =>
    Effect.gen(function*() {
      // A job that never ends: the instant simulator would charge the task before the hold is read (reserved 0).
      const fox = "a fox [sim:timeout]"
      const first = yield* submit(body(fox), "order-1")
      expect(first.status).toBe(200)
      expect(first.headers["idempotent-replayed"]).toBeUndefined()
      const taskId = first.body.data.taskId
      // Key order and spacing do not make another request.
      const again = yield* submit(JSON.stringify({ input: { prompt: fox }, model: "dream-4" }, null, 2), "order-1")
      expect([again.status, again.body]).toEqual([200, first.body])
      expect(again.headers["idempotent-replayed"]).toBe("true")
      expect(yield* tasks()).toEqual([taskId])
      const credits = yield* account()
      expect(credits.entries.filter((entry: any) => entry.kind === "reserve").map((entry: any) => entry.task_id)).toEqual([taskId])
      expect(credits.reserved_micro_usd).toBe(credits.entries.find((entry: any) => entry.kind === "reserve").held_micro_usd)

      const other = yield* submit(body("a wolf"), "order-1")
      expect([other.status, other.body]).toEqual([422, {
        code: 422,
        msg: "Idempotency-Key 'order-1' was already used with a different request body; use a new key for a new request"
      }])
      // Without a key, or with another one, the same body is a new task.
      expect((yield* submit(body(fox))).body.data.taskId).not.toBe(taskId)
      expect((yield* submit(body(fox), "order-2")).body.data.taskId).not.toBe(taskId)
      expect(yield* tasks()).toHaveLength(3)
    }).pipe(Effect.provide(testServer())))

  it.effect("keys are per account: another account's same key and body make its own task", () =>
    Effect.gen(function*() {
      const mine = yield* submit(body("shared"), "same-key")
      const theirs = yield* submit(body("shared"), "same-key", otherApiKey)
      expect(theirs.status).toBe(200)
      expect(theirs.body.data.taskId).not.toBe(mine.body.data.taskId)
      expect((yield* submit(body("shared"), "same-key", otherApiKey)).body.data.taskId).toBe(theirs.body.data.taskId)
      expect(yield* tasks(otherApiKey)).toEqual([theirs.body.data.taskId])
    }).pipe(Effect.provide(testServer())))

  // Without the engine: a day of virtual time is not a day of engine scans.
  it.effect("a key expires 24 hours after its first use: then it makes a new task, whatever the body", () =>
    Effect.gen(function*() {
      const first = (yield* submit(body("day one"), "daily")).body.data.taskId
      yield* TestClock.adjust("23 hours")
      expect((yield* submit(body("day one"), "daily")).body.data.taskId).toBe(first)
      expect((yield* submit(body("day two"), "daily")).status).toBe(422)
      yield* TestClock.adjust("1 hour")
      const next = yield* submit(body("day two"), "daily")
      expect(next.status).toBe(200)
      expect(next.body.data.taskId).not.toBe(first)
      expect((yield* submit(body("day two"), "daily")).body.data.taskId).toBe(next.body.data.taskId)
    }).pipe(Effect.provide(server({}))))

  it.effect("a refused request (400) creates nothing and frees its key; bad keys are 400", () =>
    Effect.gen(function*() {
      const refused = yield* submit(JSON.stringify({ model: "dream-4", input: {} }), "retry-me")
      expect(refused.status).toBe(400)
      const fixed = yield* submit(body("fixed"), "retry-me")
      expect(fixed.status).toBe(200)
      for (const bad of ["", "\"\"", "k".repeat(256), "\"unterminated\"quote\""]) {
        const answer = yield* submit(body("x"), bad)
        expect(answer.status).toBe(400)
        expect(answer.body.code).toBe(400)
        expect(answer.body.msg).toMatch(/^Idempotency-Key /)
      }
      expect((yield* submit(body("long"), "k".repeat(255))).status).toBe(200)
      expect((yield* submit(body("quoted"), "\"q-1\"")).body.data.taskId).toBe((yield* submit(body("quoted"), "q-1")).body.data.taskId)
      expect(yield* tasks()).toHaveLength(3)
    }).pipe(Effect.provide(testServer())))
})

describe("Idempotency-Key while the first request runs, and across crashes", () => {
  it.effect("a duplicate while the first request is processed is 409 (422 with another body); afterwards it is answered with the task", () =>
    Effect.gen(function*() {
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holding = Layer.succeed(Moderation.Moderation, {
        check: (prompt) =>
          Effect.zipRight(
            prompt.includes("hold") ? Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(release)) : Effect.void,
            Effect.succeed({ flagged: false, categories: {} })
          )
      })
      return yield* Effect.gen(function*() {
        const first = yield* Effect.fork(submit(body("hold on"), "busy"))
        yield* Deferred.await(entered)
        expect(yield* submit(body("hold on"), "busy")).toMatchObject({
          status: 409,
          body: { code: 409, msg: "a request with Idempotency-Key 'busy' is still being processed; try again in a moment" }
        })
        expect((yield* submit(body("something else"), "busy")).status).toBe(422)
        yield* Deferred.succeed(release, undefined)
        const done = yield* Fiber.join(first)
        expect(done.status).toBe(200)
        expect((yield* submit(body("hold on"), "busy")).body).toEqual(done.body)
        expect(yield* tasks()).toEqual([done.body.data.taskId])
      }).pipe(Effect.provide(server({ moderation: holding })))
    }))

  it.effect("a crash after the task was stored, before the key was bound: after the lease the key answers with that task", () => {
    let dieOnce = true
    const keys = Layer.effect(
      IdempotencyKeys.IdempotencyKeys,
      Effect.map(IdempotencyKeys.makeMemory, (inner) => ({
        ...inner,
        complete: (owner: Ids.AccountId, key: string, taskId: Ids.TaskId) =>
          dieOnce ? Effect.suspend(() => (dieOnce = false, Effect.dieMessage("crash before the key was bound"))) : inner.complete(owner, key, taskId)
      }))
    )
    return Effect.gen(function*() {
      expect((yield* submit(body("crash"), "crashy")).status).toBe(500)
      const [stored] = yield* tasks()
      expect(stored).toBeDefined()
      // Within the lease the reservation may belong to a request still running.
      expect((yield* submit(body("crash"), "crashy")).status).toBe(409)
      yield* TestClock.adjust("61 seconds")
      const answer = yield* submit(body("crash"), "crashy")
      expect([answer.status, answer.body.data.taskId]).toEqual([200, stored])
      expect((yield* submit(body("crash"), "crashy")).body.data.taskId).toBe(stored)
      expect(yield* tasks()).toEqual([stored])
    }).pipe(Effect.provide(server({ keys })))
  })

  it.effect("a crash before the task was stored: after the lease the next request with the key makes the task", () =>
    Effect.gen(function*() {
      let dieOnce = true
      const store = Layer.effect(
        TaskStore.TaskStore,
        Effect.map(MemoryTaskStore.make, (inner) => ({
          ...inner,
          create: (task: Parameters<typeof inner.create>[0], callbacks?: Parameters<typeof inner.create>[1]) =>
            dieOnce ? Effect.suspend(() => (dieOnce = false, Effect.dieMessage("crash before the task was stored"))) : inner.create(task, callbacks)
        }))
      )
      return yield* Effect.gen(function*() {
        expect((yield* submit(body("lost"), "lost-1")).status).toBe(500)
        expect(yield* tasks()).toEqual([])
        yield* TestClock.adjust("61 seconds")
        const answer = yield* submit(body("lost"), "lost-1")
        expect(answer.status).toBe(200)
        expect(yield* tasks()).toEqual([answer.body.data.taskId])
        expect((yield* submit(body("lost"), "lost-1")).body.data.taskId).toBe(answer.body.data.taskId)
      }).pipe(Effect.provide(server({ store })))
    }))
})

describe("Idempotency-Key on SQLite", () => {
  const dir = mkdtempSync(join(tmpdir(), "mediagate-idempotency-"))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it.effect("a key outlives a restart: the reopened database answers with the same task", () =>
    Effect.gen(function*() {
      const file = join(dir, "restart.db")
      // The store keeps its client's connection to itself: the keys get a client of their own.
      const sqlite = () => ({
        store: SqlTaskStore.layer.pipe(Layer.provide(Database.layerSqlite(file))),
        keys: SqlIdempotencyKeys.layer.pipe(Layer.provide(Database.layerSqlite(file)))
      })
      const first = yield* submit(body("durable"), "restart-1").pipe(Effect.provide(server(sqlite())))
      expect(first.status).toBe(200)
      const again = yield* Effect.gen(function*() {
        const replay = yield* submit(body("durable"), "restart-1")
        const mismatch = yield* submit(body("changed"), "restart-1")
        return { replay, mismatch, listed: yield* tasks() }
      }).pipe(Effect.provide(server(sqlite())))
      expect([again.replay.status, again.replay.body]).toEqual([200, first.body])
      expect(again.mismatch.status).toBe(422)
      expect(again.listed).toEqual([first.body.data.taskId])
    }))
})
