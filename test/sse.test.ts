/**
 * GET /api/v1/task/{taskId}/events (additive): server-sent events over HTTP with the TestClock.
 * The task at once and at every change of status, the stream closing after the terminal one;
 * a keep-alive comment every 15 s; 404 for unknown and foreign tasks, 401 without a key.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Option, Ref, Stream, TestClock } from "effect"
import { apiKey, client, idleServer, otherApiKey, testServer } from "./support.js"

const api = client()
const followMe = { model: "dream-4", input: { prompt: "follow me" } }

const settle = Effect.gen(function*() {
  for (let i = 0; i < 30; i++) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
})

/**
 * Opens the events of a task and reads them in the background into `received` (the raw text);
 * the fiber ends when the server closes the stream.
 */
const follow = (taskId: string) =>
  Effect.gen(function*() {
    const response = yield* (yield* HttpClient.HttpClient).execute(
      HttpClientRequest.get(`/api/v1/task/${taskId}/events`).pipe(HttpClientRequest.bearerToken(apiKey))
    )
    const received = yield* Ref.make("")
    const reading = yield* response.stream.pipe(
      Stream.decodeText(),
      Stream.runForEach((text) => Ref.update(received, (all) => all + text)),
      Effect.fork
    )
    return { response, received, reading }
  })

/** The tasks of the `task` events in `text`. */
const tasksOf = (text: string) =>
  text.split("\n\n").filter((block) => block.startsWith("event: task\n")).map((block) => JSON.parse(block.slice("event: task\ndata: ".length)))

describe("GET /api/v1/task/{taskId}/events", () => {
  it.effect("sends the task at once and at each status, as the query's data, and closes after the terminal one", () =>
    Effect.gen(function*() {
      const taskId = yield* api.submitId(followMe)
      const { received, reading, response } = yield* follow(taskId)
      expect(response.status).toBe(200)
      expect(response.headers["content-type"]).toMatch(/^text\/event-stream/)
      expect(response.headers["cache-control"]).toBe("no-cache")
      let steps = 0
      while (Option.isNone(yield* Fiber.poll(reading)) && steps++ < 600) {
        yield* TestClock.adjust("100 millis")
        yield* settle
      }
      expect(Option.isSome(yield* Fiber.poll(reading))).toBe(true)
      const tasks = tasksOf(yield* Ref.get(received))
      const statuses = tasks.map((task) => task.status)
      expect(statuses[statuses.length - 1]).toBe("SUCCESS")
      // Every event is a change, in the order of the lifecycle.
      const order = ["PENDING", "SUBMITTED", "PROCESSING", "SUCCESS"]
      expect(statuses.length).toBeGreaterThanOrEqual(2)
      statuses.slice(1).forEach((status, i) => expect(order.indexOf(status)).toBeGreaterThan(order.indexOf(statuses[i]!)))
      // The last event is exactly what the query answers.
      const queried = yield* api.query(taskId)
      expect(tasks[tasks.length - 1]).toEqual(queried.body.data)
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))

  it.effect("keeps the stream alive with a comment every 15 s, and sends the cancellation at once", () =>
    Effect.gen(function*() {
      const taskId = yield* api.submitId(followMe)
      const { received, reading } = yield* follow(taskId)
      yield* settle
      expect(tasksOf(yield* Ref.get(received)).map((task) => task.status)).toEqual(["PENDING"])
      yield* TestClock.adjust("14 seconds")
      yield* settle
      expect(yield* Ref.get(received)).not.toContain(": keep-alive")
      yield* TestClock.adjust("1 second")
      yield* settle
      expect((yield* Ref.get(received)).split(": keep-alive\n\n")).toHaveLength(2)
      yield* TestClock.adjust("15 seconds")
      yield* settle
      expect((yield* Ref.get(received)).split(": keep-alive\n\n")).toHaveLength(3)
      expect(Option.isNone(yield* Fiber.poll(reading))).toBe(true)
      yield* api.call("POST", `/api/v1/task/${taskId}/cancel`)
      yield* Fiber.join(reading)
      expect(tasksOf(yield* Ref.get(received)).map((task) => task.status)).toEqual(["PENDING", "CANCELLED"])
    }).pipe(Effect.provide(idleServer)))

  it.effect("an ended task's stream is its one event; unknown and foreign tasks are 404, without a key 401", () =>
    Effect.gen(function*() {
      const taskId = yield* api.submitId(followMe)
      yield* api.call("POST", `/api/v1/task/${taskId}/cancel`)
      const { received, reading } = yield* follow(taskId)
      yield* Fiber.join(reading)
      expect(tasksOf(yield* Ref.get(received)).map((task) => task.status)).toEqual(["CANCELLED"])
      expect(yield* api.call("GET", `/api/v1/task/${taskId}/events`, { key: otherApiKey })).toEqual({ status: 404, body: { code: 404, msg: "task not found" } })
      expect(yield* api.call("GET", "/api/v1/task/0190c8a4-0000-7000-8000-000000000000/events")).toEqual({
        status: 404,
        body: { code: 404, msg: "task not found" }
      })
      expect(yield* api.call("GET", `/api/v1/task/${taskId}/events`, { key: "nope" })).toEqual({ status: 401, body: { code: 401, msg: "unauthorized" } })
      const wrong = yield* api.call("POST", `/api/v1/task/${taskId}/events`)
      expect(wrong.status).toBe(405)
    }).pipe(Effect.provide(idleServer)))

  it.effect("a slow video: the query shows its progress (queued with a falling place, then a rising percent) and the stream sends progress events, at most one per 500 ms", () =>
    Effect.gen(function*() {
      const taskId = yield* api.submitId({ model: "dream-4", input: { prompt: "a slow one [sim:slow]" } })
      const { received, reading } = yield* follow(taskId)
      const seen: Array<{ readonly stage: string; readonly queue_position: number | null; readonly percent: number | null }> = []
      let steps = 0
      while (Option.isNone(yield* Fiber.poll(reading)) && steps++ < 1_000) {
        yield* TestClock.adjust("100 millis")
        yield* settle
        if (steps % 10 === 0) {
          const queried = yield* api.query(taskId)
          const progress = queried.body.data.progress
          if (progress !== null && progress !== undefined && queried.body.data.status !== "SUCCESS") seen.push(progress)
        }
      }
      expect(Option.isSome(yield* Fiber.poll(reading))).toBe(true)
      expect(seen.some((p) => p.stage === "queued" && p.queue_position !== null && p.queue_position >= 1 && p.percent === null)).toBe(true)
      const running = seen.filter((p) => p.stage === "running")
      expect(running.length).toBeGreaterThan(1)
      expect(running.at(-1)!.percent).toBeGreaterThan(running[0]!.percent!)
      const text = yield* Ref.get(received)
      const blocks = text.split("\n\n").filter((block) => block.startsWith("event: progress\n"))
      expect(blocks.length).toBeGreaterThan(2)
      const events = blocks.map((block) => JSON.parse(block.slice("event: progress\ndata: ".length)))
      for (const e of events) {
        expect(e.taskId).toBe(taskId)
        expect(["queued", "running", "finishing"]).toContain(e.progress.stage)
        expect(Array.isArray(e.progress.logs_tail)).toBe(true)
      }
      const times = events.map((e) => Date.parse(e.progress.updated_at))
      times.slice(1).forEach((t, i) => expect(t - times[i]!).toBeGreaterThanOrEqual(500))
      // Status events are still one per status (progress adds none), in order, ending with SUCCESS.
      const statuses = tasksOf(text).map((task) => task.status)
      expect(new Set(statuses).size).toBe(statuses.length)
      expect(statuses.at(-1)).toBe("SUCCESS")
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))
})
