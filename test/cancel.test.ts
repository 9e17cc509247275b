/**
 * POST /api/v1/task/{taskId}/cancel (additive), over HTTP with the TestClock.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { Simulator } from "@mediagate/upstream"
import { apiKey, otherApiKey, testServer } from "./support.js"

const call = (request: HttpClientRequest.HttpClientRequest, key: string | null = apiKey) =>
  Effect.gen(function*() {
    const response = yield* (yield* HttpClient.HttpClient).execute(key === null ? request : request.pipe(HttpClientRequest.bearerToken(key)))
    return { status: response.status, body: (yield* response.json) as any }
  })

const submit = (prompt: string) =>
  call(HttpClientRequest.post("/api/v1/task/submit").pipe(
    HttpClientRequest.bodyText(JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt } }), "application/json")
  )).pipe(Effect.map((answer) => answer.body.data.taskId as string))

const cancel = (taskId: string, key: string | null = apiKey) => call(HttpClientRequest.post(`/api/v1/task/${taskId}/cancel`), key)
const query = (taskId: string) => call(HttpClientRequest.get(`/api/v1/task/${taskId}`)).pipe(Effect.map((a) => a.body.data))

describe("cancel", () => {
  it.effect("a running task is CANCELLED and stays so when its work finishes; a second cancel is 409", () =>
    Effect.gen(function*() {
      const taskId = yield* submit("to cancel")
      const answer = yield* cancel(taskId)
      expect(answer.status).toBe(200)
      expect(answer.body.data).toMatchObject({ taskId, status: "CANCELLED", result: null, failure_reason: null })
      for (let i = 0; i < 10; i++) yield* TestClock.adjust("1 second")
      expect((yield* query(taskId)).status).toBe("CANCELLED")
      expect(yield* cancel(taskId)).toEqual({ status: 409, body: { code: 409, msg: "task is already CANCELLED" } })
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))

  it.effect("a finished task cannot be cancelled; unknown, foreign and unauthenticated cancels are refused", () =>
    Effect.gen(function*() {
      const taskId = yield* submit("finishes")
      for (let i = 0; i < 10 && (yield* query(taskId)).status !== "SUCCESS"; i++) yield* TestClock.adjust("1 second")
      expect(yield* cancel(taskId)).toEqual({ status: 409, body: { code: 409, msg: "task is already SUCCESS" } })
      expect(yield* cancel("0190c8a4-0000-7000-8000-000000000000")).toEqual({ status: 404, body: { code: 404, msg: "task not found" } })
      expect(yield* cancel(taskId, otherApiKey)).toEqual({ status: 404, body: { code: 404, msg: "task not found" } })
      expect(yield* cancel(taskId, null)).toEqual({ status: 401, body: { code: 401, msg: "unauthorized" } })
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))

  it.effect("cancelling a task whose job the upstream accepted asks the upstream to stop it", () => {
    const stats = new Simulator.Stats()
    return Effect.gen(function*() {
      const submitted = yield* call(HttpClientRequest.post("/api/v1/task/submit").pipe(
        HttpClientRequest.bodyText(JSON.stringify({ model: "dream-4", input: { prompt: "a long one" } }), "application/json")
      ))
      const taskId = submitted.body.data.taskId as string
      for (let i = 0; i < 50 && (yield* query(taskId)).status === "PENDING"; i++) yield* Effect.sleep(0)
      const running = yield* query(taskId)
      expect(running.status).toBe("SUBMITTED")
      expect((yield* cancel(taskId)).body.data.status).toBe("CANCELLED")
      for (let i = 0; i < 50 && stats.cancelled.size === 0; i++) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      expect([...stats.cancelled]).toEqual([running.attempts[0].upstream_id])
    }).pipe(Effect.provide(testServer({ profile: "demo", simulatorStats: stats })))
  })
})
