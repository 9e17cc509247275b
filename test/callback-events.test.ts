/**
 * Callback events over HTTP (`callBackEvents` on submit, additive; docs/callbacks.md): a slow
 * simulated video sends started, throttled progress and completed callbacks to a receiver on
 * loopback, each signed as `standardwebhooks` signs it, with the TestClock driving the engine
 * and the deliverer. Without callBackEvents the spec's one callback is unchanged; bad values
 * are a 400 in the envelope, and the estimate refuses them as submit does.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { Webhook } from "standardwebhooks"
import { client, testServer, webhookSecret } from "./support.js"

const api = client()

type Received = { readonly headers: Http.IncomingHttpHeaders; readonly body: string; readonly payload: any }

/** A receiver on loopback keeping every request; `hold` leaves the non-terminal ones unanswered. */
const receiver = (options: { readonly hold?: boolean } = {}) =>
  Effect.acquireRelease(
    Effect.async<{ url: string; received: Array<Received>; server: Http.Server }>((resume) => {
      const received: Array<Received> = []
      const server = Http.createServer((request, response) => {
        let body = ""
        request.on("data", (chunk) => (body += chunk))
        request.on("end", () => {
          const payload = JSON.parse(body)
          received.push({ headers: request.headers, body, payload })
          if (options.hold === true && payload.event !== "completed") return
          response.writeHead(204).end()
        })
      })
      server.listen(0, "127.0.0.1", () =>
        resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received, server })))
    }),
    ({ server }) =>
      Effect.promise(() => {
        server.closeAllConnections()
        return new Promise<void>((resolve) => server.close(() => resolve()))
      })
  )

const settle = Effect.gen(function*() {
  for (let i = 0; i < 30; i++) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
})

/** Moves the TestClock 100 ms at a time until `done`, at most `steps` times. */
const advanceUntil = (done: () => boolean, steps = 1_500) =>
  Effect.gen(function*() {
    for (let step = 0; step < steps && !done(); step++) {
      yield* TestClock.adjust("100 millis")
      yield* settle
    }
    expect(done()).toBe(true)
  })

/** The signature `standardwebhooks` makes for this request (its verify() checks the time against the wall clock). */
const signedAsExpected = ({ body, headers }: Received) =>
  headers["webhook-signature"] ===
    new Webhook(webhookSecret).sign(String(headers["webhook-id"]), new Date(Number(headers["webhook-timestamp"]) * 1000), body)

const slowVideo = { model: "dream-4", input: { prompt: "a slow one [sim:slow]" } }

describe("callback events", () => {
  it.effect("a slow video with callBackEvents: started, then progress at most one per 2 s, then completed; each signed, with its event", () =>
    Effect.gen(function*() {
      const hook = yield* receiver()
      const taskId = yield* api.submitId({ ...slowVideo, callBackUrl: hook.url, callBackEvents: ["started", "progress", "completed"] })
      yield* advanceUntil(() => hook.received.some((r) => r.payload.event === "completed"))
      const events = hook.received.map((r) => r.payload.event)
      expect(events[0]).toBe("started")
      expect(events.at(-1)).toBe("completed")
      expect(events.filter((e) => e === "completed")).toHaveLength(1)
      expect(events.filter((e) => e === "started")).toHaveLength(1)
      const progress = hook.received.filter((r) => r.payload.event === "progress")
      expect(progress.length).toBeGreaterThan(2)
      expect(hook.received.every(signedAsExpected)).toBe(true)
      expect(new Set(hook.received.map((r) => r.headers["webhook-id"])).size).toBe(hook.received.length)
      for (const r of hook.received) {
        expect(Object.keys(r.payload)).toEqual(["code", "msg", "event", "data"])
        expect(r.payload.data.taskId).toBe(taskId)
      }
      // Each progress callback carries the task as it stood when sent: running, with its progress.
      for (const r of progress) {
        expect(["SUBMITTED", "PROCESSING"]).toContain(r.payload.data.status)
        expect(["queued", "running", "finishing"]).toContain(r.payload.data.progress.stage)
      }
      const percents = progress.map((r) => r.payload.data.progress.percent).filter((p) => p !== null)
      expect(percents.at(-1)).toBeGreaterThan(percents[0])
      // At most one per 2 s (webhook-timestamp is in seconds: two seconds apart at least, less one for rounding).
      const times = progress.map((r) => Number(r.headers["webhook-timestamp"]))
      times.slice(1).forEach((t, i) => expect(t - times[i]!).toBeGreaterThanOrEqual(1))
      const sentAt = progress.map((r) => Date.parse(r.payload.data.progress.updated_at))
      sentAt.slice(1).forEach((t, i) => expect(t).toBeGreaterThan(sentAt[i]!))
      // The terminal one is the query answer with its event.
      const completed = hook.received.at(-1)!.payload
      const query = yield* api.query(taskId)
      expect(completed).toEqual({ ...query.body, event: "completed" })
      expect(completed.data.status).toBe("SUCCESS")
      // The callbacks endpoint lists each with its event; a redeliver sends the terminal one only.
      const listed = yield* api.call("GET", `/api/v1/task/${taskId}/callbacks`)
      const byEvent = (listed.body.data.callbacks as Array<{ event: string; status: string }>).map((c) => c.event)
      expect(byEvent[0]).toBe("started")
      expect(byEvent.at(-1)).toBe("completed")
      expect(new Set(byEvent)).toEqual(new Set(["started", "progress", "completed"]))
      const before = hook.received.length
      const redelivered = yield* api.call("POST", `/api/v1/task/${taskId}/callbacks/redeliver`)
      expect(redelivered.status).toBe(200)
      yield* advanceUntil(() => hook.received.length > before, 50)
      yield* TestClock.adjust("5 seconds")
      yield* settle
      expect(hook.received.slice(before).map((r) => r.payload.event)).toEqual(["completed"])
    }).pipe(Effect.provide(testServer({ profile: "demo", allowPrivateUrls: true })), Effect.scoped))

  it.effect("callBackEvents [\"completed\"]: one callback, at the end, with its event", () =>
    Effect.gen(function*() {
      const hook = yield* receiver()
      yield* api.submitId({ ...slowVideo, callBackUrl: hook.url, callBackEvents: ["completed"] })
      yield* advanceUntil(() => hook.received.length > 0)
      yield* TestClock.adjust("10 seconds")
      yield* settle
      expect(hook.received.map((r) => r.payload.event)).toEqual(["completed"])
    }).pipe(Effect.provide(testServer({ profile: "demo", allowPrivateUrls: true })), Effect.scoped))

  it.effect("without callBackEvents: one callback at the end, with the spec's body (no event)", () =>
    Effect.gen(function*() {
      const hook = yield* receiver()
      const taskId = yield* api.submitId({ ...slowVideo, callBackUrl: hook.url })
      yield* advanceUntil(() => hook.received.length > 0)
      yield* TestClock.adjust("10 seconds")
      yield* settle
      expect(hook.received).toHaveLength(1)
      expect(hook.received[0]!.payload).toEqual((yield* api.query(taskId)).body)
      expect(Object.keys(hook.received[0]!.payload)).toEqual(["code", "msg", "data"])
    }).pipe(Effect.provide(testServer({ profile: "demo", allowPrivateUrls: true })), Effect.scoped))

  it.effect("a receiver that holds the event callbacks open does not delay the terminal one", () =>
    Effect.gen(function*() {
      const hook = yield* receiver({ hold: true })
      yield* api.submitId({ ...slowVideo, callBackUrl: hook.url, callBackEvents: ["started", "progress", "completed"] })
      yield* advanceUntil(() => hook.received.some((r) => r.payload.event === "completed"))
      expect(hook.received[0]!.payload.event).toBe("started")
    }).pipe(Effect.provide(testServer({ profile: "demo", allowPrivateUrls: true })), Effect.scoped))

  it.effect("bad callBackEvents are a 400 in the envelope, from submit and from the estimate alike; nothing is created", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [unknown, string | null, string]> = [
        [["started", "progress"], "http://127.0.0.1:9/hook", `callBackEvents must include "completed": the terminal callback is always sent`],
        [[], "http://127.0.0.1:9/hook", `callBackEvents must include "completed": the terminal callback is always sent`],
        [["completed", "output"], "http://127.0.0.1:9/hook", `callBackEvents.1 must be one of "started", "progress", "completed"`],
        ["completed", "http://127.0.0.1:9/hook", "callBackEvents must be an array of event names"],
        [["completed"], null, "callBackEvents needs a callBackUrl to send them to"]
      ]
      for (const [events, url, message] of cases) {
        const body = { ...slowVideo, callBackEvents: events, ...(url === null ? {} : { callBackUrl: url }) }
        for (const path of ["/api/v1/task/submit", "/api/v1/task/estimate"]) {
          const answer = yield* api.call("POST", path, { body })
          expect([path, answer.status, answer.body]).toEqual([path, 400, { code: 400, msg: message }])
        }
      }
      // null counts as absent, as for callBackUrl.
      expect((yield* api.submit({ ...slowVideo, callBackEvents: null })).status).toBe(200)
      const listed = yield* api.call("GET", "/api/v1/tasks")
      expect(listed.body.data.tasks).toHaveLength(1)
    }).pipe(Effect.provide(testServer({ allowPrivateUrls: true }))))
})
