/**
 * The simulator under the TestClock, with an in-test media store.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, MediaStore, Moderation, Upstream, UpstreamError } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import type { Task } from "@mediagate/core"
import { Effect, Fiber, Layer, Option, TestClock } from "effect"
import { Png, SimulatedModeration, Simulator } from "../src/index.js"

const files = new Map<string, MediaStore.MediaObject>()
const media = Layer.succeed(MediaStore.MediaStore, {
  put: (object) =>
    Effect.sync(() => {
      const key = `f${files.size}.${object.extension}`
      files.set(key, object)
      return `https://cdn.test/${key}`
    }),
  get: (key) => Effect.sync(() => Option.fromNullable(files.get(key)))
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
        const fiber = yield* Effect.fork(upstream.submit(job(), { taskId: Ids.TaskId.make("task-1"), idempotencyKey: "task-1.1" }))
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
          const error = yield* upstream.submit(job({ prompt: `x ${marker}` }), { taskId: Ids.TaskId.make("t"), idempotencyKey: "t.1" }).pipe(Effect.flip)
          expect(error).toBeInstanceOf(UpstreamError)
          expect(error).toMatchObject({ reason, retryable: false })
        })))
  }

  it.effect("[sim:timeout] never finishes", () =>
    withUpstream("instant", (upstream) =>
      Effect.gen(function*() {
        const fiber = yield* Effect.fork(upstream.submit(job({ prompt: "x [sim:timeout]" }), { taskId: Ids.TaskId.make("t"), idempotencyKey: "t.1" }))
        yield* TestClock.adjust("1 day")
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        yield* Fiber.interrupt(fiber)
      })))

  it.effect("an async job is accepted, Running until its time, then Completed; its id needs no memory", () =>
    withUpstream("demo", (upstream) =>
      Effect.gen(function*() {
        const accepted = yield* upstream.submit(job({ sync: false, n: 1 }), { taskId: Ids.TaskId.make("t-async"), idempotencyKey: "t-async.1" })
        expect(accepted._tag).toBe("Accepted")
        if (accepted._tag !== "Accepted") return
        expect(accepted.upstreamId).toMatch(/^sim_\d+_[0-9a-f]+$/)
        expect((yield* upstream.poll(accepted.upstreamId, job({ sync: false, n: 1 })))._tag).toBe("Running")
        yield* TestClock.adjust("5 seconds")
        const done = yield* upstream.poll(accepted.upstreamId, job({ sync: false, n: 1 }))
        expect(done._tag).toBe("Completed")
        const unknown = yield* upstream.poll(Ids.UpstreamId.make("nope"), job()).pipe(Effect.flip)
        expect(unknown.retryable).toBe(false)
      })))
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
