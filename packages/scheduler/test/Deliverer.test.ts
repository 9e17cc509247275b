/**
 * The callback deliverer against a real receiver on loopback, verified with the
 * `standardwebhooks` library, retries timed by the TestClock.
 */
import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Accounts, Ids, Ledger, Outbound, Task, TaskChanges, TaskEvents, TaskStore, TaskWrites } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { NodeOutbound, NodeResolver } from "@mediagate/media"
import { MemoryAccounts, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlTaskStore } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { Clock, Context, Effect, Layer, Logger, Redacted, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Webhook } from "standardwebhooks"
import { Deliverer, Webhooks } from "../src/index.js"

const secret = Webhooks.secretFromHex("00112233445566778899aabbccddeeff0011223344556677")

type Received = { readonly path: string; readonly headers: Http.IncomingHttpHeaders; readonly body: string }
const received: Array<Received> = []
/** What the receiver answers, per path: a list of statuses used in turn (the last one repeats). */
const script = new Map<string, Array<number>>()
/** Headers the receiver adds to its answers, per path. */
const answerHeaders = new Map<string, Record<string, string>>()
let base = ""
const server = Http.createServer((request, response) => {
  let body = ""
  request.on("data", (chunk) => (body += chunk))
  request.on("end", () => {
    const path = request.url ?? "/"
    received.push({ path, headers: request.headers, body })
    const statuses = script.get(path) ?? [204]
    const status = statuses.length > 1 ? statuses.shift()! : statuses[0]!
    if (status === 0) return // never answer
    response.writeHead(status, { ...(status === 302 ? { location: `${elsewhereBase}/stolen` } : {}), ...answerHeaders.get(path) })
    response.end()
  })
})
/** A second receiver, where redirects point: it must never be reached. */
const elsewhere: Array<string> = []
let elsewhereBase = ""
const elsewhereServer = Http.createServer((request, response) => {
  elsewhere.push(request.url ?? "/")
  response.writeHead(204).end()
})
const listen = (target: Http.Server) =>
  new Promise<string>((resolve) =>
    target.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(target.address() as AddressInfo).port}`)))
const close = (target: Http.Server) => {
  target.closeAllConnections()
  return new Promise<void>((resolve) => target.close(() => resolve()))
}
beforeAll(async () => {
  base = await listen(server)
  elsewhereBase = await listen(elsewhereServer)
})
afterAll(async () => {
  await close(server)
  await close(elsewhereServer)
})

/** Loopback receivers need private addresses allowed; the address tests bring their own. */
const loopbackOutbound = NodeOutbound.layer({ allowPrivate: true }).pipe(Layer.provide(NodeResolver.layer))

const accountsLayer = MemoryAccounts.layer([{ id: "acct_test", name: "t", apiKey: Redacted.make("k"), webhookSecret: Redacted.make(secret) }])

const deliverer = (options: Deliverer.Options = {}, outbound: Layer.Layer<Outbound.Outbound> = loopbackOutbound) =>
  Deliverer.layer(options).pipe(
    Layer.provideMerge(MemoryTaskStore.layer),
    Layer.provide(accountsLayer),
    Layer.provide(outbound),
    // A host's own HTTP client, following redirects as fetch does by default: the deliverer must not use it.
    Layer.provide(FetchHttpClient.layer)
  )

/** A finished task owing one callback to `path` on `origin` (the receiver by default). */
const owe = (path: string, origin?: string) =>
  Effect.gen(function*() {
    const store = yield* TaskStore.TaskStore
    const id = `0190c8a4-0000-7000-8000-${String(received.length + script.size).padStart(12, "0")}${path.length}`
    const task = Testing.record({
      id,
      status: "SUCCESS",
      dueAt: null,
      result: { type: "image", urls: ["https://cdn.example/a.png"] },
      callBackUrl: `${origin ?? base}${path}`
    })
    const callback = { id: `msg_${path.slice(1)}`, taskId: task.id, url: task.callBackUrl!, createdAt: 0 }
    yield* store.create(task, [callback])
    return { task, callback }
  })

const attemptsOf = (id: string) => Effect.flatMap(TaskStore.TaskStore, (store) => store.callbackAttempts(id))

describe("Deliverer", () => {
  it.effect("is woken by the write path: a callback owed now is sent without waiting for the next scan", () =>
    Effect.gen(function*() {
      // The periodic scan is an hour away and the TestClock never moves: only the wake-up can send it.
      const writes = yield* TaskWrites.make.pipe(Effect.provide([Ledger.layerUnbilled, TaskChanges.layer]))
      const task = Testing.record({ id: "0190c8a4-0000-7000-8000-00000000wake", callBackUrl: `${base}/woken` })
      yield* Effect.flatMap(TaskStore.TaskStore, (store) => store.create(task))
      yield* writes.apply(task, { to: "FAILURE", reason: null, message: "x" }, 0)
      yield* Testing.until(Effect.sync(() => received.filter((r) => r.path === "/woken").length), (n) => n === 1)
    }).pipe(
      Effect.provide(Layer.merge(deliverer({ pollInterval: "1 hour" }), Ids.layerTest)),
      Effect.scoped
    ))

  it.effect("delivers the query answer, signed so that standardwebhooks verifies it", () =>
    Effect.gen(function*() {
      const { callback, task } = yield* owe("/ok")
      yield* TestClock.adjust("1 second")
      const [attempt] = yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 1)
      expect(attempt).toMatchObject({ attempt: 1, status: 204, error: null, outcome: { _tag: "Delivered" } })
      const request = received.find((r) => r.path === "/ok")!
      expect(JSON.parse(request.body)).toEqual({ code: 0, msg: "ok", data: Task.toWire(task) })
      expect(request.headers["webhook-id"]).toBe(callback.id)
      expect(request.headers["content-type"]).toBe("application/json")
      expect(request.headers["user-agent"]).toMatch(/^mediagate-webhooks\//)
      // Standard Webhooks and HTTP, nothing else: no tracer (b3, traceparent), no browser headers.
      expect(Object.keys(request.headers).sort()).toEqual([
        "content-length", "content-type", "host", "user-agent", "webhook-id", "webhook-signature", "webhook-timestamp"
      ])
      // The library's own signer is the reference: same id, timestamp and body, same signature.
      // (Its verify() also checks the timestamp against the wall clock; ours comes from the TestClock.)
      const timestamp = Number(request.headers["webhook-timestamp"])
      const webhook = new Webhook(secret)
      expect(request.headers["webhook-signature"]).toBe(webhook.sign(callback.id, new Date(timestamp * 1000), request.body))
      expect(webhook.sign(callback.id, new Date(timestamp * 1000), request.body.replace("SUCCESS", "FAILURE")))
        .not.toBe(request.headers["webhook-signature"])
    }).pipe(Effect.provide(deliverer()), Effect.scoped))

  it.effect("after a rotation callbacks carry both signatures, new secret first, until the grace period ends", () =>
    Effect.gen(function*() {
      const rotated = Webhooks.secretFromHex("ffeeddccbbaa99887766554433221100ffeeddccbbaa9988")
      const admin = yield* Accounts.AccountAdmin
      expect(yield* admin.rotateSecret(Ids.AccountId.make("acct_test"), Redacted.make(rotated), 60_000)).toBe(true)
      const signatureOf = (path: string) =>
        Effect.gen(function*() {
          const { callback } = yield* owe(path)
          yield* TestClock.adjust("1 second")
          yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 1)
          const request = received.find((r) => r.path === path)!
          const timestamp = Number(request.headers["webhook-timestamp"])
          const sign = (key: string) => new Webhook(key).sign(callback.id, new Date(timestamp * 1000), request.body)
          return { header: request.headers["webhook-signature"], sign }
        })
      const during = yield* signatureOf("/rotated")
      expect(during.header).toBe(`${during.sign(rotated)} ${during.sign(secret)}`)
      yield* TestClock.adjust("60 seconds")
      const after = yield* signatureOf("/rotated-later")
      expect(after.header).toBe(after.sign(rotated))
    }).pipe(Effect.provide(Layer.provideMerge(deliverer(), accountsLayer)), Effect.scoped))

  it.effect("a failed attempt is retried after about 5 s with the same webhook-id, then delivered", () =>
    Effect.gen(function*() {
      script.set("/flaky", [500, 200])
      const { callback } = yield* owe("/flaky")
      yield* TestClock.adjust("1 second")
      const first = yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 1)
      expect(first[0]).toMatchObject({ status: 500, error: "HTTP 500", outcome: { _tag: "Retry" } })
      const retryAt = (first[0]!.outcome as { retryAt: number }).retryAt - first[0]!.at
      expect(retryAt).toBeGreaterThanOrEqual(4_500)
      expect(retryAt).toBeLessThanOrEqual(5_500)
      yield* TestClock.adjust("3 seconds")
      expect((yield* attemptsOf(callback.id)).length).toBe(1)
      yield* TestClock.adjust("4 seconds")
      const both = yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 2)
      expect(both[1]).toMatchObject({ attempt: 2, status: 200, outcome: { _tag: "Delivered" } })
      const ids = received.filter((r) => r.path === "/flaky").map((r) => r.headers["webhook-id"])
      expect(ids).toEqual([callback.id, callback.id])
    }).pipe(Effect.provide(deliverer()), Effect.scoped))

  it.effect("each failed attempt is logged as a warning naming the task, the callback, the attempt and the status", () => {
    const logs: Array<{ level: string; message: unknown; annotations: Record<string, unknown> }> = []
    const capture = Logger.replace(
      Logger.defaultLogger,
      Logger.make(({ annotations, logLevel, message }) =>
        void logs.push({ level: logLevel.label, message: Array.isArray(message) ? message[0] : message, annotations: Object.fromEntries(annotations) }))
    )
    return Effect.gen(function*() {
      script.set("/logged", [500, 204])
      const { callback, task } = yield* owe("/logged")
      yield* TestClock.adjust("1 second")
      yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 1)
      const warnings = logs.filter((line) => line.level === "WARN" && line.annotations["callbackId"] === callback.id)
      expect(warnings).toEqual([{
        level: "WARN",
        message: `deliverer: callback attempt 1 of task ${task.id} failed: HTTP 500`,
        annotations: { taskId: task.id, callbackId: callback.id, attempt: 1, status: 500, error: "HTTP 500", outcome: "retry" }
      }])
      // The secret and the URL are not in any line.
      expect(JSON.stringify(logs)).not.toContain(secret)
      expect(JSON.stringify(logs)).not.toContain("/logged")
      yield* TestClock.adjust("10 seconds")
      yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 2)
      // The delivered attempt is no warning.
      expect(logs.filter((line) => line.level === "WARN" && line.annotations["callbackId"] === callback.id)).toHaveLength(1)
    }).pipe(Effect.provide(deliverer()), Effect.scoped, Effect.provide(capture))
  })

  it.effect("a redirect is not followed, whatever HTTP client the host provides: it counts as a failed attempt", () =>
    Effect.gen(function*() {
      script.set("/moved", [302])
      const { callback } = yield* owe("/moved")
      yield* TestClock.adjust("1 second")
      const [attempt] = yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 1)
      expect(attempt).toMatchObject({ status: 302, error: "HTTP 302", outcome: { _tag: "Retry" } })
      expect(elsewhere).toEqual([])
    }).pipe(Effect.provide(deliverer()), Effect.scoped))

  it.effect("a callback host resolving to a public and a private address is not called; the attempt says why and is retried", () => {
    const calls: Array<string> = []
    const resolver = Layer.succeed(Outbound.Resolver, {
      resolve: (hostname) => Effect.sync(() => (calls.push(hostname), ["192.0.78.9", "127.0.0.1"]))
    })
    return Effect.gen(function*() {
      const port = new URL(base).port
      const { callback } = yield* owe("/rebound", `http://hooks.example.test:${port}`)
      yield* TestClock.adjust("1 second")
      const [attempt] = yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 1)
      expect(attempt).toMatchObject({
        attempt: 1,
        status: null,
        error: "hooks.example.test does not resolve to a public address",
        outcome: { _tag: "Retry" }
      })
      expect(calls).toEqual(["hooks.example.test"])
      expect(received.some((r) => r.path === "/rebound")).toBe(false)
    }).pipe(Effect.provide(deliverer({}, NodeOutbound.layer().pipe(Layer.provide(resolver)))), Effect.scoped)
  })

  it.effect("after the last attempt of the schedule it gives up, every attempt recorded", () =>
    Effect.gen(function*() {
      script.set("/down", [503])
      const { callback } = yield* owe("/down")
      for (let i = 0; i < 3; i++) {
        yield* TestClock.adjust("1 second")
        yield* Testing.until(attemptsOf(callback.id), (a) => a.length >= i + 1)
      }
      const attempts = yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 3)
      expect(attempts.map((a) => [a.attempt, a.status, a.outcome._tag])).toEqual([[1, 503, "Retry"], [2, 503, "Retry"], [3, 503, "GaveUp"]])
      // Far beyond the 1 s schedule. Not hours: each TestClock wake-up of the 1 s poll costs a real
      // timer turn, and 3,600 of them made this test take 13 s.
      yield* TestClock.adjust("1 minute")
      expect((yield* attemptsOf(callback.id)).length).toBe(3)
    }).pipe(Effect.provide(deliverer({ schedule: ["0 millis", "1 second", "1 second"], jitter: 0 })), Effect.scoped))

  it.effect("410 Gone stops at once: one attempt, recorded as given up, never retried", () =>
    Effect.gen(function*() {
      script.set("/gone", [410, 204])
      const { callback } = yield* owe("/gone")
      yield* TestClock.adjust("1 second")
      const [attempt] = yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 1)
      expect(attempt).toMatchObject({ attempt: 1, status: 410, error: "HTTP 410 Gone: not retried", outcome: { _tag: "GaveUp" } })
      // The schedule's next attempt would come after about 5 s.
      yield* TestClock.adjust("1 minute")
      expect(yield* attemptsOf(callback.id)).toHaveLength(1)
      expect(received.filter((r) => r.path === "/gone")).toHaveLength(1)
    }).pipe(Effect.provide(deliverer()), Effect.scoped))

  it.effect("429 with Retry-After: 120 waits 120 s, not the schedule's 5 s; a 503's HTTP date is honoured too", () =>
    Effect.gen(function*() {
      script.set("/busy", [429, 204])
      answerHeaders.set("/busy", { "retry-after": "120" })
      const { callback } = yield* owe("/busy")
      yield* TestClock.adjust("1 second")
      const [first] = yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 1)
      expect(first).toMatchObject({ attempt: 1, status: 429, error: "HTTP 429, Retry-After 120 s", outcome: { _tag: "Retry" } })
      expect((first!.outcome as { retryAt: number }).retryAt - first!.at).toBe(120_000)
      yield* TestClock.adjust("60 seconds")
      yield* TestClock.adjust("58 seconds")
      expect(yield* attemptsOf(callback.id)).toHaveLength(1)
      expect(received.filter((r) => r.path === "/busy")).toHaveLength(1)
      yield* TestClock.adjust("2 seconds")
      const both = yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 2)
      expect(both[1]).toMatchObject({ attempt: 2, status: 204, outcome: { _tag: "Delivered" } })
      expect(both[1]!.at - first!.at).toBeGreaterThanOrEqual(120_000)

      // An HTTP date 10 minutes from the test clock's now.
      script.set("/maintenance", [503, 204])
      answerHeaders.set("/maintenance", { "retry-after": new Date((yield* Clock.currentTimeMillis) + 600_000).toUTCString() })
      const later = yield* owe("/maintenance")
      yield* TestClock.adjust("1 second")
      const [unavailable] = yield* Testing.until(attemptsOf(later.callback.id), (a) => a.length === 1)
      expect(unavailable).toMatchObject({ status: 503, outcome: { _tag: "Retry" } })
      const wait = (unavailable!.outcome as { retryAt: number }).retryAt - unavailable!.at
      expect(wait).toBeGreaterThan(598_000)
      expect(wait).toBeLessThanOrEqual(600_000)
    }).pipe(Effect.provide(deliverer()), Effect.scoped))

  it.effect("a redeliver starts a new round: same webhook-id, a valid signature, numbering carried on, the schedule from its start", () =>
    Effect.gen(function*() {
      script.set("/again", [503])
      const { callback, task } = yield* owe("/again")
      for (let i = 0; i < 3; i++) {
        yield* TestClock.adjust("1 second")
        yield* Testing.until(attemptsOf(callback.id), (a) => a.length >= i + 1)
      }
      expect((yield* attemptsOf(callback.id)).map((a) => a.outcome._tag)).toEqual(["Retry", "Retry", "GaveUp"])
      // The receiver is fixed, but fails once more: the new round retries on its own schedule.
      script.set("/again", [500, 204])
      const store = yield* TaskStore.TaskStore
      expect(yield* store.redeliverCallbacks(task.id, yield* Clock.currentTimeMillis)).toBe(1)
      yield* Effect.flatMap(TaskEvents.CallbackWakeup, (deliverer) => deliverer.wake)
      const fourth = yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 4)
      expect(fourth[3]).toMatchObject({ attempt: 4, status: 500, outcome: { _tag: "Retry" } })
      yield* TestClock.adjust("1 second")
      const all = yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 5)
      expect(all.map((a) => [a.attempt, a.status, a.outcome._tag])).toEqual([
        [1, 503, "Retry"], [2, 503, "Retry"], [3, 503, "GaveUp"], [4, 500, "Retry"], [5, 204, "Delivered"]
      ])
      expect((yield* store.callbacks(task.id)).map((c) => c.status)).toEqual(["delivered"])
      const requests = received.filter((r) => r.path === "/again")
      expect(requests.map((r) => r.headers["webhook-id"])).toEqual(Array(5).fill(callback.id))
      const last = requests[4]!
      const timestamp = Number(last.headers["webhook-timestamp"])
      expect(last.headers["webhook-signature"]).toBe(new Webhook(secret).sign(callback.id, new Date(timestamp * 1000), last.body))
      expect(JSON.parse(last.body)).toEqual({ code: 0, msg: "ok", data: Task.toWire(task) })
    }).pipe(Effect.provide(deliverer({ schedule: ["0 millis", "1 second", "1 second"], jitter: 0 })), Effect.scoped))

  it("Retry-After: delay-seconds or an HTTP date; the longer of it and the schedule, at most 24 h; 410 gives up", () => {
    const now = Date.UTC(2030, 0, 1, 12, 0, 0)
    expect(Deliverer.retryAfterMillis("120", now)).toBe(120_000)
    expect(Deliverer.retryAfterMillis(" 0 ", now)).toBe(0)
    expect(Deliverer.retryAfterMillis(new Date(now + 90_000).toUTCString(), now)).toBe(90_000)
    expect(Deliverer.retryAfterMillis(new Date(now - 90_000).toUTCString(), now)).toBe(0)
    expect(Deliverer.retryAfterMillis("soon", now)).toBeUndefined()
    expect(Deliverer.retryAfterMillis("-5", now)).toBeUndefined()
    expect(Deliverer.retryAfterMillis("1.5", now)).toBeUndefined()
    const day = 86_400_000
    expect(Deliverer.outcome({ status: 429, retryAfterMs: 120_000 }, now, 5_000)).toEqual({ _tag: "Retry", retryAt: now + 120_000 })
    expect(Deliverer.outcome({ status: 503, retryAfterMs: 1_000 }, now, 300_000)).toEqual({ _tag: "Retry", retryAt: now + 300_000 })
    expect(Deliverer.outcome({ status: 429, retryAfterMs: 3 * day }, now, 5_000)).toEqual({ _tag: "Retry", retryAt: now + day })
    expect(Deliverer.outcome({ status: 429, retryAfterMs: 3 * day }, now, 5_000, { maxRetryAfter: "1 hour" })).toEqual({ _tag: "Retry", retryAt: now + 3_600_000 })
    expect(Deliverer.outcome({ status: 429 }, now, 5_000)).toEqual({ _tag: "Retry", retryAt: now + 5_000 })
    // The schedule decides how many attempts: a Retry-After on the last one does not add another.
    expect(Deliverer.outcome({ status: 429, retryAfterMs: 1_000 }, now, undefined)).toEqual({ _tag: "GaveUp" })
    expect(Deliverer.outcome({ status: 410 }, now, 5_000)).toEqual({ _tag: "GaveUp" })
    expect(Deliverer.outcome({ status: 204 }, now, undefined)).toEqual({ _tag: "Delivered" })
    expect(Deliverer.outcome(null, now, 5_000)).toEqual({ _tag: "Retry", retryAt: now + 5_000 })
  })

  it.effect("a receiver that never answers is given up on after 15 s, and retried", () =>
    Effect.gen(function*() {
      script.set("/silent", [0])
      const { callback } = yield* owe("/silent")
      yield* TestClock.adjust("1 second")
      yield* Testing.until(Effect.succeed(received.filter((r) => r.path === "/silent").length), (n) => n === 1)
      yield* TestClock.adjust("15 seconds")
      const [attempt] = yield* Testing.until(attemptsOf(callback.id), (a) => a.length === 1)
      expect(attempt).toMatchObject({ status: null, error: "no answer within 15s", outcome: { _tag: "Retry" } })
    }).pipe(Effect.provide(deliverer()), Effect.scoped))
})

/** One store shared by two deliverers ("nodes"), on every backend. */
const sqliteDir = mkdtempSync(join(tmpdir(), "mediagate-deliverer-"))
afterAll(() => rmSync(sqliteDir, { recursive: true, force: true }))
let sqliteFiles = 0
const backends: ReadonlyArray<readonly [string, () => Layer.Layer<TaskStore.TaskStore, unknown>]> = [
  ["memory", () => MemoryTaskStore.layer],
  ["sqlite", () => SqlTaskStore.layer.pipe(Layer.provide(Database.layerSqlite(join(sqliteDir, `d${++sqliteFiles}.db`))))],
  ...(pgUrl === undefined ? [] : [[
    "postgres",
    () =>
      SqlTaskStore.layer.pipe(
        Layer.provide(Layer.unwrapScoped(Effect.map(freshPgDatabase(pgUrl!, "deliverer"), (url) => Database.layerPg(Redacted.make(url)))))
      )
  ] as const])
]
pgSkipReason("Deliverer")

/**
 * The store with every call counted, so a test can tell when the deliverers have nothing
 * left to do until the TestClock moves: no store call open, and none started for a while.
 * The SQL stores answer over real I/O; the TestClock must not run ahead of it.
 */
const counted = (store: TaskStore.TaskStore["Type"]) => {
  const state = { open: 0, started: 0 }
  const service = Object.fromEntries(
    Object.entries(store).map(([name, method]) => [
      name,
      (...args: Array<unknown>) =>
        Effect.suspend(() => {
          state.open++
          state.started++
          return (method as (...args: Array<unknown>) => Effect.Effect<unknown>)(...args)
        }).pipe(Effect.ensuring(Effect.sync(() => state.open--)))
    ])
  ) as unknown as TaskStore.TaskStore["Type"]
  const settle = Effect.gen(function*() {
    let quiet = 0
    let seen = state.started
    // Bounded by real time, not by turns: 100,000 turns are half a second, which PostgreSQL's
    // round trips on a loaded machine outlasted once in CI. Only a failure waits this long.
    const until = performance.now() + 30_000
    while (performance.now() < until) {
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      quiet = state.open === 0 && state.started === seen ? quiet + 1 : 0
      seen = state.started
      if (quiet >= 30) return
    }
    return yield* Effect.dieMessage("the deliverers did not settle")
  })
  return { service, settle }
}

describe("Deliverer: leases", () => {
  for (const [name, storeLayer] of backends) {
    it.scoped(`${name}: two deliverers with slow receivers send each callback exactly once: a claim never outlives its lease`, () =>
      Effect.gen(function*() {
        const posts = new Map<string, number>()
        // Every receiver takes 10 s to answer (on the TestClock).
        const slow = Layer.succeed(Outbound.Outbound, {
          post: (request) =>
            Effect.sync(() => posts.set(request.headers["webhook-id"]!, (posts.get(request.headers["webhook-id"]!) ?? 0) + 1)).pipe(
              Effect.zipRight(Effect.sleep("10 seconds")),
              Effect.as({ status: 204 })
            )
        })
        const built = yield* Layer.build(storeLayer())
        const { service: tasks, settle } = counted(Context.get(built, TaskStore.TaskStore))
        const accounts = MemoryAccounts.layer([{ id: "acct_test", name: "t", apiKey: Redacted.make("k"), webhookSecret: Redacted.make(secret) }])
        const node = Deliverer.layer({ pollInterval: "1 second", concurrency: 8 }).pipe(
          Layer.provide([slow, accounts, Layer.succeed(TaskStore.TaskStore, tasks)])
        )
        for (let i = 0; i < 40; i++) {
          const task = Testing.record({ id: `0190c8a4-0000-7000-8000-0000000000${String(i).padStart(2, "0")}`, status: "FAILURE", dueAt: null, callBackUrl: "https://hooks.example/x" })
          yield* tasks.create(task, [{ id: `msg_${i}`, taskId: task.id, url: "https://hooks.example/x", createdAt: 0 }])
        }
        yield* Layer.build(node)
        yield* Layer.build(node.pipe(Layer.fresh))
        yield* settle
        // 40 callbacks, 8 at a time per node, 10 s each: about 30 s of work, past the 30 s
        // lease of a claim of all of them.
        for (let i = 0; i < 90; i++) {
          yield* TestClock.adjust("1 second")
          yield* settle
        }
        expect(posts.size).toBe(40)
        expect([...posts.values()].filter((n) => n > 1)).toEqual([])
        for (let i = 0; i < 40; i++) {
          expect((yield* tasks.callbackAttempts(`msg_${i}`)).map((a) => a.outcome._tag)).toEqual(["Delivered"])
        }
      }))
  }

  it.scoped("an attempt that could not end within its lease is not sent: the callback is sent once, after the lease", () =>
    Effect.gen(function*() {
      const posts: Array<number> = []
      const outbound = Layer.succeed(Outbound.Outbound, {
        post: () => Effect.map(Clock.currentTimeMillis, (now) => (posts.push(now), { status: 204 }))
      })
      const built = Context.get(yield* Layer.build(MemoryTaskStore.layer), TaskStore.TaskStore)
      // A store that does not read the task with the claim, so the deliverer reads it; the
      // first read takes 10 s (a store under load): past the 7.5 s within which a 15 s attempt
      // must start to end with time left in its 30 s lease.
      let reads = 0
      const { service, settle } = counted(built)
      const tasks: TaskStore.TaskStore["Type"] = {
        ...service,
        claimCallbacks: (options) => Effect.map(service.claimCallbacks(options), (due) => due.map(({ task: _, ...callback }) => callback)),
        get: (id) => Effect.zipRight(++reads === 1 ? Effect.sleep("10 seconds") : Effect.void, service.get(id))
      }
      const accounts = MemoryAccounts.layer([{ id: "acct_test", name: "t", apiKey: Redacted.make("k"), webhookSecret: Redacted.make(secret) }])
      const task = Testing.record({ id: "0190c8a4-0000-7000-8000-00000000slow", status: "FAILURE", dueAt: null, callBackUrl: "https://hooks.example/x" })
      yield* tasks.create(task, [{ id: "msg_slow", taskId: task.id, url: "https://hooks.example/x", createdAt: 0 }])
      yield* Layer.build(Deliverer.layer({ pollInterval: "1 second" }).pipe(Layer.provide([outbound, accounts, Layer.succeed(TaskStore.TaskStore, tasks)])))
      yield* settle
      for (let i = 0; i < 40; i++) {
        yield* TestClock.adjust("1 second")
        yield* settle
      }
      expect(posts).toEqual([30_000])
      expect((yield* tasks.callbackAttempts("msg_slow")).map((a) => [a.at, a.outcome._tag])).toEqual([[30_000, "Delivered"]])
    }))
})

describe("Deliverer: claims", () => {
  /** A deliverer over the memory store whose callbacks each take 10 s to answer (on the TestClock); its claims counted. */
  const slowNode = (concurrency: number) =>
    Effect.gen(function*() {
      const posts: Array<readonly [string, number]> = []
      const outbound = Layer.succeed(Outbound.Outbound, {
        post: (request) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => {
            posts.push([request.headers["webhook-id"]!, now])
            return Effect.as(Effect.sleep("10 seconds"), { status: 204 })
          })
      })
      const built = Context.get(yield* Layer.build(MemoryTaskStore.layer), TaskStore.TaskStore)
      const { service, settle } = counted(built)
      const claims = { count: 0 }
      const tasks: TaskStore.TaskStore["Type"] = {
        ...service,
        claimCallbacks: (options) => Effect.zipRight(Effect.sync(() => claims.count++), service.claimCallbacks(options))
      }
      const owe = (i: number) => {
        const task = Testing.record({ id: `0190c8a4-0000-7000-8000-00000000cl${String(i).padStart(2, "0")}`, status: "SUCCESS", dueAt: null, callBackUrl: "https://hooks.example/x" })
        return tasks.create(task, [{ id: `msg_cl${i}`, taskId: task.id, url: "https://hooks.example/x", createdAt: 0 }])
      }
      const start = Layer.build(
        Deliverer.layer({ pollInterval: "1 hour", concurrency }).pipe(Layer.provide([outbound, accountsLayer, Layer.succeed(TaskStore.TaskStore, tasks)]))
      )
      /** The write path over this store, handing callbacks to the deliverer `start` built. */
      const writesOf = (node: Context.Context<TaskEvents.CallbackWakeup>) =>
        TaskWrites.make.pipe(
          Effect.provide([
            Ledger.layerUnbilled,
            TaskChanges.layer,
            Ids.layerTest,
            Layer.succeed(TaskStore.TaskStore, tasks),
            Layer.succeed(TaskEvents.CallbackWakeup, Context.get(node, TaskEvents.CallbackWakeup))
          ])
        )
      return { posts, claims, owe, start, settle, tasks, built, writesOf }
    })

  it.scoped("a slot freed with nothing waiting claims nothing: the last claim took every callback due", () =>
    Effect.gen(function*() {
      const { claims, owe, posts, settle, start, tasks } = yield* slowNode(4)
      yield* owe(1)
      yield* start
      yield* settle
      expect(posts).toEqual([["msg_cl1", 0]])
      expect(claims.count).toBe(1)
      yield* TestClock.adjust("10 seconds")
      yield* settle
      expect((yield* tasks.callbackAttempts("msg_cl1")).map((a) => a.outcome._tag)).toEqual(["Delivered"])
      // The freed slot did not look again; the next look is the scan, an hour away.
      expect(claims.count).toBe(1)
    }))

  it.scoped("a backlog is claimed as its slots free, not at the next scan", () =>
    Effect.gen(function*() {
      const { claims, owe, posts, settle, start } = yield* slowNode(1)
      yield* owe(1)
      yield* owe(2)
      yield* start
      yield* settle
      expect(posts).toEqual([["msg_cl1", 0]])
      yield* TestClock.adjust("10 seconds")
      yield* settle
      // The claim that filled the only slot was full: the freed slot claims the next at once.
      expect(posts).toEqual([["msg_cl1", 0], ["msg_cl2", 10_000]])
      expect(claims.count).toBeGreaterThanOrEqual(2)
    }))

  /** A task running, owing the spec's one callback when it ends. */
  const running = (i: number) =>
    Testing.record({ id: `0190c8a4-0000-7000-8000-00000000ho${String(i).padStart(2, "0")}`, status: "PROCESSING", callBackUrl: "https://hooks.example/x" })

  it.scoped("a callback owed with a slot free is handed to the deliverer: written leased to it and sent without a claim", () =>
    Effect.gen(function*() {
      const { built, claims, posts, settle, start, tasks, writesOf } = yield* slowNode(4)
      const writes = yield* writesOf(yield* start)
      yield* settle
      expect(claims.count).toBe(1)
      const task = running(1)
      yield* tasks.create(task)
      yield* writes.apply(task, { to: "FAILURE", reason: null, message: "x" }, 0)
      yield* settle
      const [callback] = yield* tasks.callbacks(task.id)
      expect(posts).toEqual([[callback!.id, 0]])
      // Leased to this deliverer: another node's claim does not take it while it is sent.
      expect(yield* built.claimCallbacks({ now: 5_000, limit: 10, leaseUntil: 60_000 })).toEqual([])
      yield* TestClock.adjust("10 seconds")
      yield* settle
      expect((yield* tasks.callbackAttempts(callback!.id)).map((a) => a.outcome._tag)).toEqual(["Delivered"])
      // No claim of this node looked for it, before or after.
      expect(claims.count).toBe(1)
    }))

  it.scoped("with every slot taken a callback is written for a claim, and claimed as soon as a slot frees", () =>
    Effect.gen(function*() {
      const { built, claims, posts, settle, start, tasks, writesOf } = yield* slowNode(1)
      const writes = yield* writesOf(yield* start)
      yield* settle
      const [first, second] = [running(2), running(3)]
      yield* tasks.create(first)
      yield* tasks.create(second)
      // The first takes the only slot without a claim; the second finds none.
      yield* writes.apply(first, { to: "FAILURE", reason: null, message: "x" }, 0)
      yield* settle
      yield* writes.apply(second, { to: "FAILURE", reason: null, message: "x" }, 0)
      yield* settle
      const [owed] = yield* tasks.callbacks(second.id)
      expect(posts.map(([id]) => id)).not.toContain(owed!.id)
      // Not leased: any node's claim may take it.
      expect((yield* built.claimCallbacks({ now: 0, limit: 10, leaseUntil: 1 })).map((c) => c.id)).toEqual([owed!.id])
      // The first's slot frees at 10 s: the second is claimed then (its lease above ended at 1 ms), not at the scan an hour away.
      yield* TestClock.adjust("10 seconds")
      yield* settle
      expect(posts.at(-1)).toEqual([owed!.id, 10_000])
      expect(claims.count).toBeGreaterThanOrEqual(2)
    }))

  it.scoped("a hand-off whose write fails gives its slot back", () =>
    Effect.gen(function*() {
      const { claims, posts, settle, start, tasks, writesOf } = yield* slowNode(1)
      const writes = yield* writesOf(yield* start)
      yield* settle
      const task = running(4)
      yield* tasks.create(task)
      // A stale version: the write fails, and the slot it took is free again.
      const stale = Testing.record({ ...task, version: task.version - 1 })
      expect((yield* Effect.either(writes.apply(stale, { to: "FAILURE", reason: null, message: "x" }, 0)))._tag).toBe("Left")
      yield* writes.apply(task, { to: "FAILURE", reason: null, message: "x" }, 0)
      yield* settle
      const [callback] = yield* tasks.callbacks(task.id)
      expect(posts).toEqual([[callback!.id, 0]])
      expect(claims.count).toBe(1)
    }))
})
