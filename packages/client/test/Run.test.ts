/**
 * How `run` waits, on the TestClock against a fake server (an HttpClient answering like
 * mediagate): a server that holds `?wait=N` queries is asked again at once after each
 * hold; one that answers at once is polled after 0.5 s, 1 s, 2 s, 4 s, then every 5 s,
 * starting again from 0.5 s when the status changes; the timeout gives up with RunTimeout.
 */
import { HttpClient, HttpClientResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Clock, type Duration, Effect, Fiber, Layer, TestClock } from "effect"
import { MediagateClient, RunTimeout } from "../src/index.js"

const taskId = "01900000-0000-7000-8000-000000000000"

/** The task's status at `millis` of virtual time: PENDING, PROCESSING from 2 s, SUCCESS from `endsAt`. */
const statusAt = (millis: number, endsAt: number) => (millis >= endsAt ? "SUCCESS" : millis >= 2_000 ? "PROCESSING" : "PENDING")

/** A task's progress at `millis` while it runs: a percent per second, as a server that reports progress shows it. */
const progressAt = (millis: number) => ({
  stage: "running",
  queue_position: null,
  percent: Math.floor(millis / 1000),
  logs_tail: [`at ${Math.floor(millis / 1000)} s`],
  updated_at: new Date(Math.floor(millis / 1000) * 1000).toISOString()
})

const task = (status: string, progress?: ReturnType<typeof progressAt>) => ({
  ...(progress === undefined ? {} : { progress }),
  taskId,
  status,
  input: { model: "dream-4", prompt: "a koi pond" },
  result: status === "SUCCESS" ? { type: "image", urls: ["https://example.com/a.png"] } : null,
  failure_reason: null,
  created_at: "2025-01-01T00:00:00.000Z",
  updated_at: "2025-01-01T00:00:00.000Z",
  adjustments: [],
  error: null,
  attempts: [],
  price_micro_usd: 1
})

interface Seen {
  readonly at: number
  readonly wait: string | null
  readonly authorization: string | undefined
}

/**
 * A fake mediagate that holds `?wait=N` queries (when `holds`) until the task ends or N
 * seconds pass; with `refusesHolds`, it answers every held query 429, as mediagate does when
 * the key holds too many already.
 */
const fakeServer = (options: { readonly holds: boolean; readonly endsAt: number; readonly refusesHolds?: boolean; readonly progress?: boolean }) => {
  const seen: Array<Seen> = []
  const client = HttpClient.make((request, url) =>
    Effect.gen(function*() {
      const at = yield* Clock.currentTimeMillis
      const wait = url.searchParams.get("wait")
      seen.push({ at, wait, authorization: request.headers["authorization"] })
      if (request.method === "POST") {
        return HttpClientResponse.fromWeb(request, Response.json({ code: 0, msg: "ok", data: { taskId } }))
      }
      if (options.refusesHolds === true && wait !== null && wait !== "0") {
        return HttpClientResponse.fromWeb(
          request,
          Response.json({ code: 429, msg: "too many held requests for this key; try again later" }, { status: 429, headers: { "retry-after": "5" } })
        )
      }
      if (options.holds && wait !== null) {
        const until = Math.min(at + Number(wait) * 1000, Math.max(at, options.endsAt))
        yield* Effect.sleep(until - at)
      }
      const now = yield* Clock.currentTimeMillis
      const status = statusAt(now, options.endsAt)
      const progress = options.progress === true && status === "PROCESSING" ? progressAt(now) : undefined
      return HttpClientResponse.fromWeb(request, Response.json({ code: 0, msg: "ok", data: task(status, progress) }))
    })
  )
  return { seen, layer: Layer.succeed(HttpClient.HttpClient, client) }
}

const run = (server: ReturnType<typeof fakeServer>, options: { readonly timeout?: Duration.DurationInput } = {}) =>
  Effect.gen(function*() {
    const client = yield* MediagateClient.make({ baseUrl: "http://mediagate.test", apiKey: "the-key" })
    const statuses: Array<string> = []
    const fiber = yield* Effect.fork(
      client.run("dream-4", { prompt: "a koi pond" }, { onProgress: (t) => void statuses.push(t.status), ...options })
    )
    yield* TestClock.adjust("2 minutes")
    return { exit: yield* Fiber.await(fiber), statuses }
  }).pipe(Effect.provide(server.layer))

describe("run", () => {
  it.effect("onProgress: called with each change of progress; while the task reports it, holds are 2 s at most", () =>
    Effect.gen(function*() {
      const server = fakeServer({ holds: true, endsAt: 30_000, progress: true })
      const seen: Array<readonly [string, number | null]> = []
      const fiber = yield* Effect.fork(Effect.flatMap(
        MediagateClient.make({ baseUrl: "http://mediagate.test", apiKey: "the-key" }),
        (client) => client.run("dream-4", { prompt: "a koi pond" }, { onProgress: (t, p) => void seen.push([t.status, p?.percent ?? null]) })
      ).pipe(Effect.provide(server.layer)))
      yield* TestClock.adjust("1 minute")
      expect((yield* Fiber.await(fiber))._tag).toBe("Success")
      // The first hold (20 s, nothing reported yet) answers PROCESSING at 20 s with progress;
      // from then on holds of 2 s, each answering a new percent, until the end at 30 s.
      expect(seen).toEqual([["PENDING", null], ["PROCESSING", 20], ["PROCESSING", 22], ["PROCESSING", 24], ["PROCESSING", 26], ["PROCESSING", 28], ["SUCCESS", null]])
      expect(server.seen.slice(2).map(({ at, wait }) => [at, wait])).toEqual([[0, "20"], [20_000, "2"], [22_000, "2"], [24_000, "2"], [26_000, "2"], [28_000, "2"]])
    }))

  it.effect("onProgress: a server that answers at once shows every change of progress, each percent once", () =>
    Effect.gen(function*() {
      const server = fakeServer({ holds: false, endsAt: 12_000, progress: true })
      const seen: Array<readonly [string, number | null]> = []
      const fiber = yield* Effect.fork(Effect.flatMap(
        MediagateClient.make({ baseUrl: "http://mediagate.test", apiKey: "the-key" }),
        (client) => client.run("dream-4", { prompt: "a koi pond" }, { onProgress: (t, p) => void seen.push([t.status, p?.percent ?? null]) })
      ).pipe(Effect.provide(server.layer)))
      yield* TestClock.adjust("1 minute")
      expect((yield* Fiber.await(fiber))._tag).toBe("Success")
      const percents = seen.filter(([status]) => status === "PROCESSING").map(([, percent]) => percent)
      expect(percents.length).toBeGreaterThan(2)
      expect(new Set(percents).size).toBe(percents.length)
      expect(percents).toEqual([...percents].sort((a, b) => a! - b!))
      expect(seen.at(-1)).toEqual(["SUCCESS", null])
    }))

  it.effect("a server that holds queries: asked again at once after each hold, until the end", () =>
    Effect.gen(function*() {
      const server = fakeServer({ holds: true, endsAt: 50_000 })
      const { exit, statuses } = yield* run(server)
      expect(exit._tag).toBe("Success")
      // The hold that ends at 20 s answers PROCESSING; the one from 40 s answers at the end.
      expect(statuses).toEqual(["PENDING", "PROCESSING", "SUCCESS"])
      // The submit, one query answered at once, then holds of 20 s until the end at 50 s.
      expect(server.seen.map(({ at, wait }) => [at, wait])).toEqual([[0, null], [0, null], [0, "20"], [20_000, "20"], [40_000, "20"]])
      expect(new Set(server.seen.map((s) => s.authorization))).toEqual(new Set(["Bearer the-key"]))
    }))

  it.effect("a server that answers at once: polled with backoff from 0.5 s doubling to 5 s, again from 0.5 s on a change", () =>
    Effect.gen(function*() {
      const server = fakeServer({ holds: false, endsAt: 30_000 })
      const { exit, statuses } = yield* run(server)
      expect(exit._tag).toBe("Success")
      expect(statuses).toEqual(["PENDING", "PROCESSING", "SUCCESS"])
      const queries = server.seen.slice(1).map(({ at }) => at)
      // 0: at once, then +0.5 +1 (1.5 s) +2 (3.5 s: PROCESSING, a change) +0.5 +1 +2 +4 +5 +5 +5 ... to 30 s.
      expect(queries).toEqual([0, 0, 500, 1_500, 3_500, 4_000, 5_000, 7_000, 11_000, 16_000, 21_000, 26_000, 31_000])
    }))

  it.effect("the timeout gives up with RunTimeout carrying the task as last seen", () =>
    Effect.gen(function*() {
      const server = fakeServer({ holds: true, endsAt: 90_000 })
      const { exit } = yield* run(server, { timeout: "30 seconds" })
      const failure = yield* Effect.flip(exit)
      expect(failure).toBeInstanceOf(RunTimeout)
      expect(failure).toMatchObject({ taskId, task: { status: "PROCESSING" } })
      // Nothing more is asked once it gave up.
      expect(server.seen.at(-1)!.at).toBeLessThanOrEqual(30_000)
    }))

  it.effect("a server that refuses held queries (429): polled with backoff instead, never a failure", () =>
    Effect.gen(function*() {
      const server = fakeServer({ holds: true, endsAt: 10_000, refusesHolds: true })
      const { exit, statuses } = yield* run(server)
      expect(exit._tag).toBe("Success")
      expect(statuses).toEqual(["PENDING", "PROCESSING", "SUCCESS"])
      // At once, one held query refused, then plain queries: +0.5 +1 +2 (3.5 s: PROCESSING) +0.5 +1 +2 +4 (11 s).
      expect(server.seen.slice(1).map(({ at, wait }) => [at, wait])).toEqual([
        [0, null],
        [0, "20"],
        [500, null],
        [1_500, null],
        [3_500, null],
        [4_000, null],
        [5_000, null],
        [7_000, null],
        [11_000, null]
      ])
    }))
})
