/**
 * GET /api/v1/task/{taskId}/callbacks and POST .../callbacks/redeliver (additive), black box
 * over HTTP with the TestClock: a receiver on loopback answers as each test scripts it, the
 * attempts endpoint shows what happened, a redeliver sends the callback again under the same
 * webhook-id with a valid signature, and only the task's owner sees or redelivers anything.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Ajv } from "ajv"
import { Effect, TestClock } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { Webhook } from "standardwebhooks"
import { client, otherApiKey, testServer, until, webhookSecret } from "./support.js"

type Received = { readonly path: string; readonly headers: Http.IncomingHttpHeaders; readonly body: string }
const received: Array<Received> = []
/** What the receiver answers, per path: statuses used in turn, the last one repeating. */
const script = new Map<string, Array<number>>()
let base = ""
const receiver = Http.createServer((request, response) => {
  let body = ""
  request.on("data", (chunk) => (body += chunk))
  request.on("end", () => {
    const path = request.url ?? "/"
    received.push({ path, headers: request.headers, body })
    const statuses = script.get(path) ?? [204]
    response.writeHead(statuses.length > 1 ? statuses.shift()! : statuses[0]!).end()
  })
})
beforeAll(() =>
  new Promise<void>((resolve) =>
    receiver.listen(0, "127.0.0.1", () => {
      base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`
      resolve()
    })
  ))
afterAll(() => {
  receiver.closeAllConnections()
  return new Promise<void>((resolve) => receiver.close(() => resolve()))
})

const api = client()
const kite = { model: "alpha-image-2/text-to-image", input: { prompt: "a kite" } }

const query = (taskId: string) => Effect.map(api.query(taskId), (answer) => answer.body.data)
const callbacks = (taskId: string, key?: string | null) => api.call("GET", `/api/v1/task/${taskId}/callbacks`, { key })
const redeliver = (taskId: string, key?: string | null) => api.call("POST", `/api/v1/task/${taskId}/callbacks/redeliver`, { key })


const requestsTo = (path: string) => Effect.sync(() => received.filter((r) => r.path === path))

/** A task with a callback to `path`, ended SUCCESS. */
const ended = (path: string) =>
  Effect.gen(function*() {
    const taskId = yield* api.submitId({ ...kite, callBackUrl: `${base}${path}` })
    for (let i = 0; i < 20 && (yield* query(taskId)).status !== "SUCCESS"; i++) yield* TestClock.adjust("1 second")
    expect((yield* query(taskId)).status).toBe("SUCCESS")
    return taskId
  })

/** Checks that the OpenAPI document gives this status for the path and method, with a schema the answer fits. */
const documented = (path: string, method: string) => (answer: { readonly status: number; readonly body: unknown }) =>
  Effect.gen(function*() {
    const document = (yield* api.call("GET", "/api/v1/openapi.json")).body
    const ajv = new Ajv({ strict: false, validateFormats: false })
    ajv.addSchema({ ...document, $id: "openapi" })
    const pointer = ["paths", path, method, "responses", String(answer.status), "content", "application/json", "schema"]
      .map((segment) => encodeURIComponent(segment.replace(/~/g, "~0").replace(/\//g, "~1"))).join("/")
    expect(ajv.validate({ $ref: `openapi#/${pointer}` }, answer.body) ? null : ajv.errorsText()).toBeNull()
    return answer
  })
const listDocumented = documented("/api/v1/task/{taskId}/callbacks", "get")
const redeliverDocumented = documented("/api/v1/task/{taskId}/callbacks/redeliver", "post")

const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

describe("callback endpoints", () => {
  it.effect("the attempts endpoint shows each attempt's status and error; a redeliver sends the callback again, same webhook-id, validly signed", () =>
    Effect.gen(function*() {
      script.set("/flaky", [500, 204])
      const taskId = yield* ended("/flaky")
      yield* until(requestsTo("/flaky"), (r) => r.length === 1)
      const first = yield* until(callbacks(taskId), (a) => a.body.data.callbacks[0]?.attempts.length === 1)
      expect(first.status).toBe(200)
      yield* listDocumented(first)
      const [callback] = first.body.data.callbacks
      expect(callback).toMatchObject({
        url: `${base}/flaky`,
        status: "pending",
        attempts: [{ attempt: 1, status_code: 500, error: "HTTP 500" }]
      })
      expect(callback.id).toMatch(/^msg_[0-9a-f]{24}$/)
      expect(callback.created_at).toMatch(iso)
      expect(callback.attempts[0].at).toMatch(iso)
      expect(callback.attempts[0].latency_ms).toBeGreaterThanOrEqual(0)
      const wait = Date.parse(callback.next_attempt_at) - Date.parse(callback.attempts[0].at)
      expect(wait).toBeGreaterThanOrEqual(4_500)
      expect(wait).toBeLessThanOrEqual(5_500)

      yield* TestClock.adjust("6 seconds")
      const delivered = yield* until(callbacks(taskId), (a) => a.body.data.callbacks[0].status === "delivered")
      expect(delivered.body.data.callbacks[0]).toMatchObject({
        id: callback.id,
        next_attempt_at: null,
        attempts: [{ attempt: 1, status_code: 500, error: "HTTP 500" }, { attempt: 2, status_code: 204, error: null }]
      })

      // Delivered already: a redeliver sends it once more (as Stripe does).
      const answer = yield* redeliver(taskId)
      expect(answer.status).toBe(200)
      yield* redeliverDocumented(answer)
      expect(answer.body.code).toBe(0)
      expect(answer.body.data.callbacks.map((c: any) => c.id)).toEqual([callback.id])
      expect(answer.body.data.callbacks[0].attempts.slice(0, 2)).toEqual(delivered.body.data.callbacks[0].attempts)
      const requests = yield* until(requestsTo("/flaky"), (r) => r.length === 3)
      expect(requests.map((r) => r.headers["webhook-id"])).toEqual([callback.id, callback.id, callback.id])
      const again = requests[2]!
      const timestamp = Number(again.headers["webhook-timestamp"])
      expect(again.headers["webhook-signature"]).toBe(new Webhook(webhookSecret).sign(callback.id, new Date(timestamp * 1000), again.body))
      expect(JSON.parse(again.body)).toEqual({ code: 0, msg: "ok", data: yield* query(taskId) })
      const after = yield* until(callbacks(taskId), (a) => a.body.data.callbacks[0].attempts.length === 3)
      expect(after.body.data.callbacks[0]).toMatchObject({
        status: "delivered",
        next_attempt_at: null,
        attempts: [{ attempt: 1 }, { attempt: 2 }, { attempt: 3, status_code: 204, error: null }]
      })
    }).pipe(Effect.provide(testServer({ allowPrivateUrls: true }))))

  it.effect("410 Gone gives up at once, shown as failed; a redeliver starts over and delivers", () =>
    Effect.gen(function*() {
      script.set("/gone", [410, 204])
      const taskId = yield* ended("/gone")
      const failed = yield* until(callbacks(taskId), (a) => a.body.data.callbacks[0]?.status === "failed")
      expect(failed.body.data.callbacks[0]).toMatchObject({
        status: "failed",
        next_attempt_at: null,
        attempts: [{ attempt: 1, status_code: 410, error: "HTTP 410 Gone: not retried" }]
      })
      yield* TestClock.adjust("1 minute")
      expect(yield* requestsTo("/gone")).toHaveLength(1)
      expect((yield* redeliver(taskId)).status).toBe(200)
      const delivered = yield* until(callbacks(taskId), (a) => a.body.data.callbacks[0].status === "delivered")
      expect(delivered.body.data.callbacks[0].attempts.map((a: any) => [a.attempt, a.status_code])).toEqual([[1, 410], [2, 204]])
    }).pipe(Effect.provide(testServer({ allowPrivateUrls: true }))))

  it.effect("only the owner sees or redelivers; a task not ended or without callBackUrl is 409", () =>
    Effect.gen(function*() {
      const notFound = { status: 404, body: { code: 404, msg: "task not found" } }
      const running = yield* api.submitId({ ...kite, callBackUrl: `${base}/later` })
      expect(yield* redeliver(running)).toEqual({
        status: 409,
        body: { code: 409, msg: expect.stringMatching(/^task is still (PENDING|SUBMITTED|PROCESSING); its callback is sent when it ends$/) }
      })
      expect((yield* callbacks(running)).body).toEqual({ code: 0, msg: "ok", data: { callbacks: [] } })
      yield* redeliverDocumented(yield* redeliver(running))
      expect(yield* listDocumented(yield* callbacks(running, otherApiKey))).toEqual(notFound)
      expect(yield* redeliverDocumented(yield* redeliver(running, otherApiKey))).toEqual(notFound)
      expect(yield* callbacks("0190c8a4-0000-7000-8000-000000000000")).toEqual(notFound)
      expect(yield* redeliver("0190c8a4-0000-7000-8000-000000000000")).toEqual(notFound)
      expect(yield* callbacks(running, null)).toEqual({ status: 401, body: { code: 401, msg: "unauthorized" } })
      expect(yield* redeliver(running, null)).toEqual({ status: 401, body: { code: 401, msg: "unauthorized" } })

      const silent = yield* api.submitId(kite)
      for (let i = 0; i < 30 && (yield* query(silent)).status !== "SUCCESS"; i++) yield* TestClock.adjust("1 second")
      expect(yield* redeliver(silent)).toEqual({
        status: 409,
        body: { code: 409, msg: "task has no callBackUrl, so there is no callback to redeliver" }
      })
      // Another account's redeliver changed nothing and sent nothing.
      for (let i = 0; i < 30 && (yield* query(running)).status !== "SUCCESS"; i++) yield* TestClock.adjust("1 second")
      const owed = yield* until(callbacks(running), (a) => a.body.data.callbacks[0]?.status === "delivered")
      expect(owed.body.data.callbacks[0].attempts).toHaveLength(1)
      expect(yield* requestsTo("/later")).toHaveLength(1)
      expect((yield* api.call("PUT", `/api/v1/task/${running}/callbacks/redeliver`)).status).toBe(405)
    }).pipe(Effect.provide(testServer({ profile: "demo", allowPrivateUrls: true }))))
})
