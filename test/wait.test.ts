/**
 * GET /api/v1/task/{taskId}?wait=N (additive), over HTTP with the TestClock: the answer comes
 * as soon as a write ends the task (woken by the write path, before virtual time reaches N),
 * or after N seconds with the task as it is then; N outside 1..60 is 400 in the envelope.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Option, TestClock } from "effect"
import { client, idleServer, otherApiKey, testServer } from "./support.js"

const api = client()
const slowOne = { model: "dream-4", input: { prompt: "a slow one" } }

/** Lets the server's fibers and sockets run without moving virtual time. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 30; i++) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
})

describe("GET /api/v1/task/{taskId}?wait=N", () => {
  it.effect("answers when a write ends the task, with no virtual time passed", () =>
    Effect.gen(function*() {
      const taskId = yield* api.submitId(slowOne)
      const waiting = yield* Effect.fork(api.query(taskId, { wait: 60 }))
      yield* settle
      expect(Option.isNone(yield* Fiber.poll(waiting))).toBe(true)
      expect((yield* api.call("POST", `/api/v1/task/${taskId}/cancel`)).status).toBe(200)
      const answer = yield* Fiber.join(waiting)
      expect(answer.status).toBe(200)
      expect(answer.body).toMatchObject({ code: 0, msg: "ok", data: { taskId, status: "CANCELLED" } })
      expect(yield* Clock.currentTimeMillis).toBe(0)
    }).pipe(Effect.provide(idleServer)))

  it.effect("after N seconds answers 200 with the task as it is, not a moment before", () =>
    Effect.gen(function*() {
      const taskId = yield* api.submitId(slowOne)
      for (const path of [`/api/v1/task/${taskId}?wait=3`, `/api/v1/task/${taskId.toUpperCase()}/?wait=3&other=1`]) {
        const waiting = yield* Effect.fork(api.call("GET", path))
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
      const taskId = yield* api.submitId(slowOne)
      yield* api.call("POST", `/api/v1/task/${taskId}/cancel`)
      expect((yield* api.query(taskId, { wait: 60 })).body.data.status).toBe("CANCELLED")
      expect(yield* api.query(taskId, { wait: 5, key: otherApiKey })).toEqual({ status: 404, body: { code: 404, msg: "task not found" } })
      expect(yield* api.query("0190c8a4-0000-7000-8000-000000000000", { wait: 5 })).toEqual({
        status: 404,
        body: { code: 404, msg: "task not found" }
      })
      expect((yield* api.query(taskId, { wait: 5, key: "nope" })).status).toBe(401)
    }).pipe(Effect.provide(idleServer)))

  it.effect("wait outside 1..60 seconds is 400 in the envelope, on both paths to the query", () =>
    Effect.gen(function*() {
      const taskId = yield* api.submitId(slowOne)
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
          expect([path, yield* api.call("GET", path)]).toEqual([path, { status: 400, body: { code: 400, msg: expected } }])
        }
      }
    }).pipe(Effect.provide(idleServer)))

  it.effect("with the engine: the answer follows the write that ends the task, not the next re-read", () =>
    Effect.gen(function*() {
      const taskId = yield* api.submitId({ ...slowOne, model: "alpha-image-2/text-to-image" })
      const waiting = yield* Effect.fork(api.query(taskId, { wait: 60 }))
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
