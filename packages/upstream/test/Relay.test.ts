/**
 * The relay adapter against a loopback fake of a gateway of this spec: the client's request
 * passed on, the envelope read, 400s kept as the client's (moderation, validation), its
 * failure_reason passed through, TIMEOUT and CANCELLED there, cancel. The two-process
 * relay (mediagate in front of mediagate) is `test/relay.test.ts`. Last, a call that hangs,
 * for every adapter.
 */
import type { HttpClient } from "@effect/platform"
import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Ids } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryMediaStore } from "@mediagate/store-memory"
import { Fal, OpenAiImages, Relay, Replicate } from "@mediagate/upstream"
import { Duration, Effect, Layer } from "effect"
import * as FakeServer from "./fakes/FakeServer.js"

const tasks = new Map<string, Record<string, unknown>>()
let gateway: FakeServer.FakeServer
beforeAll(async () => {
  gateway = await FakeServer.start((request, url) => {
    if (request.headers.authorization !== "Bearer gw-key") return { status: 401, body: { code: 401, msg: "unauthorized" } }
    if (request.method === "POST" && url.pathname === "/api/v1/task/submit") {
      const body = FakeServer.json(request)
      if (body.input.prompt === "nude") {
        return { status: 400, body: { code: 400, msg: "content rejected by moderation", data: { flagged: true, categories: { sexual: true } } } }
      }
      if (body.input.n === 99) return { status: 400, body: { code: 400, msg: "input.n must be at most 10" } }
      const taskId = `down-${tasks.size + 1}`
      tasks.set(taskId, { taskId, status: "PENDING", prompt: body.input.prompt })
      return { status: 200, body: { code: 0, msg: "ok", data: { taskId } } }
    }
    const one = /^\/api\/v1\/task\/([^/]+)(\/cancel)?$/.exec(url.pathname)
    const task = one === null ? undefined : tasks.get(one[1]!)
    if (task === undefined) return { status: 404, body: { code: 404, msg: "task not found" } }
    if (one![2] === "/cancel") return { status: 200, body: { code: 0, msg: "ok", data: { ...task, status: "CANCELLED" } } }
    return { status: 200, body: { code: 0, msg: "ok", data: task } }
  })
})
afterAll(() => gateway.close())

const relay = () => Relay.make({ baseUrl: gateway.url, key: "gw-key" })
const run = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient>) => Effect.runPromise(Effect.provide(effect, FetchHttpClient.layer))
const request = { model: "alpha-image-2/text-to-image", prompt: "a lighthouse", n: 2 }
const submit = (input: Record<string, unknown>) =>
  relay().submit({ job: Testing.job(), model: "alpha-image-2/text-to-image" }, input, { taskId: Ids.TaskId.make("t1"), idempotencyKey: "t1.1", request: input })
const poll = (id: string) => relay().poll(Ids.UpstreamId.make(id), { job: Testing.job({ n: 2 }), model: "alpha-image-2/text-to-image" })

describe("relay adapter", () => {
  it("passes the client's request on as {model, input} and polls the task it got", async () => {
    const submitted = await run(submit(Relay.defaultInput(Testing.job(), request)))
    expect(submitted).toEqual({ _tag: "Accepted", upstreamId: "down-1" })
    expect(FakeServer.json(gateway.requests.at(-1)!)).toEqual({ model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse", n: 2 } })
    expect(await run(poll("down-1"))).toEqual({ _tag: "Running" })
    tasks.set("down-1", { ...tasks.get("down-1"), status: "SUCCESS", result: { type: "image", urls: ["https://down/a.png", "https://down/b.png"] } })
    expect(await run(poll("down-1"))).toEqual({ _tag: "Completed", result: { type: "image", urls: ["https://down/a.png", "https://down/b.png"] } })
  })

  it("a running task's progress there is its progress here: queue_position, percent, logs_tail (bounded); null or absent is none", async () => {
    await run(submit(Relay.defaultInput(Testing.job(), request)))
    const id = `down-${tasks.size}`
    const at = (progress: unknown) => tasks.set(id, { ...tasks.get(id), status: "RUNNING", progress })
    at({ stage: "queued", queue_position: 3, percent: null, logs_tail: [], updated_at: "2026-01-01T00:00:00Z" })
    expect(await run(poll(id))).toEqual({ _tag: "Running", progress: { queuePosition: 3 } })
    at({ stage: "running", queue_position: null, percent: 45, logs_tail: ["Using seed 42", " 45%|████▌     | 9/20"], updated_at: "2026-01-01T00:00:02Z" })
    expect(await run(poll(id))).toEqual({ _tag: "Running", progress: { percent: 45, logs: ["Using seed 42", " 45%|████▌     | 9/20"] } })
    // Lines it did not bound are bounded here; its logs are never parsed again for a percent.
    at({ stage: "running", logs_tail: Array.from({ length: 30 }, (_, i) => (i === 29 ? " 50%|█████     | 10/20" : "y".repeat(700))) })
    const long = await run(poll(id))
    expect(long).toMatchObject({ _tag: "Running", progress: { logs: expect.any(Array) } })
    const logs = (long as { progress: { logs: ReadonlyArray<string> } }).progress.logs
    expect([logs.length, Math.max(...logs.map((line) => line.length))]).toEqual([20, 500])
    expect(long).not.toHaveProperty("progress.percent")
    // What is not a queue position or a percent is not known.
    at({ stage: "running", queue_position: -2, percent: 140, logs_tail: [7] })
    expect(await run(poll(id))).toEqual({ _tag: "Running" })
    at(null)
    expect(await run(poll(id))).toEqual({ _tag: "Running" })
    tasks.set(id, { taskId: id, status: "RUNNING" })
    expect(await run(poll(id))).toEqual({ _tag: "Running" })
  })

  it("an input without a model is sent with the target's", async () => {
    await run(relay().submit({ job: Testing.job(), model: "beta-imagine/text-to-image-lite" }, { prompt: "p" }, { taskId: Ids.TaskId.make("t2"), idempotencyKey: "t2.1", request: {} }))
    expect(FakeServer.json(gateway.requests.at(-1)!)).toEqual({ model: "beta-imagine/text-to-image-lite", input: { prompt: "p" } })
  })

  it("its moderation refusal is CONTENT_MODERATION, its validation error INVALID_PARAMETERS, a wrong key permanent", async () => {
    expect(await run(Effect.flip(submit({ ...request, prompt: "nude" })))).toMatchObject({ reason: "CONTENT_MODERATION", retryable: false })
    const invalid = await run(Effect.flip(submit({ ...request, n: 99 })))
    expect(invalid).toMatchObject({ reason: "INVALID_PARAMETERS", retryable: false })
    expect(invalid.message).toContain("input.n must be at most 10")
    const wrong = Relay.make({ baseUrl: gateway.url, key: "nope" })
    const error = await run(Effect.flip(wrong.submit({ job: Testing.job(), model: "m" }, request, { taskId: Ids.TaskId.make("t"), idempotencyKey: "t.1", request })))
    expect(error).toMatchObject({ reason: null, retryable: false })
  })

  it("its FAILURE passes failure_reason and error through; TIMEOUT and CANCELLED end the attempt with no class", async () => {
    for (const reason of ["INSUFFICIENT_POINTS", "CONTENT_MODERATION", "INVALID_PARAMETERS", null] as const) {
      tasks.set("down-f", { taskId: "down-f", status: "FAILURE", failure_reason: reason, error: "the upstream said no" })
      const error = await run(Effect.flip(poll("down-f")))
      expect(error).toMatchObject({ reason, retryable: false })
      expect(error.message).toContain("the upstream said no")
    }
    for (const status of ["TIMEOUT", "CANCELLED"]) {
      tasks.set("down-e", { taskId: "down-e", status, failure_reason: null })
      expect(await run(Effect.flip(poll("down-e")))).toMatchObject({ reason: null, retryable: false, message: expect.stringContaining(status) })
    }
  })

  it("5xx and 429 there are transient; cancel reaches its cancel endpoint", async () => {
    gateway.failNext({ status: 503, body: { code: 503, msg: "service unavailable" } })
    expect(await run(Effect.flip(poll("down-1")))).toMatchObject({ retryable: true })
    gateway.failNext({ status: 429, body: { code: 429, msg: "slow down" }, headers: { "retry-after": "2" } })
    expect(await run(Effect.flip(poll("down-1")))).toMatchObject({ retryable: true, retryAfterMs: 2_000 })
    await run(relay().cancel!(Ids.UpstreamId.make("down-1"), { job: Testing.job(), model: "m" }))
    expect(gateway.requests.at(-1)).toMatchObject({ method: "POST", path: "/api/v1/task/down-1/cancel" })
  })
})

describe("every adapter, a call that hangs", () => {
  it("is ended by the engine's time limit, and the connection is let go", async () => {
    const media = MemoryMediaStore.layer({ baseUrl: "https://cdn.test/" }).pipe(Layer.provide(Ids.layer))
    const openai = await Effect.runPromise(Effect.provide(OpenAiImages.make({ key: "k", baseUrl: gateway.url }), media))
    const providers = [
      relay(),
      Replicate.make({ token: "gw-key", baseUrl: gateway.url }),
      Fal.make({ key: "gw-key", baseUrl: gateway.url }),
      openai
    ]
    for (const provider of providers) {
      gateway.failNext("hang")
      const outcome = await run(
        provider.submit({ job: Testing.job(), model: "m/x" }, { model: "m", prompt: "x" }, { taskId: Ids.TaskId.make("t"), idempotencyKey: "t.1", request: {} }).pipe(
          Effect.timeoutOption(Duration.millis(200))
        )
      )
      expect(outcome._tag, provider.name).toBe("None")
    }
  })
})
