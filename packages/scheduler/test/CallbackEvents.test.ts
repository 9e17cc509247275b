/**
 * Callback events (`callBackEvents`, docs/decisions.md "Callback events"): which callbacks
 * the write path owes, and how the deliverer sends them, against a real receiver on loopback
 * verified with the `standardwebhooks` library, times driven by the TestClock. Run on the
 * memory store and on SQLite, so the columns of migration 0019 are read back too.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Ids, Ledger, Task, TaskChanges, TaskStore, TaskWrites } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { NodeOutbound, NodeResolver } from "@mediagate/media"
import { MemoryAccounts, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlTaskStore } from "@mediagate/store-sql"
import { Effect, Either, Layer, Option, Redacted, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Webhook } from "standardwebhooks"
import { Deliverer, verifyCallbackEvent, Webhooks } from "../src/index.js"

const secret = Webhooks.secretFromHex("00112233445566778899aabbccddeeff0011223344556677")

type Received = { readonly path: string; readonly headers: Http.IncomingHttpHeaders; readonly body: string }
const received: Array<Received> = []
/** Paths whose requests are held unanswered until the test ends: a receiver that hangs. */
const hanging = new Set<string>()
const held: Array<Http.ServerResponse> = []
let base = ""
const server = Http.createServer((request, response) => {
  let body = ""
  request.on("data", (chunk) => (body += chunk))
  request.on("end", () => {
    const path = request.url ?? "/"
    received.push({ path, headers: request.headers, body })
    const event = (JSON.parse(body) as { event?: string }).event
    if (hanging.has(path) && event !== "completed") return void held.push(response)
    response.writeHead(204).end()
  })
})
beforeAll(() =>
  new Promise<void>((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      resolve()
    })
  ))
afterAll(() => {
  server.closeAllConnections()
  return new Promise<void>((resolve) => server.close(() => resolve()))
})

const accounts = MemoryAccounts.layer([{ id: "acct_test", name: "t", apiKey: Redacted.make("k"), webhookSecret: Redacted.make(secret) }])
const outbound = NodeOutbound.layer({ allowPrivate: true }).pipe(Layer.provide(NodeResolver.layer))

/** The deliverer and the write path on `store`, with a periodic scan an hour away: only wake-ups send. */
const composition = (store: Layer.Layer<TaskStore.TaskStore, unknown>) =>
  Layer.mergeAll(Deliverer.layer({ pollInterval: "1 hour", jitter: 0 }), Ids.layerTest).pipe(
    Layer.provideMerge(store),
    Layer.provide(accounts),
    Layer.provide(outbound)
  )

const sqliteStore = Layer.unwrapScoped(
  Effect.gen(function*() {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "mediagate-events-"))),
      (path) => Effect.sync(() => rmSync(path, { recursive: true, force: true }))
    )
    return SqlTaskStore.layer.pipe(Layer.provide(Database.layerSqlite(join(dir, "events.db"))))
  })
)

const at = (path: string) => received.filter((r) => r.path === path)
const bodies = (path: string) => at(path).map((r) => JSON.parse(r.body) as { event?: string; data: Task.Task })
const verified = (request: Received) => {
  const timestamp = Number(request.headers["webhook-timestamp"])
  return request.headers["webhook-signature"] === new Webhook(secret).sign(String(request.headers["webhook-id"]), new Date(timestamp * 1000), request.body)
}

const progress = (percent: number, updatedAt: number): Task.TaskProgress => ({
  stage: "running", queuePosition: null, percent, logsTail: [], updatedAt
})

/** A PENDING task of the test account asking for `events`, sent to `path`. */
const pending = (id: string, path: string, events: ReadonlyArray<Task.CallbackEvent> | null) =>
  Testing.record({
    id: `0190c8a4-0000-7000-8000-${id.padStart(12, "0")}`,
    callBackUrl: `${base}${path}`,
    callbackEvents: events === null ? null : { events, lastProgress: null }
  })

describe("callback events: what a write owes", () => {
  it("without callBackEvents only the terminal callback; with them started once, progress throttled with a trailing one", () => {
    const task = pending("1", "/x", ["started", "progress", "completed"])
    const running = new Task.TaskRecord({ ...task, status: "PROCESSING", updatedAt: 1_000 }, true)
    expect(TaskWrites.eventsOwed(task, running)).toEqual([{ event: "started", at: 1_000, dueAt: 1_000 }])
    expect(TaskWrites.eventsOwed(running, running)).toEqual([])
    const withProgress = (record: Task.TaskRecord, percent: number, now: number, last: { id: string; dueAt: number } | null) =>
      new Task.TaskRecord({
        ...record,
        progress: progress(percent, now),
        callbackEvents: { events: record.callbackEvents!.events, lastProgress: last }
      }, true)
    // The first change: due at once.
    expect(TaskWrites.eventsOwed(running, withProgress(running, 10, 1_500, null))).toEqual([{ event: "progress", at: 1_500, dueAt: 1_500 }])
    // 500 ms after one owed at 1,500: due at the interval's end (3,500), not dropped.
    const owedAt1500 = withProgress(running, 10, 1_500, { id: "a", dueAt: 1_500 })
    expect(TaskWrites.eventsOwed(owedAt1500, withProgress(owedAt1500, 20, 2_000, { id: "a", dueAt: 1_500 })))
      .toEqual([{ event: "progress", at: 2_000, dueAt: 3_500 }])
    // One is already due later: it will carry this change too.
    const owedLater = withProgress(running, 20, 2_000, { id: "b", dueAt: 3_500 })
    expect(TaskWrites.eventsOwed(owedLater, withProgress(owedLater, 30, 2_600, { id: "b", dueAt: 3_500 }))).toEqual([])
    // The interval over: at once again.
    expect(TaskWrites.eventsOwed(owedAt1500, withProgress(owedAt1500, 40, 3_600, { id: "a", dueAt: 1_500 })))
      .toEqual([{ event: "progress", at: 3_600, dueAt: 3_600 }])
    // Events not asked for, no callBackUrl, or a terminal write: none.
    const startedOnly = pending("2", "/x", ["started", "completed"])
    expect(TaskWrites.eventsOwed(startedOnly, new Task.TaskRecord({ ...startedOnly, status: "SUBMITTED", progress: progress(1, 5) }, true)))
      .toEqual([{ event: "started", at: 0, dueAt: 0 }])
    const spec = pending("3", "/x", null)
    expect(TaskWrites.eventsOwed(spec, new Task.TaskRecord({ ...spec, status: "PROCESSING", progress: progress(1, 5) }, true))).toEqual([])
    const ended = new Task.TaskRecord({ ...running, status: "SUCCESS", progress: progress(100, 9) }, true)
    expect(TaskWrites.eventsOwed(running, ended)).toEqual([])
  })
})

for (const [name, store] of [["memory", MemoryTaskStore.layer], ["sqlite", sqliteStore]] as const) {
  describe(`callback events on the ${name} store`, () => {
    it.effect("started, progress and completed reach the receiver, each signed, with its event; a throttled change is sent at the interval's end", () =>
      Effect.gen(function*() {
        const path = `/all-${name}`
        const writes = yield* TaskWrites.make.pipe(Effect.provide([Ledger.layerUnbilled, TaskChanges.layer]))
        const store = yield* TaskStore.TaskStore
        const task = pending(`1${name.length}`, path, ["started", "progress", "completed"])
        yield* store.create(task)
        const running = yield* writes.apply(task, { to: "PROCESSING", dueAt: 0 }, 0, { progress: progress(10, 0) })
        yield* Testing.until(store.callbacks(task.id), (all) => all.length === 2 && all.every((c) => c.status === "delivered"))
        expect(bodies(path).map((b) => b.event).sort()).toEqual(["progress", "started"])
        // 600 ms later: throttled, owed at 2,000 ms, not sent before.
        yield* TestClock.setTime(600)
        const later = yield* writes.reschedule(running, 600, { progress: progress(40, 600) })
        // Listed by the time of their event (started and the first progress at 0, in either order).
        const owed = yield* store.callbacks(task.id)
        expect(owed.map((c) => [c.event, c.status, c.nextAttemptAt])).toEqual([
          ...owed[0]!.event === "started" ? [["started", "delivered", null], ["progress", "delivered", null]] : [["progress", "delivered", null], ["started", "delivered", null]],
          ["progress", "pending", 2_000]
        ])
        // Another change within the interval owes nothing more: the one due at 2,000 carries it.
        yield* TestClock.setTime(900)
        const latest = yield* writes.reschedule(later, 900, { progress: progress(55, 900) })
        expect((yield* store.callbacks(task.id)).length).toBe(3)
        yield* TestClock.setTime(2_000)
        yield* writes.apply(latest, { to: "SUCCESS", result: { type: "image", urls: ["https://cdn.example/a.png"] } }, 2_000)
        yield* Testing.until(Effect.sync(() => bodies(path).some((b) => b.event === "completed")), (done) => done)
        const sent = bodies(path)
        expect(at(path).every(verified)).toBe(true)
        // A receiver's check answers each one's event beside its task; a changed event is refused.
        for (const request of at(path)) {
          const now = Number(request.headers["webhook-timestamp"]) * 1000
          const checked = verifyCallbackEvent(secret, request.headers, request.body, { now })
          expect(Either.getOrThrow(checked)).toEqual({ event: JSON.parse(request.body).event, task: JSON.parse(request.body).data })
          const forged = request.body.replace(/"event":"(started|progress)"/, `"event":"completed"`)
          if (forged !== request.body) expect(Either.isLeft(verifyCallbackEvent(secret, request.headers, forged, { now }))).toBe(true)
        }
        expect(new Set(at(path).map((r) => r.headers["webhook-id"])).size).toBe(at(path).length)
        expect(sent[0]).toMatchObject({ event: "started" })
        expect(sent.find((b) => b.event === "progress")!.data.progress).toMatchObject({ stage: "running", percent: 10 })
        const completed = sent.find((b) => b.event === "completed")!
        const stored = yield* store.get(task.id)
        expect(stored._tag === "Some" && completed).toEqual({ code: 0, msg: "ok", event: "completed", data: Task.toWire(Option.getOrThrow(stored)) })
        // The trailing progress callback came due with the end: not sent after it, its reason recorded.
        yield* Testing.until(store.callbacks(task.id), (all) => all.every((c) => c.status !== "pending"))
        const all = yield* store.callbacks(task.id)
        expect(all.map((c) => [c.event, c.status]).slice(2)).toEqual([["progress", "failed"], ["completed", "delivered"]])
        const [skipped] = yield* store.callbackAttempts(all[2]!.id)
        expect(skipped).toMatchObject({ status: null, error: expect.stringMatching(/^not sent: the task ended \(SUCCESS\)/), outcome: { _tag: "GaveUp" } })
        expect(bodies(path).filter((b) => b.event === "progress").length).toBe(1)
        // A redeliver sends the terminal callback again, never the events.
        expect(yield* store.redeliverCallbacks(task.id, 3_000)).toBe(1)
      }).pipe(Effect.provide(composition(store)), Effect.scoped))

    it.effect("without callBackEvents: one callback at the end, the spec's body with no event", () =>
      Effect.gen(function*() {
        const path = `/spec-${name}`
        const writes = yield* TaskWrites.make.pipe(Effect.provide([Ledger.layerUnbilled, TaskChanges.layer]))
        const store = yield* TaskStore.TaskStore
        const task = pending(`2${name.length}`, path, null)
        yield* store.create(task)
        const running = yield* writes.apply(task, { to: "PROCESSING", dueAt: 0 }, 0, { progress: progress(10, 0) })
        const ended = yield* writes.apply(running, { to: "FAILURE", reason: null, message: "x" }, 0)
        yield* Testing.until(Effect.sync(() => at(path).length), (n) => n === 1)
        expect(JSON.parse(at(path)[0]!.body)).toEqual({ code: 0, msg: "ok", data: Task.toWire(ended) })
        const now = Number(at(path)[0]!.headers["webhook-timestamp"]) * 1000
        expect(Either.getOrThrow(verifyCallbackEvent(secret, at(path)[0]!.headers, at(path)[0]!.body, { now })).event).toBeNull()
        expect((yield* store.callbacks(task.id)).map((c) => c.event)).toEqual([undefined])
      }).pipe(Effect.provide(composition(store)), Effect.scoped))

    it.effect("a receiver that hangs on the events does not delay the terminal callback", () =>
      Effect.gen(function*() {
        const path = `/hangs-${name}`
        hanging.add(path)
        const writes = yield* TaskWrites.make.pipe(Effect.provide([Ledger.layerUnbilled, TaskChanges.layer]))
        const store = yield* TaskStore.TaskStore
        const task = pending(`3${name.length}`, path, ["started", "progress", "completed"])
        yield* store.create(task)
        const running = yield* writes.apply(task, { to: "PROCESSING", dueAt: 0 }, 0, { progress: progress(10, 0) })
        yield* Testing.until(Effect.sync(() => at(path).length), (n) => n === 2)
        // Both held open by the receiver; the task ends meanwhile.
        yield* writes.apply(running, { to: "SUCCESS", result: { type: "image", urls: ["https://cdn.example/a.png"] } }, 0)
        const all = yield* Testing.until(store.callbacks(task.id), (all) => all.find((c) => c.event === "completed")?.status === "delivered")
        expect(bodies(path).map((b) => b.event)).toEqual(expect.arrayContaining(["started", "progress", "completed"]))
        expect(all.filter((c) => c.event !== "completed").map((c) => c.status)).toEqual(["pending", "pending"])
      }).pipe(Effect.provide(composition(store)), Effect.scoped))
  })
}
