/**
 * GET /api/v1/task/{taskId}?wait=N (additive), over HTTP with the TestClock: the answer comes
 * as soon as a write ends the task (woken by the write path, before virtual time reaches N),
 * or after N seconds with the task as it is then; N outside 1..60 is 400 in the envelope.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Option, TestClock } from "effect"
import { apiKey, idleServer, otherApiKey, testServer } from "./support.js"

const call = (request: HttpClientRequest.HttpClientRequest, key: string = apiKey) =>
  Effect.gen(function*() {
    const response = yield* (yield* HttpClient.HttpClient).execute(request.pipe(HttpClientRequest.bearerToken(key)))
    return { status: response.status, body: (yield* response.json) as any }
  })

const submit = (model = "dream-4") =>
  call(HttpClientRequest.post("/api/v1/task/submit").pipe(
    HttpClientRequest.bodyText(JSON.stringify({ model, input: { prompt: "a slow one" } }), "application/json")
  )).pipe(Effect.map((answer) => answer.body.data.taskId as string))

/** Lets the server's fibers and sockets run without moving virtual time. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 30; i++) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
})

describe("GET /api/v1/task/{taskId}?wait=N", () => {
  it.effect("answers when a write ends the task, with no virtual time passed", () =>
    Effect.gen(function*() {
      const taskId = yield* submit()
      const waiting = yield* Effect.fork(call(HttpClientRequest.get(`/api/v1/task/${taskId}?wait=60`)))
      yield* settle
      expect(Option.isNone(yield* Fiber.poll(waiting))).toBe(true)
      expect((yield* call(HttpClientRequest.post(`/api/v1/task/${taskId}/cancel`))).status).toBe(200)
      const answer = yield* Fiber.join(waiting)
      expect(answer.status).toBe(200)
      expect(answer.body).toMatchObject({ code: 0, msg: "ok", data: { taskId, status: "CANCELLED" } })
      expect(yield* Clock.currentTimeMillis).toBe(0)
    }).pipe(Effect.provide(idleServer)))

  it.effect("after N seconds answers 200 with the task as it is, not a moment before", () =>
    Effect.gen(function*() {
      const taskId = yield* submit()
      for (const path of [`/api/v1/task/${taskId}?wait=3`, `/api/v1/task/${taskId.toUpperCase()}/?wait=3&other=1`]) {
        const waiting = yield* Effect.fork(call(HttpClientRequest.get(path)))
        yield* settle
        yield* TestClock.adjust("2999 millis")
        yield* settle
        expect(Option.isNone(yield* Fiber.poll(waiting))).toBe(true)
        yield* TestClock.adjust("1 millis")
        const answer = yield* Fiber.join(waiting)
        expect([answer.status, answer.body.code, answer.body.data.taskId, answer.body.data.status]).toEqual([200, 0, taskId, "PENDING"])
      }
    }).pipe(Effect.provide(idleServer)))

  it.effect("a task that has ended answers at once; unknown and foreign tasks are 404, without a key 401", () =>
    Effect.gen(function*() {
      const taskId = yield* submit()
      yield* call(HttpClientRequest.post(`/api/v1/task/${taskId}/cancel`))
      expect((yield* call(HttpClientRequest.get(`/api/v1/task/${taskId}?wait=60`))).body.data.status).toBe("CANCELLED")
      expect(yield* call(HttpClientRequest.get(`/api/v1/task/${taskId}?wait=5`), otherApiKey)).toEqual({ status: 404, body: { code: 404, msg: "task not found" } })
      expect(yield* call(HttpClientRequest.get("/api/v1/task/0190c8a4-0000-7000-8000-000000000000?wait=5"))).toEqual({
        status: 404,
        body: { code: 404, msg: "task not found" }
      })
      expect((yield* call(HttpClientRequest.get(`/api/v1/task/${taskId}?wait=5`), "nope")).status).toBe(401)
    }).pipe(Effect.provide(idleServer)))

  it.effect("wait outside 1..60 seconds is 400 in the envelope, on both paths to the query", () =>
    Effect.gen(function*() {
      const taskId = yield* submit()
      const msg = "wait must be an integer number of seconds between 1 and 60"
      for (const [query, expected] of [
        ["wait=0", msg],
        ["wait=61", msg],
        ["wait=-1", msg],
        ["wait=1.5", msg],
        ["wait=abc", msg],
        ["wait=", msg],
        ["wait=005", msg],
        ["wait=1&wait=2", "wait may be given once"]
      ]) {
        for (const path of [`/api/v1/task/${taskId}?${query}`, `/api/v1/task/${taskId}/?${query}`]) {
          expect([path, yield* call(HttpClientRequest.get(path))]).toEqual([path, { status: 400, body: { code: 400, msg: expected } }])
        }
      }
    }).pipe(Effect.provide(idleServer)))

  it.effect("with the engine: the answer follows the write that ends the task, not the next re-read", () =>
    Effect.gen(function*() {
      const taskId = yield* submit("alpha-image-2/text-to-image")
      const waiting = yield* Effect.fork(call(HttpClientRequest.get(`/api/v1/task/${taskId}?wait=60`)))
      yield* settle
      let steps = 0
      while (Option.isNone(yield* Fiber.poll(waiting)) && steps++ < 600) {
        yield* TestClock.adjust("50 millis")
        yield* settle
      }
      const answered = yield* Clock.currentTimeMillis
      const answer = yield* Fiber.join(waiting)
      expect(answer.body.data.status).toBe("SUCCESS")
      expect(answered).toBeLessThan(60_000)
      // Within a step or two of the terminal write; the safety re-read is every 5 s.
      expect(answered - Date.parse(answer.body.data.updated_at)).toBeLessThanOrEqual(100)
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))
})
