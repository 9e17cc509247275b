/**
 * The providers page (`GET /api/v1/admin/providers`) over HTTP under the TestClock, on a
 * deployment whose routes run dream-4 on fal (a fake that answers 503 to every submit) and
 * then Replicate (a fake that works), the simulator taking the unrouted models: fal's circuit
 * opens after its failures, with its cool-down's end, and half-opens after it; each target's
 * latency and error rate are those of its attempts; a slow simulated task counts as running
 * against the engine's total; the limits are the routes file's and the engine's. (That only
 * the last 15 minutes' attempts count is packages/core/test/Usage.test.ts's.)
 */
import { NodeHttpServer } from "@effect/platform-node"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { MediagateHttp } from "@mediagate/http"
import { Backends, Deployment } from "@mediagate/server"
import { Effect, Layer, Option, Redacted, TestClock } from "effect"
import * as FakeFal from "../packages/upstream/test/fakes/FakeFal.js"
import * as FakeReplicate from "../packages/upstream/test/fakes/FakeReplicate.js"
import { apiKey, client } from "./support.js"

const adminKey = "mga_providers_admin_key_0123456789abcdefgh"
const api = client()
const admin = client(adminKey)

let fal: Awaited<ReturnType<typeof FakeFal.start>>
let replicate: Awaited<ReturnType<typeof FakeReplicate.start>>
beforeAll(async () => {
  fal = await FakeFal.start({ key: "fal-key" })
  replicate = await FakeReplicate.start({ token: "r8" })
})
afterAll(() => Promise.all([fal.close(), replicate.close()]))

const server = Layer.unwrapEffect(Effect.sync(() =>
  MediagateHttp.serve.pipe(
    Layer.provide(Deployment.services({
      simulatorProfile: "demo",
      allowPrivateUrls: false,
      adminKey: Option.some(Redacted.make(adminKey)),
      engine: { pollInterval: "1 second", firstPollDelay: "100 millis", retry: { baseDelay: 1_000, maxDelay: 1_000, maxTransientFailures: 2 }, maxRunning: 40 },
      routing: {
        routes: [{
          model: "dream-4",
          targets: [
            { provider: "fal", model: "fal-ai/flux/dev", input: (job) => ({ prompt: job.prompt }), maxRunning: 3 },
            { provider: "replicate", model: "black-forest-labs/flux-dev", input: (job) => ({ prompt: job.prompt }) }
          ]
        }],
        unrouted: "simulator",
        providers: {
          fal: Option.some({ key: "fal-key", baseUrl: Option.some(fal.url), jwksUrl: Option.none() }),
          replicate: Option.some({ token: "r8", baseUrl: Option.some(replicate.url), wait: Option.none(), webhookSecret: Option.none() }),
          openai: Option.none(),
          relay: Option.none()
        }
      },
      backends: Backends.memoryBackends({ publicUrl: "http://127.0.0.1:1" }, [
        { id: "acct_test", name: "test", apiKey: Redacted.make(apiKey), credits: 1_000_000_000 }
      ])
    })),
    Layer.provideMerge(NodeHttpServer.layerTest)
  )
))

/** Lets loopback I/O to the fakes complete between TestClock steps. */
const turns = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))).pipe(Effect.repeatN(20))

const statusOf = (taskId: string) => Effect.map(api.call("GET", `/api/v1/task/${taskId}`), (answer) => answer.body.data)

const untilEnded = (ids: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 400; i++) {
      yield* turns
      const tasks = yield* Effect.forEach(ids, statusOf)
      if (tasks.every((task) => ["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"].includes(task.status))) return tasks
      yield* TestClock.adjust("250 millis")
    }
    return yield* Effect.dieMessage("the tasks did not end")
  })

const providers = Effect.map(admin.call("GET", "/api/v1/admin/providers"), (answer) => {
  expect(answer.status).toBe(200)
  return new Map((answer.body.data.providers as Array<any>).map((view) => [view.name, view]))
})

describe("the providers page", () => {
  it.effect("fal failing: its circuit opens (until its cool-down's end) and half-opens after; latency and error rate per target from the attempts", () =>
    Effect.gen(function*() {
      fal.failNext({ status: 503, body: { detail: "no capacity" } }, { path: /^\/fal-ai\/flux\/dev$/, times: 1_000 })
      const before = yield* providers
      expect([...before.keys()]).toEqual(["fal:fal-ai/flux/dev", "replicate:black-forest-labs/flux-dev", "simulator"])
      expect(before.get("fal:fal-ai/flux/dev")).toMatchObject({
        provider: "fal",
        circuit: { state: "closed", until: null },
        attempts: 0,
        error_rate: null,
        latency_p50_ms: null,
        running: 0,
        limit: 3
      })
      expect(before.get("replicate:black-forest-labs/flux-dev")).toMatchObject({ provider: "replicate", limit: 100 })
      expect(before.get("simulator")).toMatchObject({ provider: null, limit: 40 })

      // Two tasks: three failed calls each on fal (5 in a row open its circuit), then Replicate.
      const first = yield* api.submitId({ model: "dream-4", input: { prompt: "a kite" } })
      yield* untilEnded([first])
      const second = yield* api.submitId({ model: "dream-4", input: { prompt: "a boat" } })
      const tasks = yield* untilEnded([first, second])
      expect(tasks.map((task) => task.status)).toEqual(["SUCCESS", "SUCCESS"])
      const attempts = tasks.flatMap((task) => task.attempts as Array<any>)
      expect(attempts.map((attempt) => [attempt.provider, attempt.outcome])).toEqual([
        ["fal:fal-ai/flux/dev", "failed"],
        ["replicate:black-forest-labs/flux-dev", "succeeded"],
        ["fal:fal-ai/flux/dev", "failed"],
        ["replicate:black-forest-labs/flux-dev", "succeeded"]
      ])

      const now = yield* TestClock.currentTimeMillis
      const open = yield* providers
      const falView = open.get("fal:fal-ai/flux/dev")
      expect(falView.circuit.state).toBe("open")
      const until = Date.parse(falView.circuit.until)
      expect(until).toBeGreaterThan(now)
      expect(until).toBeLessThanOrEqual(now + 30_000)
      expect(falView).toMatchObject({ attempts: 2, failed: 2, error_rate: 1, running: 0 })
      expect(falView.transient_failures).toBeGreaterThanOrEqual(5)
      const duration = (attempt: any) => Date.parse(attempt.ended_at) - Date.parse(attempt.started_at)
      const onReplicate = attempts.filter((attempt) => attempt.provider.startsWith("replicate")).map(duration).sort((a, b) => a - b)
      expect(open.get("replicate:black-forest-labs/flux-dev")).toMatchObject({
        circuit: { state: "closed", until: null },
        attempts: 2,
        failed: 0,
        error_rate: 0,
        latency_p50_ms: onReplicate[0],
        latency_p95_ms: onReplicate[1]
      })

      // A slow task on the simulator (an unrouted model) runs while the page is read.
      const slow = yield* api.submitId({ model: "alpha-image-2/text-to-image", input: { prompt: "a slow hill [sim:slow]" } })
      for (let i = 0; i < 20 && (yield* statusOf(slow)).status === "PENDING"; i++) {
        yield* turns
        yield* TestClock.adjust("100 millis")
      }
      expect((yield* providers).get("simulator")).toMatchObject({ circuit: { state: "closed" }, running: 1 })

      // After the cool-down the next call is a trial: half-open.
      yield* TestClock.setTime(until)
      expect((yield* providers).get("fal:fal-ai/flux/dev").circuit).toEqual({ state: "half-open", until: null })
    }).pipe(Effect.provide(server)), 60_000)
})
