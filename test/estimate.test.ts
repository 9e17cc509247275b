/**
 * POST /api/v1/task/estimate over HTTP: the body of submit, checked by the same rules, priced,
 * and nothing created. Each estimate is held against what a submit of the same body then does:
 * the price it holds and charges, the input the task stores, the adjustments it records, and
 * the refusals it answers.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { client, Raw, type SubmitBody, testServer } from "./support.js"

const api = client()
const estimate = (body: unknown, options: { readonly key?: string | null; readonly headers?: Record<string, string> } = {}) =>
  api.call("POST", "/api/v1/task/estimate", { ...options, body })
const query = (taskId: string) => Effect.map(api.query(taskId), (answer) => answer.body.data)
const account = Effect.map(api.call("GET", "/api/v1/account"), ({ body }) => body.data)
const taskCount = Effect.map(api.call("GET", "/api/v1/tasks?limit=100"), ({ body }) => (body.data.tasks as Array<unknown>).length)

const terminal = ["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"]

/** Advances virtual time until the task has ended. */
const untilEnded = (taskId: string) =>
  Effect.gen(function*() {
    for (let step = 0; step < 400; step++) {
      const task = yield* query(taskId)
      if (terminal.includes(task.status)) return task
      yield* TestClock.adjust(step < 120 ? "1 second" : "1 minute")
    }
    return yield* Effect.dieMessage("the task did not end")
  })

/** Bodies a submit takes, with and without adjustments, over several model families. */
const accepted: ReadonlyArray<SubmitBody> = [
  { model: "alpha-image-2/text-to-image", input: { prompt: "two lighthouses", resolution: "2k", n: 2 } },
  { model: "clip3", input: { prompt: "a paper boat on a river", duration: 6 } },
  { model: "clip3", input: { prompt: "three friends", imageUrls: ["https://example.com/a.jpg", "https://example.com/b.jpg", "https://example.com/c.jpg"] } },
  { model: "clip3_lite", input: { prompt: "a paper boat", imageUrls: ["https://example.com/a.jpg"], duration: 4, resolution: "1080p" } },
  { model: "motion-2.0", input: { prompt: "a dancer", duration: 5 }, user_id: "u-1", callBackUrl: null }
]

describe("estimate", () => {
  it.effect("answers the price a submit then holds and charges, the input the task stores and the adjustments it records", () =>
    Effect.gen(function*() {
      for (const body of accepted) {
        const answer = yield* estimate(body)
        expect([body.model, answer.status]).toEqual([body.model, 200])
        expect(answer.body).toMatchObject({ code: 0, msg: "ok" })
        const data = answer.body.data
        expect(Object.keys(data).sort()).toEqual(["adjustments", "input", "model", "priceMicroUsd", "priceUsd", "rejection"])
        expect(data.model).toBe(body.model)
        expect(data.rejection).toBeNull()
        expect(Number.isInteger(data.priceMicroUsd) && data.priceMicroUsd > 0).toBe(true)
        expect(data.priceUsd).toBe((data.priceMicroUsd / 1_000_000).toFixed(6))

        const taskId = yield* api.submitId(body)
        const task = yield* untilEnded(taskId)
        expect([body.model, task.status]).toEqual([body.model, "SUCCESS"])
        expect(data.input).toEqual(task.input)
        expect(data.priceMicroUsd).toBe(task.price_micro_usd)
        expect(data.adjustments).toEqual(task.adjustments)
        const entries = ((yield* account).entries as Array<any>).filter((entry) => entry.task_id === taskId)
        expect(entries.map((entry) => [entry.kind, entry.amount_micro_usd, entry.held_micro_usd]).reverse()).toEqual([
          ["reserve", 0, data.priceMicroUsd],
          ["charge", -data.priceMicroUsd, -data.priceMicroUsd]
        ])
      }
    }).pipe(Effect.provide(testServer())), 60_000)

  it.effect("lists clip3's duration and tier rules as adjustments, and the price follows what would run", () =>
    Effect.gen(function*() {
      // t2v on the quality tier runs 8 seconds whatever is asked.
      const t2v = (yield* estimate({ model: "clip3", input: { prompt: "a paper boat", duration: 4 } })).body.data
      expect(t2v.adjustments).toEqual([{ field: "duration", requested: 4, applied: 8, reason: "t2v on the quality tier supports only 8 seconds" }])
      // i2v-fl honours 4 seconds: nothing adjusted, and half the price of 8.
      const twoFrames = ["https://example.com/a.jpg", "https://example.com/b.jpg"]
      const four = (yield* estimate({ model: "clip3", input: { prompt: "dawn to dusk", imageUrls: twoFrames, duration: 4 } })).body.data
      const eight = (yield* estimate({ model: "clip3", input: { prompt: "dawn to dusk", imageUrls: twoFrames, duration: 8 } })).body.data
      expect(four.adjustments).toEqual([])
      expect(four.priceMicroUsd * 2).toBe(eight.priceMicroUsd)
      expect(t2v.priceMicroUsd).toBe(eight.priceMicroUsd)
      // r2v on clip3 runs as clip3_fast, 8 seconds.
      const r2v = (yield* estimate({
        model: "clip3",
        input: { prompt: "three friends", imageUrls: [...twoFrames, "https://example.com/c.jpg"], duration: 6 }
      })).body.data
      expect(r2v.adjustments).toEqual([
        { field: "model", requested: "clip3", applied: "clip3_fast", reason: "r2v does not support the quality tier; it runs in fast mode" },
        { field: "duration", requested: 6, applied: 8, reason: "r2v supports only 8 seconds" }
      ])
      expect(r2v.model).toBe("clip3")
      expect(r2v.input).toEqual({ model: "clip3", prompt: "three friends", imageUrls: [...twoFrames, "https://example.com/c.jpg"], duration: 6 })
      expect(r2v.priceMicroUsd).toBeLessThan(eight.priceMicroUsd)
    }).pipe(Effect.provide(testServer())))

  it.effect("answers adjustments in the task's own shape: the very list the task created from the same body shows", () =>
    Effect.gen(function*() {
      const twoFrames = ["https://example.com/a.jpg", "https://example.com/b.jpg"]
      const bodies: ReadonlyArray<SubmitBody> = [
        { model: "clip3", input: { prompt: "a paper boat", duration: 4 } },
        { model: "clip3", input: { prompt: "a paper boat", imageUrls: ["https://example.com/a.jpg"], duration: 6 } },
        { model: "clip3", input: { prompt: "three friends", imageUrls: [...twoFrames, "https://example.com/c.jpg"], duration: 6 } },
        { model: "clip3_lite", input: { prompt: "a paper boat", imageUrls: ["https://example.com/a.jpg"], duration: 4, resolution: "1080p" } }
      ]
      for (const body of bodies) {
        const answer = yield* estimate(body)
        expect([body, answer.status]).toEqual([body, 200])
        const estimated = answer.body.data
        const task = yield* query(yield* api.submitId(body))
        expect(estimated.adjustments.length, JSON.stringify(body)).toBeGreaterThan(0)
        for (const adjustment of estimated.adjustments) expect(Object.keys(adjustment).sort()).toEqual(["applied", "field", "reason", "requested"])
        expect(estimated.adjustments).toEqual(task.adjustments)
      }
    }).pipe(Effect.provide(testServer())))

  it.effect("refuses what submit refuses, with the same status and message", () =>
    Effect.gen(function*() {
      const refused: ReadonlyArray<unknown> = [
        { input: { prompt: "x" } },
        { model: "", input: { prompt: "x" } },
        { model: "alpha-image-2", input: { prompt: "x" } },
        { model: "no-such-model", input: { prompt: "x" } },
        { model: "alpha-image-2/text-to-image" },
        { model: "alpha-image-2/text-to-image", input: [] },
        { model: "alpha-image-2/text-to-image", input: { prompt: "" } },
        { model: "alpha-image-2/text-to-image", input: { prompt: "   " } },
        { model: "alpha-image-2/text-to-image", input: { prompt: "x", n: 99 } },
        { model: "alpha-image-2/text-to-image", input: { prompt: "x", model: "clip3" } },
        { model: "alpha-image-2/text-to-image", input: { prompt: "x", extra: 1 } },
        { model: "alpha-image-2/text-to-image", input: { prompt: "x" }, extra: 1 },
        { model: "alpha-image-2/text-to-image", input: { prompt: "x" }, callBackUrl: "http://127.0.0.1/hook" },
        { model: "alpha-image-2/text-to-image", input: { prompt: "x" }, callBackUrl: "ftp://example.com/hook" },
        { model: "alpha-image-2/text-to-image", input: { prompt: "x" }, user_id: 5 },
        { model: "alpha-image-2/image-to-image", input: { prompt: "x", imageUrls: ["http://10.0.0.1/a.png"] } },
        { model: "clip3", input: { prompt: "x", duration: 5 } },
        { model: "clip3", input: { prompt: "x", mode: "i2v" } },
        { model: "clip3_lite", input: { prompt: "x" } },
        { model: "clip3_lite", input: { prompt: "x", imageUrls: ["https://example.com/a.jpg"], mode: "r2v" } },
        [],
        "text",
        new Raw("{not json"),
        new Raw("{}", "text/plain"),
        new Raw("", "application/json"),
        new Raw(JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "x".repeat(1_100_000) } }))
      ]
      for (const body of refused) {
        const submitted = yield* api.call("POST", "/api/v1/task/submit", { body })
        const estimated = yield* estimate(body)
        const label = body instanceof Raw ? body.text.slice(0, 40) : JSON.stringify(body).slice(0, 120)
        expect([label, submitted.status]).toEqual([label, expect.toBeOneOf([400, 413])])
        expect([label, estimated.status, estimated.body]).toEqual([label, submitted.status, submitted.body])
      }
      expect(yield* taskCount).toBe(0)
      // Without a key, or with a wrong one: the same 401.
      for (const key of [null, "mg_wrong_key_0000000000"]) {
        const body = accepted[0]
        const submitted = yield* api.call("POST", "/api/v1/task/submit", { body, key })
        const estimated = yield* estimate(body, { key })
        expect([estimated.status, estimated.body]).toEqual([401, submitted.body])
      }
      // A GET is 405, as on submit's path (not the query of a task named "estimate").
      const get = yield* api.call("GET", "/api/v1/task/estimate")
      expect([get.status, get.body.code, get.headers["allow"]]).toEqual([405, 405, "POST"])
    }).pipe(Effect.provide(testServer())))

  it.effect("creates no task and holds nothing; an Idempotency-Key is ignored; moderation is not asked", () =>
    Effect.gen(function*() {
      const before = yield* account
      for (const body of accepted) expect((yield* estimate(body)).status).toBe(200)
      // The same key with two bodies, which a submit would answer 422: each is estimated.
      const headers = { "idempotency-key": "estimate-1" }
      expect((yield* estimate(accepted[0], { headers })).status).toBe(200)
      expect((yield* estimate(accepted[1], { headers })).status).toBe(200)
      // A prompt moderation flags: estimated all the same; the submit is refused by moderation.
      const flagged = { model: "alpha-image-2/text-to-image", input: { prompt: "x [sim:moderation]" } }
      expect((yield* estimate(flagged)).status).toBe(200)
      expect((yield* api.call("POST", "/api/v1/task/submit", { body: flagged })).body.msg).toBe("content rejected by moderation")
      expect(yield* taskCount).toBe(0)
      const after = yield* account
      expect(after).toEqual(before)
      // The key is still free for a submit with another body.
      expect((yield* api.submit(accepted[1]!, { headers })).status).toBe(200)
    }).pipe(Effect.provide(testServer())))

  it.effect("an account without credits estimates; its submit then fails with INSUFFICIENT_POINTS", () =>
    Effect.gen(function*() {
      expect((yield* account).available_micro_usd).toBe(0)
      const answer = yield* estimate(accepted[0])
      expect(answer.status).toBe(200)
      expect(answer.body.data.priceMicroUsd).toBe(80_000)
      expect(answer.body.data.priceUsd).toBe("0.080000")
      const task = yield* query(yield* api.submitId(accepted[0]!))
      expect([task.status, task.failure_reason]).toEqual(["FAILURE", "INSUFFICIENT_POINTS"])
    }).pipe(Effect.provide(testServer({ credits: 0 }))))

  it.effect("a body a model's rule accepts and then fails (motion's mediaUrls counts) is priced, with the message it would fail with", () =>
    Effect.gen(function*() {
      const mediaUrls = Array.from({ length: 3 }, (_, i) => `https://example.com/${i}.png`)
      const body = { model: "motion-1.5-pro", input: { prompt: "x", mediaUrls } }
      const answer = yield* estimate(body)
      expect(answer.status).toBe(200)
      const task = yield* query(yield* api.submitId(body))
      expect([task.status, task.failure_reason]).toEqual(["FAILURE", "INVALID_PARAMETERS"])
      expect(answer.body.data.rejection).toBe(task.error)
    }).pipe(Effect.provide(testServer())))
})
