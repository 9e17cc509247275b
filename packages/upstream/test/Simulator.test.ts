/**
 * The simulator under the TestClock, with an in-test media store.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, MediaError, MediaStore, Moderation, Upstream, UpstreamError } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import type { Task } from "@mediagate/core"
import { Effect, Fiber, Layer, Option, Stream, TestClock } from "effect"
import { Png, SimulatedModeration, Simulator } from "../src/index.js"

const files = new Map<string, MediaStore.MediaObject>()
const media = Layer.succeed(MediaStore.MediaStore, {
  put: (object) =>
    Effect.sync(() => {
      const key = `f${files.size}.${object.extension}`
      files.set(key, object)
      return `https://cdn.test/${key}`
    }),
  get: (key) => Effect.sync(() => Option.fromNullable(files.get(key))),
  // Nothing here serves files over HTTP.
  stat: () => Effect.succeedNone,
  stream: () => Stream.empty,
  // Nor takes uploads.
  putStream: () => Effect.fail(new MediaError({ message: "this test's store takes no uploads" })),
  remove: () => Effect.void
})

const job = (overrides: Partial<Task.UpstreamJob> = {}) =>
  Testing.job({ prompt: "a cat", n: 2, ratio: "21:9", width: 2016, height: 864, priceMicroUsd: 40_000, ...overrides })

const simulator = (profile: Simulator.Profile) =>
  Simulator.layer({ profile, seed: 1 }).pipe(Layer.provide([media, Ids.layerTest]))

const withUpstream = <A, E>(profile: Simulator.Profile, f: (upstream: Upstream.Upstream["Type"]) => Effect.Effect<A, E>) =>
  Effect.flatMap(Upstream.Upstream, f).pipe(Effect.provide(simulator(profile)))

const sizeOf = (url: string) => Png.readPngSize(files.get(url.split("/").pop()!)!.bytes)

describe("Simulator", () => {
  it.effect("demo: a sync job finishes only after its latency (2 to 4 s), with n PNGs of the job's size", () =>
    withUpstream("demo", (upstream) =>
      Effect.gen(function*() {
        const fiber = yield* Effect.fork(upstream.submit(job(), { taskId: Ids.TaskId.make("task-1"), idempotencyKey: "task-1.1", request: {} }))
        yield* TestClock.adjust("1999 millis")
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        yield* TestClock.adjust("2001 millis")
        const outcome = yield* Fiber.join(fiber)
        expect(outcome._tag).toBe("Completed")
        if (outcome._tag !== "Completed") return
        expect(outcome.result.type).toBe("image")
        expect(outcome.result.urls).toHaveLength(2)
        for (const url of outcome.result.urls) expect(sizeOf(url)).toEqual({ width: 2016, height: 864 })
      })))

  it("latency is deterministic per task and seed, within the profile's range", () => {
    const a = Simulator.latencyMillis({ profile: "demo", seed: 1 }, job(), "task-a")
    expect(Simulator.latencyMillis({ profile: "demo", seed: 1 }, job(), "task-a")).toBe(a)
    expect(a).toBeGreaterThanOrEqual(2_000)
    expect(a).toBeLessThanOrEqual(4_000)
    expect(Simulator.latencyMillis({ profile: "instant" }, job(), "task-a")).toBe(0)
    const realistic = Simulator.latencyMillis({ profile: "realistic" }, job(), "task-a")
    expect(realistic).toBeGreaterThanOrEqual(5_000)
    expect(realistic).toBeLessThanOrEqual(20_000)
    expect(Simulator.latencyMillis({ profile: "demo", seed: 1 }, job({ prompt: "x [sim:slow]" }), "task-a")).toBe(a * 10)
  })

  it("without a ratio it picks 1:1, or 16:9 at 4k", () => {
    expect(Simulator.pixelSize(job({ ratio: null, width: null, height: null, resolution: "2k" }))).toEqual([2048, 2048])
    expect(Simulator.pixelSize(job({ ratio: null, width: null, height: null, resolution: "4k" }))).toEqual([3840, 2160])
  })

  for (const [marker, reason] of [["[sim:fail]", null], ["[sim:rejected]", "CONTENT_MODERATION"], ["[sim:insufficient]", "INSUFFICIENT_POINTS"]] as const) {
    it.effect(`${marker} fails with reason ${reason}, not retryable`, () =>
      withUpstream("instant", (upstream) =>
        Effect.gen(function*() {
          const error = yield* upstream.submit(job({ prompt: `x ${marker}` }), { taskId: Ids.TaskId.make("t"), idempotencyKey: "t.1", request: {} }).pipe(Effect.flip)
          expect(error).toBeInstanceOf(UpstreamError)
          expect(error).toMatchObject({ reason, retryable: false })
        })))
  }

  it.effect("[sim:timeout] never finishes", () =>
    withUpstream("instant", (upstream) =>
      Effect.gen(function*() {
        const fiber = yield* Effect.fork(upstream.submit(job({ prompt: "x [sim:timeout]" }), { taskId: Ids.TaskId.make("t"), idempotencyKey: "t.1", request: {} }))
        yield* TestClock.adjust("1 day")
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        yield* Fiber.interrupt(fiber)
      })))

  it.effect("an async job accepted at a fractional millisecond is polled like any other (its id holds whole milliseconds)", () =>
    withUpstream("demo", (upstream) =>
      Effect.gen(function*() {
        // The TestClock stops at each sleep's end, such as a third of a 5 s heartbeat window.
        yield* TestClock.setTime(6051 + 2 / 3)
        const accepted = yield* upstream.submit(job({ sync: false, n: 1 }), { taskId: Ids.TaskId.make("t-frac"), idempotencyKey: "t-frac.1", request: {} })
        expect(accepted._tag).toBe("Accepted")
        const upstreamId = accepted._tag === "Accepted" ? accepted.upstreamId : Ids.UpstreamId.make("")
        expect(upstreamId).toMatch(/^sim_\d+_\d+_[0-9a-f]+$/)
        expect((yield* upstream.poll(upstreamId, job({ sync: false, n: 1 })))._tag).toBe("Running")
        yield* TestClock.adjust("5 seconds")
        expect((yield* upstream.poll(upstreamId, job({ sync: false, n: 1 })))._tag).toBe("Completed")
      })))

  it.effect("an async job's polls report a falling queue position, then a rising percent and log lines, from its timing alone", () =>
    withUpstream("demo", (upstream) =>
      Effect.gen(function*() {
        const video = job({ sync: false, n: 1, output: "video", duration: 5 })
        const taskId = Ids.TaskId.make("t-progress")
        const latency = Simulator.latencyMillis({ profile: "demo", seed: 1 }, video, taskId)
        const accepted = yield* upstream.submit(video, { taskId, idempotencyKey: "t-progress.1", request: {} })
        if (accepted._tag !== "Accepted") return expect.fail("not accepted")
        const seen: Array<Upstream.UpstreamProgress | undefined> = []
        for (let i = 0; i < 20; i++) {
          const polled = yield* upstream.poll(accepted.upstreamId, video)
          if (polled._tag !== "Running") break
          seen.push(polled.progress)
          yield* TestClock.adjust(Math.floor(latency / 20))
        }
        const queued = seen.filter((p) => p?.queuePosition !== undefined)
        const running = seen.filter((p) => p?.percent !== undefined)
        expect(queued.length).toBeGreaterThan(0)
        expect(queued[0]!.queuePosition).toBe(4)
        expect(queued.at(-1)!.queuePosition).toBe(1)
        // Never up, and the percent rises from 0 to under 100 (100 is the result).
        expect(queued.every((p, i) => i === 0 || p!.queuePosition! <= queued[i - 1]!.queuePosition!)).toBe(true)
        expect(running.every((p, i) => i === 0 || p!.percent! >= running[i - 1]!.percent!)).toBe(true)
        expect(running[0]!.percent).toBeLessThan(10)
        expect(running.at(-1)!.percent).toBeGreaterThan(80)
        expect(running.at(-1)!.percent).toBeLessThan(100)
        expect(running.at(-1)!.logs).toEqual(["job queued", "job started", "25% generated", "50% generated", "75% generated"])
        // Deterministic under the TestClock.
        expect(Simulator.progressAt(0, 4_000, 500)).toEqual({ queuePosition: 2, logs: ["job queued"] })
        expect(Simulator.progressAt(0, 4_000, 2_500)).toEqual({ percent: 50, logs: ["job queued", "job started", "25% generated", "50% generated"] })
        expect(Simulator.progressAt(0, 0, 0)).toBeUndefined()
      })))

  it.effect("an id from before the start was carried polls with no progress", () =>
    withUpstream("demo", (upstream) =>
      Effect.gen(function*() {
        const old = yield* upstream.poll(Ids.UpstreamId.make("sim_999999_abc1"), job({ sync: false, n: 1 }))
        expect(old).toEqual({ _tag: "Running" })
      })))

  it.effect("an async job is accepted, Running until its time, then Completed; its id needs no memory", () =>
    withUpstream("demo", (upstream) =>
      Effect.gen(function*() {
        const accepted = yield* upstream.submit(job({ sync: false, n: 1 }), { taskId: Ids.TaskId.make("t-async"), idempotencyKey: "t-async.1", request: {} })
        expect(accepted._tag).toBe("Accepted")
        if (accepted._tag !== "Accepted") return
        expect(accepted.upstreamId).toMatch(/^sim_\d+_\d+_[0-9a-f]+$/)
        expect((yield* upstream.poll(accepted.upstreamId, job({ sync: false, n: 1 })))._tag).toBe("Running")
        yield* TestClock.adjust("5 seconds")
        const done = yield* upstream.poll(accepted.upstreamId, job({ sync: false, n: 1 }))
        expect(done._tag).toBe("Completed")
        const unknown = yield* upstream.poll(Ids.UpstreamId.make("nope"), job()).pipe(Effect.flip)
        expect(unknown.retryable).toBe(false)
      })))
})

describe("Simulator: files, idempotency keys and cancels", () => {
  const counted = (stats: Simulator.Stats) =>
    <A, E>(f: (upstream: Upstream.Upstream["Type"]) => Effect.Effect<A, E>) =>
      Effect.flatMap(Upstream.Upstream, f).pipe(
        Effect.provide(Simulator.layer({ profile: "instant", seed: 1, stats }).pipe(Layer.provide([media, Ids.layerTest])))
      )
  const submit = (upstream: Upstream.Upstream["Type"], task: string, overrides: Partial<Task.UpstreamJob> = {}, attempt = 1) =>
    upstream.submit(job(overrides), { taskId: Ids.TaskId.make(task), idempotencyKey: `${task}.${attempt}`, request: {} })

  it.effect("a file of a shape and colour already made is not encoded again; each task still gets files of its own", () => {
    const stats = new Simulator.Stats()
    return counted(stats)((upstream) =>
      Effect.gen(function*() {
        const urls = new Set<string>()
        for (let i = 0; i < 40; i++) {
          const outcome = yield* submit(upstream, `t${i}`, { n: 1 })
          if (outcome._tag === "Completed") outcome.result.urls.forEach((url) => urls.add(url))
        }
        expect(urls.size).toBe(40)
        // 40 tasks of one size: at most one encode per colour variant.
        expect(stats.encodes).toBeGreaterThan(1)
        expect(stats.encodes).toBeLessThanOrEqual(8)
        for (const url of urls) expect(sizeOf(url)).toEqual({ width: 2016, height: 864 })
      }))
  })

  it.effect("the second video of a shape (size, duration) is not encoded again; another size or duration is", () => {
    const stats = new Simulator.Stats()
    const video = (width: number, height: number, duration: number) =>
      ({ output: "video", model: "beta-imagine/text-to-video", n: 1, width, height, duration }) as const
    return counted(stats)((upstream) =>
      Effect.gen(function*() {
        const first = yield* submit(upstream, "v1", video(1280, 720, 6))
        expect(stats.encodes).toBe(1)
        const second = yield* submit(upstream, "v2", video(1280, 720, 6))
        expect(stats.encodes).toBe(1)
        if (first._tag !== "Completed" || second._tag !== "Completed") return expect.unreachable()
        // Same bytes, stored twice: each task has a file (and a URL) of its own.
        expect(second.result.urls[0]).not.toBe(first.result.urls[0])
        const key = (url: string) => url.split("/").pop()!
        expect(files.get(key(second.result.urls[0]!))!.bytes).toBe(files.get(key(first.result.urls[0]!))!.bytes)
        yield* submit(upstream, "v3", video(1280, 720, 10))
        yield* submit(upstream, "v4", video(720, 1280, 6))
        expect(stats.encodes).toBe(3)
      }))
  })

  it.effect("once an image shape's colour variants exist, its further tasks encode nothing; a new size encodes", () => {
    const stats = new Simulator.Stats()
    return counted(stats)((upstream) =>
      Effect.gen(function*() {
        for (let i = 0; i < 64; i++) yield* submit(upstream, `a${i}`, { n: 1 })
        const warm = stats.encodes
        // 64 tasks spread over the 8 variants (a stable hash of the task id): every one was made.
        expect(warm).toBe(8)
        for (let i = 0; i < 200; i++) yield* submit(upstream, `b${i}`, { n: 2 })
        expect(stats.encodes).toBe(warm)
        yield* submit(upstream, "c", { n: 1, width: 1024, height: 1024 })
        expect(stats.encodes).toBe(warm + 1)
      }))
  })

  it.effect("jobs are counted per idempotency key: a repeated async submit starts none, a repeated sync call one more", () => {
    const stats = new Simulator.Stats()
    return counted(stats)((upstream) =>
      Effect.gen(function*() {
        yield* submit(upstream, "a", { sync: false })
        yield* submit(upstream, "a", { sync: false })
        yield* submit(upstream, "a", { sync: false }, 2)
        yield* submit(upstream, "s", { sync: true })
        yield* submit(upstream, "s", { sync: true })
        expect([stats.jobsFor("a.1"), stats.jobsFor("a.2"), stats.jobsFor("s.1"), stats.jobsFor("never.1")]).toEqual([1, 1, 2, 0])
        expect(stats.jobs).toBe(4)
      }))
  })

  it.effect("an async submit repeated with the same idempotency key answers the same job; the next attempt's key starts another", () => {
    const stats = new Simulator.Stats()
    return counted(stats)((upstream) =>
      Effect.gen(function*() {
        const first = yield* submit(upstream, "t1", { sync: false })
        const again = yield* submit(upstream, "t1", { sync: false })
        expect(again).toEqual(first)
        expect(stats.jobs).toBe(1)
        const next = yield* submit(upstream, "t1", { sync: false }, 2)
        expect(next).not.toEqual(first)
        expect(stats.jobs).toBe(2)
      }))
  })

  it.effect("a cancelled job is recorded, and polling it answers a permanent failure", () => {
    const stats = new Simulator.Stats()
    return counted(stats)((upstream) =>
      Effect.gen(function*() {
        const accepted = yield* submit(upstream, "t1", { sync: false, prompt: "x [sim:timeout]" })
        if (accepted._tag !== "Accepted") return expect.unreachable()
        yield* upstream.cancel!(accepted.upstreamId, job({ sync: false }))
        expect([...stats.cancelled]).toEqual([accepted.upstreamId])
        const error = yield* upstream.poll(accepted.upstreamId, job({ sync: false })).pipe(Effect.flip)
        expect([error.retryable, error.message]).toEqual([false, `upstream job ${accepted.upstreamId} was cancelled`])
      }))
  })
})

describe("SimulatedModeration", () => {
  it.effect("flags [sim:moderation] and passes the rest", () =>
    Effect.gen(function*() {
      const moderation = yield* Moderation.Moderation
      const flagged = yield* moderation.check("x [sim:moderation]")
      expect(flagged.flagged).toBe(true)
      expect(flagged.categories.violence).toBe(true)
      expect(Object.keys(flagged.categories)).toHaveLength(13)
      expect((yield* moderation.check("a cat")).flagged).toBe(false)
    }).pipe(Effect.provide(SimulatedModeration.layer)))
})
