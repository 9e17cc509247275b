/**
 * POST /api/v1/task/{taskId}/cancel (additive), over HTTP with the TestClock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { Simulator } from "@mediagate/upstream"
import { client, otherApiKey, testServer } from "./support.js"

const api = client()
const cancel = (taskId: string, key?: string | null) => api.call("POST", `/api/v1/task/${taskId}/cancel`, { key })
const statusOf = (taskId: string) => Effect.map(api.query(taskId), (answer) => answer.body.data.status)

describe("cancel", () => {
  it.effect("a running task is CANCELLED and stays so when its work finishes; a second cancel is 409", () =>
    Effect.gen(function*() {
      const taskId = yield* api.submitId({ model: "alpha-image-2/text-to-image", input: { prompt: "to cancel" } })
      const answer = yield* cancel(taskId)
      expect(answer.status).toBe(200)
      expect(answer.body.data).toMatchObject({ taskId, status: "CANCELLED", result: null, failure_reason: null })
      for (let i = 0; i < 10; i++) yield* TestClock.adjust("1 second")
      expect(yield* statusOf(taskId)).toBe("CANCELLED")
      expect(yield* cancel(taskId)).toEqual({ status: 409, body: { code: 409, msg: "task is already CANCELLED" } })
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))

  it.effect("a finished task cannot be cancelled; unknown, foreign and unauthenticated cancels are refused", () =>
    Effect.gen(function*() {
      const taskId = yield* api.submitId({ model: "alpha-image-2/text-to-image", input: { prompt: "finishes" } })
      for (let i = 0; i < 10 && (yield* statusOf(taskId)) !== "SUCCESS"; i++) yield* TestClock.adjust("1 second")
      expect(yield* cancel(taskId)).toEqual({ status: 409, body: { code: 409, msg: "task is already SUCCESS" } })
      expect(yield* cancel("0190c8a4-0000-7000-8000-000000000000")).toEqual({ status: 404, body: { code: 404, msg: "task not found" } })
      expect(yield* cancel(taskId, otherApiKey)).toEqual({ status: 404, body: { code: 404, msg: "task not found" } })
      expect(yield* cancel(taskId, null)).toEqual({ status: 401, body: { code: 401, msg: "unauthorized" } })
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))

  it.effect("cancelling a task whose job the upstream accepted asks the upstream to stop it", () => {
    const stats = new Simulator.Stats()
    return Effect.gen(function*() {
      const taskId = yield* api.submitId({ model: "dream-4", input: { prompt: "a long one" } })
      for (let i = 0; i < 50 && (yield* statusOf(taskId)) === "PENDING"; i++) yield* Effect.sleep(0)
      const running = (yield* api.query(taskId)).body.data
      expect(running.status).toBe("SUBMITTED")
      expect((yield* cancel(taskId)).body.data.status).toBe("CANCELLED")
      for (let i = 0; i < 50 && stats.cancelled.size === 0; i++) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      expect([...stats.cancelled]).toEqual([running.attempts[0]!.upstream_id])
    }).pipe(Effect.provide(testServer({ profile: "demo", simulatorStats: stats })))
  })
})
