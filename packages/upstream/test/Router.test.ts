/**
 * Routing and failover: the circuit breaker's states under the TestClock, route matching,
 * and the engine moving a task to the next provider target (fal down, Replicate up) as a new
 * attempt, both attempts visible; an open circuit sends the next task straight on.
 */
import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Ids, ModelCatalog, TaskServiceAlone, TaskStore, Upstream, UpstreamError } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { Engine } from "@mediagate/scheduler"
import { MemoryTaskStore } from "@mediagate/store-memory"
import { CircuitBreaker, Fal, Replicate, Router } from "@mediagate/upstream"
import { Context, Effect, Layer, Option, Ref, TestClock } from "effect"
import * as FakeFal from "./fakes/FakeFal.js"
import * as FakeReplicate from "./fakes/FakeReplicate.js"

const transient = new UpstreamError({ message: "503", reason: null, retryable: true })
const permanent = new UpstreamError({ message: "422", reason: "INVALID_PARAMETERS", retryable: false })

describe("CircuitBreaker", () => {
  it.effect("opens after the threshold of transient failures, refuses without calling, half-opens after the cool-down", () =>
    Effect.gen(function*() {
      const breaker = CircuitBreaker.make({ threshold: 3, coolDown: "30 seconds" })
      const calls = yield* Ref.make(0)
      const call = (outcome: "ok" | "transient" | "permanent") =>
        Ref.update(calls, (n) => n + 1).pipe(Effect.zipRight(outcome === "ok" ? Effect.succeed("ok") : Effect.fail(outcome === "transient" ? transient : permanent)))
      for (let i = 0; i < 3; i++) yield* Effect.flip(breaker.run("fal:m", call("transient")))
      expect(yield* breaker.status("fal:m")).toBe("Open")
      const refused = yield* Effect.flip(breaker.run("fal:m", call("ok")))
      expect(refused).toMatchObject({ circuitOpen: true, retryable: true })
      expect(yield* Ref.get(calls)).toBe(3)
      // Other targets are not affected.
      expect(yield* breaker.run("replicate:m", call("ok"))).toBe("ok")
      // Polls of accepted jobs pass whatever the state; an answer shows the provider is up.
      expect(yield* breaker.run("fal:m", call("ok"), false)).toBe("ok")
      expect(yield* breaker.status("fal:m")).toBe("Closed")
      for (let i = 0; i < 3; i++) yield* Effect.flip(breaker.run("fal:m", call("transient")))
      expect(yield* breaker.status("fal:m")).toBe("Open")

      yield* TestClock.adjust("29 seconds")
      expect(yield* Effect.flip(breaker.run("fal:m", call("ok")))).toMatchObject({ circuitOpen: true })
      yield* TestClock.adjust("1 second")
      // Half-open: one trial; a failed trial opens it again for another cool-down.
      yield* Effect.flip(breaker.run("fal:m", call("transient")))
      expect(yield* breaker.status("fal:m")).toBe("Open")
      yield* TestClock.adjust("30 seconds")
      expect(yield* breaker.run("fal:m", call("ok"))).toBe("ok")
      expect(yield* breaker.status("fal:m")).toBe("Closed")
    }))

  it.effect("while the trial runs other calls are refused; a permanent answer shows the provider is up and closes it", () =>
    Effect.gen(function*() {
      const breaker = CircuitBreaker.make({ threshold: 1, coolDown: "10 seconds" })
      yield* Effect.flip(breaker.run("t", Effect.fail(transient)))
      yield* TestClock.adjust("10 seconds")
      const trial = yield* Effect.fork(breaker.run("t", Effect.sleep("5 seconds").pipe(Effect.zipRight(Effect.fail(permanent)))))
      yield* TestClock.adjust("1 second")
      expect(yield* breaker.status("t")).toBe("HalfOpen")
      expect(yield* Effect.flip(breaker.run("t", Effect.succeed(1)))).toMatchObject({ circuitOpen: true })
      yield* TestClock.adjust("5 seconds")
      yield* Effect.flip(trial.await.pipe(Effect.flatten))
      expect(yield* breaker.status("t")).toBe("Closed")
    }))
})

let fal: Awaited<ReturnType<typeof FakeFal.start>>
let replicate: Awaited<ReturnType<typeof FakeReplicate.start>>
beforeAll(async () => {
  fal = await FakeFal.start({ key: "fal-key" })
  replicate = await FakeReplicate.start({ token: "r8" })
})
afterAll(() => Promise.all([fal.close(), replicate.close()]))

const routes: ReadonlyArray<Router.Route> = [{
  model: "alpha-image-2",
  targets: [
    { provider: "fal", model: "fal-ai/flux/dev", input: (job) => ({ prompt: job.prompt }) },
    { provider: "replicate", model: "black-forest-labs/flux-dev", input: (job) => ({ prompt: job.prompt }) }
  ]
}]
/** The routes with a limit of two jobs at once on the fal target, which a second model's route uses too. */
const limited: ReadonlyArray<Router.Route> = [
  { model: "alpha-image-2", targets: [{ ...routes[0]!.targets[0]!, maxRunning: 2 }, routes[0]!.targets[1]!] },
  { model: "beta-imagine", targets: [routes[0]!.targets[0]!] }
]
const router = (options: Partial<Router.Options> = {}) =>
  Router.layer({
    routes,
    providers: [Fal.make({ key: "fal-key", baseUrl: fal.url }), Replicate.make({ token: "r8", baseUrl: replicate.url })],
    circuit: { threshold: 3, coolDown: "1 minute" },
    ...options
  }).pipe(Layer.provide(FetchHttpClient.layer))

describe("Router", () => {
  it.effect("routes by model and mode, names targets, fails over in order, and fails unrouted models with a message", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream.Upstream
      const job = Testing.job({ sync: false })
      expect(upstream.describe!(job)).toBe("fal:fal-ai/flux/dev")
      const second = upstream.failover!(job)!
      expect(second.target).toBe(1)
      expect(upstream.describe!(second)).toBe("replicate:black-forest-labs/flux-dev")
      expect([upstream.provider!(job), upstream.provider!(second)]).toEqual(["fal", "replicate"])
      expect(upstream.failover!(second)).toBeUndefined()
      const other = Testing.job({ model: "canvas-2" })
      expect(upstream.failover!(other)).toBeUndefined()
      expect(upstream.describe!(other)).toBe("unrouted")
      // No provider limit applies to what the router does not route (the simulator names none).
      expect(upstream.provider!(other)).toBeNull()
      const error = yield* Effect.flip(upstream.submit(other, { taskId: Ids.TaskId.make("t"), idempotencyKey: "t.1", request: {} }))
      expect(error).toMatchObject({ retryable: false, message: "no provider is configured for model canvas-2" })
    }).pipe(Effect.provide(router())))

  it.effect("a route for model/mode wins over the model's", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream.Upstream
      expect(upstream.describe!(Testing.job({ mode: "image-to-image" }))).toBe("replicate:edit")
      expect(upstream.describe!(Testing.job({ mode: "text-to-image" }))).toBe("fal:fal-ai/flux/dev")
    }).pipe(Effect.provide(router({
      routes: [...routes, { model: "alpha-image-2/image-to-image", targets: [{ provider: "replicate", model: "edit", input: () => ({}) }] }]
    }))))

  it.effect("a target with maxRunning counts its jobs under its name and its provider; a failover moves them to the next target's count", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream.Upstream
      const job = Testing.job({ sync: false })
      expect(upstream.targetLimits).toEqual({ "fal:fal-ai/flux/dev": { maxRunning: 2, provider: "fal" } })
      expect(upstream.provider!(job)).toBe("fal:fal-ai/flux/dev")
      expect(upstream.provider!(upstream.failover!(job)!)).toBe("replicate")
      // The limit is the target's in every route that names it.
      expect(upstream.provider!(Testing.job({ model: "beta-imagine" }))).toBe("fal:fal-ai/flux/dev")
      const conflicting = yield* Effect.exit(Effect.scoped(Layer.build(router({
        routes: [...limited, { model: "motion-2.0", targets: [{ ...limited[0]!.targets[0]!, maxRunning: 3 }] }]
      }))))
      expect(String(conflicting._tag === "Failure" ? conflicting.cause : "")).toContain("fal:fal-ai/flux/dev has maxRunning 2 in one route and 3")
    }).pipe(Effect.provide(router({ routes: limited }))))

  it.effect("a route naming a provider that is not configured stops the start", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Layer.build(router({ routes: [{ model: "x", targets: [{ provider: "nope", model: "m", input: () => ({}) }] }] })))
      expect(exit._tag).toBe("Failure")
      expect(String(exit._tag === "Failure" ? exit.cause : "")).toContain(`names provider "nope", which is not configured`)
    }).pipe(Effect.scoped))
})

/** Lets loopback I/O complete between TestClock steps. */
const turns = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))).pipe(Effect.repeatN(20))

describe("failover through the engine", () => {
  it.scoped("fal down: the task retries there, then runs on Replicate as attempt 2; an open circuit sends the next task straight to Replicate", () =>
    Effect.gen(function*() {
      const store = yield* Layer.build(MemoryTaskStore.layer)
      const tasks = Context.get(store, TaskStore.TaskStore)
      fal.failNext({ status: 503, body: { detail: "no capacity" } }, { path: /^\/fal-ai\/flux\/dev$/, times: 1_000 })
      const job = Testing.job({ sync: false })
      yield* tasks.create(Testing.record({ id: "first", job }))
      yield* Layer.build(
        Engine.layer({ pollInterval: "1 second", firstPollDelay: "100 millis", retry: { baseDelay: 1_000, maxDelay: 1_000, maxTransientFailures: 2 } }).pipe(
          Layer.provide(TaskServiceAlone.writes),
          Layer.provide([router(), Ids.layerTest, ModelCatalog.layer, Layer.succeedContext(store)])
        )
      )
      const settle = (id: string) =>
        Effect.gen(function*() {
          for (let i = 0; i < 200; i++) {
            yield* turns
            const task = Option.getOrThrow(yield* tasks.get(Ids.TaskId.make(id)))
            if (task.dueAt === null) return task
            yield* TestClock.adjust("250 millis")
          }
          throw new Error(`task ${id} did not end`)
        })
      const first = yield* settle("first")
      expect(first.status).toBe("SUCCESS")
      expect(first.result?.urls).toEqual(["https://replicate.delivery/out-0.webp"])
      expect(first.provider).toBe("replicate")
      expect(first.attempts.map((a) => [a.number, a.provider, a.outcome, a.transientFailures])).toEqual([
        [1, "fal:fal-ai/flux/dev", "failed", 3],
        [2, "replicate:black-forest-labs/flux-dev", "succeeded", 0]
      ])
      const falSubmits = fal.requests.filter((r) => r.method === "POST").length
      expect(falSubmits).toBe(3)

      // Three transient failures in a row opened fal's circuit: the next task is not sent there.
      yield* tasks.create(Testing.record({ id: "second", job, createdAt: 10_000 }))
      const second = yield* settle("second")
      expect(second.status).toBe("SUCCESS")
      expect(second.attempts.map((a) => [a.provider, a.outcome])).toEqual([
        ["fal:fal-ai/flux/dev", "failed"],
        ["replicate:black-forest-labs/flux-dev", "succeeded"]
      ])
      expect(second.attempts[0]!.error).toContain("circuit is open")
      expect(fal.requests.filter((r) => r.method === "POST").length).toBe(falSubmits)
    }))
})

describe("Router and progress", () => {
  const bar = " 45%|████▌     | 9/20 [00:02<00:02,  4.12it/s]"
  let queued: Awaited<ReturnType<typeof FakeFal.start>>
  let logging: Awaited<ReturnType<typeof FakeReplicate.start>>
  beforeAll(async () => {
    queued = await FakeFal.start({ key: "fal-key", queued: 2, steps: 9 })
    logging = await FakeReplicate.start({ token: "r8", processing: 5, logs: () => `${bar}\n` })
  })
  afterAll(() => Promise.all([queued.close(), logging.close()]))

  it.effect("a provider's progress passes through the router (and its circuit breaker), on the first target and after a failover", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream.Upstream
      const context = { taskId: Ids.TaskId.make("t"), idempotencyKey: "t.1", request: {} }
      const job = Testing.job({ sync: false })
      const onFal = yield* upstream.submit(job, context)
      if (onFal._tag !== "Accepted") return expect.fail("fal accepts")
      expect(yield* upstream.poll(onFal.upstreamId, job)).toEqual({ _tag: "Running", progress: { queuePosition: 2 } })
      const next = upstream.failover!(job)!
      const onReplicate = yield* upstream.submit(next, { ...context, idempotencyKey: "t.2" })
      if (onReplicate._tag !== "Accepted") return expect.fail("Replicate accepts")
      expect(yield* upstream.poll(onReplicate.upstreamId, next)).toEqual({ _tag: "Running", progress: { percent: 45, logs: [bar] } })
    }).pipe(Effect.provide(Router.layer({
      routes,
      providers: [Fal.make({ key: "fal-key", baseUrl: queued.url }), Replicate.make({ token: "r8", baseUrl: logging.url })]
    }).pipe(Layer.provide(FetchHttpClient.layer)))))
})
