/**
 * How `run` waits, on the TestClock against a fake server (an HttpClient answering like
 * mediagate): it follows the task's events stream, and each change shows when the server
 * sends it; a stream that breaks is opened again, and one that cannot be had leaves it
 * polling. Polling, a server that holds `?wait=N` queries is asked again at once after each
 * hold; one that answers at once is polled after 0.5 s, 1 s, 2 s, 4 s, then every 5 s,
 * starting again from 0.5 s when the status changes; the timeout gives up with RunTimeout.
 */
import { HttpClient, HttpClientResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Clock, type Duration, Effect, Fiber, Layer, Stream, TestClock } from "effect"
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

/** The answer of a server without the events stream (an older mediagate). */
const noEvents = (request: Parameters<typeof HttpClientResponse.fromWeb>[0]) =>
  HttpClientResponse.fromWeb(request, Response.json({ code: 404, msg: "not found" }, { status: 404 }))

/**
 * A fake mediagate that holds `?wait=N` queries (when `holds`) until the task ends or N
 * seconds pass; with `refusesHolds`, it answers every held query 429, as mediagate does when
 * the key holds too many already. It has no events stream (404).
 */
const fakeServer = (options: { readonly holds: boolean; readonly endsAt: number; readonly refusesHolds?: boolean; readonly progress?: boolean }) => {
  const seen: Array<Seen> = []
  const client = HttpClient.make((request, url) =>
    Effect.gen(function*() {
      if (url.pathname.endsWith("/events")) return noEvents(request)
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

/** A slow clip3 task as its events stream tells it: queue positions from 2 s, a percent from 10 s, the end at 20 s. */
interface Progress {
  readonly stage: string
  readonly queue_position: number | null
  readonly percent: number | null
  readonly logs_tail: ReadonlyArray<string>
  readonly updated_at: string
}

const timeline: ReadonlyArray<{ readonly at: number; readonly status: string; readonly progress: Progress | null }> = [
  { at: 0, status: "PENDING", progress: null },
  { at: 500, status: "PROCESSING", progress: null },
  ...[4, 3, 2, 1].map((position, i) => ({ at: 2_000 + i * 2_000, status: "PROCESSING", progress: queuedAt(2_000 + i * 2_000, position) })),
  ...[0, 50].map((percent, i) => ({ at: 10_000 + i * 4_000, status: "PROCESSING", progress: { ...progressAt(10_000 + i * 4_000), percent } })),
  { at: 18_000, status: "PROCESSING", progress: { ...progressAt(18_000), stage: "finishing", percent: 100 } },
  { at: 20_000, status: "SUCCESS", progress: { ...progressAt(18_000), stage: "finishing", percent: 100 } }
]

function queuedAt(millis: number, position: number): Progress {
  return { ...progressAt(millis), stage: "queued", queue_position: position, percent: null }
}

/** The index in `timeline` of the task as it is at `millis`. */
const indexAt = (millis: number) => timeline.filter((entry) => entry.at <= millis).length - 1

const wire = (index: number) => ({ ...task(timeline[index]!.status), progress: timeline[index]!.progress })

/** How a connection to the events stream goes: the stream (breaking at `breaksAt` when given), or an error status. */
type Connection = { readonly stream: true; readonly breaksAt?: number; readonly silent?: boolean } | { readonly status: number }

/**
 * A fake mediagate whose events stream tells `timeline` as mediagate does (the task at once
 * and at each change of status, `progress` events between), each connection as `connections`
 * says (the last one for any further), and which holds `?wait=N` queries.
 */
const streamingServer = (connections: ReadonlyArray<Connection>) => {
  const queries: Array<readonly [number, string | null]> = []
  const opened: Array<number> = []
  const encoder = new TextEncoder()
  const client = HttpClient.make((request, url) =>
    Effect.gen(function*() {
      const at = yield* Clock.currentTimeMillis
      if (request.method === "POST") return HttpClientResponse.fromWeb(request, Response.json({ code: 0, msg: "ok", data: { taskId } }))
      if (url.pathname.endsWith("/events")) {
        expect(request.headers["authorization"]).toBe("Bearer the-key")
        const connection = connections[Math.min(opened.length, connections.length - 1)]!
        opened.push(at)
        if ("status" in connection) {
          return HttpClientResponse.fromWeb(request, Response.json({ code: connection.status, msg: "unavailable" }, { status: connection.status }))
        }
        const first = indexAt(at)
        const events = Stream.range(first, timeline.length - 1).pipe(
          Stream.mapEffect((index) =>
            Effect.gen(function*() {
              const entry = timeline[index]!
              yield* Effect.sleep(Math.max(0, entry.at - (yield* Clock.currentTimeMillis)))
              const taskEvent = index === first || timeline[index - 1]!.status !== entry.status
              return taskEvent
                ? `event: task\ndata: ${JSON.stringify(wire(index))}\n\n`
                : `event: progress\ndata: ${JSON.stringify({ taskId, status: entry.status, progress: entry.progress })}\n\n`
            })
          ),
          // A comment between events, as the server's keep-alive.
          Stream.intersperse(": keep-alive\n\n")
        )
        const breaking = connection.silent === true
          ? Stream.never
          : connection.breaksAt === undefined
          ? events
          : Stream.merge(events, Stream.fromEffect(Effect.sleep(connection.breaksAt - at)).pipe(Stream.flatMap(() => Stream.fail(new Error("connection reset")))))
        const body = yield* Stream.toReadableStreamEffect(breaking.pipe(Stream.map((text) => encoder.encode(text))))
        return HttpClientResponse.fromWeb(request, new Response(body, { headers: { "content-type": "text/event-stream" } }))
      }
      const wait = url.searchParams.get("wait")
      queries.push([at, wait])
      if (wait !== null) yield* Effect.sleep(Math.min(Number(wait) * 1000, Math.max(0, timeline.at(-1)!.at - at)))
      return HttpClientResponse.fromWeb(request, Response.json({ code: 0, msg: "ok", data: wire(indexAt(yield* Clock.currentTimeMillis)) }))
    })
  )
  return { queries, opened, layer: Layer.succeed(HttpClient.HttpClient, client) }
}

/** Lets what the fake server wrote through a web ReadableStream reach the client (promises, not the Clock). */
const settle = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))).pipe(Effect.repeatN(3))

/** Runs `run` against `server` for `millis` of TestClock time, 100 ms at a time; answers the outcome and what onProgress saw, with the time it saw it. */
const follow = (server: ReturnType<typeof streamingServer>, millis: number) =>
  Effect.gen(function*() {
    const seen: Array<{ readonly at: number; readonly index: number }> = []
    const fiber = yield* Effect.fork(Effect.flatMap(
      MediagateClient.make({ baseUrl: "http://mediagate.test", apiKey: "the-key" }),
      (client) =>
        client.run("clip3", { prompt: "a paper boat" }, {
          onProgress: (t, p) =>
            Effect.map(Clock.currentTimeMillis, (at) => {
              const index = timeline.findIndex((entry) => entry.status === t.status && entry.progress?.updated_at === p?.updated_at)
              seen.push({ at, index })
            })
        })
    ).pipe(Effect.provide(server.layer)))
    for (let at = 0; at < millis; at += 100) {
      yield* settle
      yield* TestClock.adjust("100 millis")
    }
    yield* settle
    return { exit: yield* Fiber.await(fiber), seen }
  })

/** Every change of `timeline` showed within 2 s: by then onProgress had seen it, or a later state. */
const everyChangeWithin2s = (seen: ReadonlyArray<{ readonly at: number; readonly index: number }>) => {
  expect(seen.every(({ index }) => index >= 0)).toBe(true)
  for (const [index, entry] of timeline.entries()) {
    const shown = seen.filter(({ at }) => at <= entry.at + 2_000).at(-1)
    expect({ change: index, at: entry.at, shown: shown?.index ?? null }).toEqual({ change: index, at: entry.at, shown: expect.any(Number) })
    expect(shown!.index, `the change at ${entry.at} ms`).toBeGreaterThanOrEqual(index)
  }
}

describe("run follows the events stream", () => {
  it.effect("each queue position and percent shows when the server sends it, with no query", () =>
    Effect.gen(function*() {
      const server = streamingServer([{ stream: true }])
      const { exit, seen } = yield* follow(server, 25_000)
      expect(exit._tag).toBe("Success")
      everyChangeWithin2s(seen)
      // Each change once, at the time the server sent it.
      expect(seen).toEqual(timeline.map((entry, index) => ({ at: entry.at, index })))
      expect(server.opened).toEqual([0])
      expect(server.queries).toEqual([])
    }))

  it.effect("a stream that breaks is opened again; one that cannot be had (503) leaves the client polling, changes within 2 s", () =>
    Effect.gen(function*() {
      const server = streamingServer([{ stream: true, breaksAt: 3_000 }, { status: 503 }])
      const { exit, seen } = yield* follow(server, 25_000)
      expect(exit._tag).toBe("Success")
      everyChangeWithin2s(seen)
      // Broken at 3 s, opened again 0.5 s later (503), then queries: one at once, holds of 2 s (the task reports progress).
      expect(server.opened).toEqual([0, 3_500])
      expect(server.queries.slice(0, 3)).toEqual([[3_500, null], [3_500, "2"], [5_500, "2"]])
      expect(seen.at(-1)).toEqual({ at: 20_000, index: timeline.length - 1 })
    }))

  it.effect("a stream that breaks is opened again 0.5 s later and followed on, with no query", () =>
    Effect.gen(function*() {
      const server = streamingServer([{ stream: true, breaksAt: 3_000 }, { stream: true }])
      const { exit, seen } = yield* follow(server, 25_000)
      expect(exit._tag).toBe("Success")
      everyChangeWithin2s(seen)
      expect(server.opened).toEqual([0, 3_500])
      expect(server.queries).toEqual([])
    }))

  it.effect("a stream that gives nothing in 5 s (a proxy holding it back) leaves the client polling", () =>
    Effect.gen(function*() {
      const server = streamingServer([{ stream: true, silent: true }])
      const { exit, seen } = yield* follow(server, 25_000)
      expect(exit._tag).toBe("Success")
      expect(server.opened).toEqual([0])
      expect(server.queries[0]).toEqual([5_000, null])
      expect(seen.at(-1)).toEqual({ at: 20_000, index: timeline.length - 1 })
    }))

  it.effect("a server without the stream (404) is polled from the start", () =>
    Effect.gen(function*() {
      const server = streamingServer([{ status: 404 }])
      const { exit, seen } = yield* follow(server, 25_000)
      expect(exit._tag).toBe("Success")
      expect(server.opened).toEqual([0])
      expect(server.queries[0]).toEqual([0, null])
      expect(seen.at(-1)).toEqual({ at: 20_000, index: timeline.length - 1 })
    }))
})
