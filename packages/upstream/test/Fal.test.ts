/**
 * The fal adapter against a loopback fake of fal's queue API: images, several images, a
 * video, a namespaced (workflows/) endpoint, NSFW-flagged images, every error class, 429
 * with Retry-After, a connection that hangs, cancel, and a resubmit with the same
 * idempotency key.
 */
import type { HttpClient } from "@effect/platform"
import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { Task, UpstreamError } from "@mediagate/core"
import { Ids } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { Fal } from "@mediagate/upstream"
import { Duration, Effect } from "effect"
import * as FakeFal from "./fakes/FakeFal.js"
import * as Drive from "./fakes/Drive.js"
import * as FakeServer from "./fakes/FakeServer.js"

let fake: Awaited<ReturnType<typeof FakeFal.start>>
beforeAll(async () => {
  fake = await FakeFal.start({
    key: "fal-key",
    result: (job, id) =>
      job.input["prompt"] === "refused"
        ? { status: 422, body: { detail: [{ loc: ["body", "prompt"], msg: "The content could not be processed because it violates the content policy", type: "content_policy_violation" }] } }
        : job.input["prompt"] === "inline"
        ? { status: 200, body: { images: [{ url: "data:image/png;base64,iVBORw0KGgo=" }], has_nsfw_concepts: [false] } }
        : FakeFal.defaultResult(job, id, job.model.includes("video") ? "video" : "image")
  })
})
afterAll(() => fake.close())

const fal = () => Fal.make({ key: "fal-key", baseUrl: fake.url })
const context = (key: string) => ({ taskId: Ids.TaskId.make("t1"), idempotencyKey: key, request: {} })
const run = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient>) => Effect.runPromise(Effect.provide(effect, FetchHttpClient.layer))
const fail = <A>(effect: Effect.Effect<A, UpstreamError, HttpClient.HttpClient>) => run(Effect.flip(effect))

/** Submits and polls until fal says COMPLETED. */
const generate = (job: Task.UpstreamJob, model: string, input: Record<string, unknown>, key: string) =>
  Drive.generate(fal(), job, model, input, key)

describe("fal queue adapter", () => {
  it("runs an image job: submit with the key, status until COMPLETED, then the result", async () => {
    const result = await run(generate(Testing.job({ sync: false }), "fal-ai/flux/dev", { prompt: "a cat" }, "k-image"))
    expect(result.type).toBe("image")
    expect(result.urls).toHaveLength(1)
    expect(result.urls[0]).toMatch(/^https:\/\/fal\.media\/files\/req-\d+-0\.png$/)
    const submit = fake.requests.find((r) => r.method === "POST" && r.headers["idempotency-key"] === "k-image")!
    expect(submit.path).toBe("/fal-ai/flux/dev")
    expect(submit.headers.authorization).toBe("Key fal-key")
    expect(FakeServer.json(submit)).toEqual({ prompt: "a cat" })
    // Requests are addressed by the app, fal-ai/flux.
    expect(fake.requests.filter((r) => r.path.startsWith("/fal-ai/flux/requests/")).length).toBeGreaterThanOrEqual(4)
  })

  it("several images, and a video", async () => {
    const images = await run(generate(Testing.job({ sync: false, n: 3 }), "fal-ai/flux/dev", { prompt: "x", num_images: 3 }, "k-three"))
    expect(images.urls).toHaveLength(3)
    const video = await run(generate(Testing.job({ sync: false, output: "video" }), "fal-ai/kling-video/v2/master/text-to-video", { prompt: "x" }, "k-video"))
    expect(video.type).toBe("video")
    expect(video.urls[0]).toMatch(/^https:\/\/fal\.media\/files\/req-\d+\.mp4$/)
  })

  it("a workflows/ endpoint is polled, fetched and cancelled under its three-segment app, as fal's client addresses it", async () => {
    const provider = fal()
    const result = await run(generate(Testing.job({ sync: false, n: 2 }), "workflows/acme/poster-pipeline", { prompt: "a poster", num_images: 2 }, "k-workflow"))
    expect(result.urls).toHaveLength(2)
    const id = [...fake.jobs.entries()].find(([, job]) => job.model === "workflows/acme/poster-pipeline")![0]
    const paths = fake.requests.filter((r) => r.path.includes(`/requests/${id}`)).map((r) => r.path)
    expect(paths).toContain(`/workflows/acme/poster-pipeline/requests/${id}/status`)
    expect(paths).toContain(`/workflows/acme/poster-pipeline/requests/${id}`)
    expect(paths.every((path) => path.startsWith("/workflows/acme/poster-pipeline/requests/"))).toBe(true)
    const submitted = await run(provider.submit({ job: Testing.job({ sync: false }), model: "workflows/acme/poster-pipeline" }, { prompt: "x" }, context("k-workflow-cancel")))
    if (submitted._tag !== "Accepted") throw new Error("expected a request")
    await run(provider.cancel!(submitted.upstreamId, { job: Testing.job(), model: "workflows/acme/poster-pipeline" }))
    expect(fake.jobs.get(submitted.upstreamId)!.cancelled).toBe(true)
  })

  it("the app of an endpoint id follows the client's parseEndpointId", () => {
    expect(Fal.appOf("fal-ai/flux/dev")).toBe("fal-ai/flux")
    expect(Fal.appOf("fal-ai/flux")).toBe("fal-ai/flux")
    expect(Fal.appOf("workflows/acme/poster-pipeline")).toBe("workflows/acme/poster-pipeline")
    expect(Fal.appOf("comfy/acme/upscale/v2")).toBe("comfy/acme/upscale")
    expect(Fal.appOf("12345-my-app")).toBe("12345/my-app")
  })

  it("NSFW: every image flagged is CONTENT_MODERATION; flagged images among others are dropped", async () => {
    const error = await fail(generate(Testing.job({ sync: false, n: 2 }), "fal-ai/flux/dev", { prompt: "nsfw", num_images: 2 }, "k-nsfw-all"))
    expect(error).toMatchObject({ reason: "CONTENT_MODERATION", retryable: false })
    expect(error.message).toContain("has_nsfw_concepts")
    const some = await run(generate(Testing.job({ sync: false, n: 3 }), "fal-ai/flux/dev", { prompt: "first-nsfw", num_images: 3 }, "k-nsfw-first"))
    expect(some.urls).toHaveLength(2)
    expect(some.urls.every((url) => !/-0\.png$/.test(url))).toBe(true)
  })

  it("a data: URI in a result is never returned as a result URL", async () => {
    const error = await fail(generate(Testing.job({ sync: false }), "fal-ai/flux/dev", { prompt: "inline", sync_mode: true }, "k-inline"))
    expect(error).toMatchObject({ reason: null, retryable: false })
    expect(error.message).toContain("data: URIs")
  })

  it("an input the endpoint does not take is INVALID_PARAMETERS, named by fal", async () => {
    const error = await fail(fal().submit({ job: Testing.job(), model: "fal-ai/flux/dev" }, { prompt: "x", num_images: "two" }, context("k-invalid")))
    expect(error).toMatchObject({ reason: "INVALID_PARAMETERS", retryable: false })
    expect(error.message).toContain("valid integer")
  })

  it("a content-policy refusal of the job is CONTENT_MODERATION", async () => {
    const error = await fail(generate(Testing.job({ sync: false }), "fal-ai/flux/dev", { prompt: "refused" }, "k-refused"))
    expect(error).toMatchObject({ reason: "CONTENT_MODERATION", retryable: false })
  })

  it.each([
    [400, { detail: "bad image_size" }, { reason: "INVALID_PARAMETERS", retryable: false }],
    [422, { detail: [{ msg: "field required", type: "missing" }] }, { reason: "INVALID_PARAMETERS", retryable: false }],
    [401, { detail: "Invalid key" }, { reason: null, retryable: false }],
    [403, { detail: "Forbidden" }, { reason: null, retryable: false }],
    [402, { detail: "Exhausted balance" }, { reason: null, retryable: false }],
    [404, { detail: "Application not found" }, { reason: null, retryable: false }],
    [500, { detail: "Internal" }, { reason: null, retryable: true }],
    [503, "upstream connect error", { reason: null, retryable: true }]
  ] as const)("submit answered %i is classified", async (status, body, expected) => {
    fake.failNext({ status, body }, { path: /^\/fal-ai\/flux\/dev$/ })
    const error = await fail(fal().submit({ job: Testing.job(), model: "fal-ai/flux/dev" }, { prompt: "x" }, context(`k-${status}`)))
    expect(error).toMatchObject(expected)
    expect(error.message).toContain(`fal answered ${status}`)
  })

  it("429 is transient and carries Retry-After", async () => {
    fake.failNext({ status: 429, body: { detail: "Too many requests" }, headers: { "retry-after": "7" } })
    const error = await fail(fal().submit({ job: Testing.job(), model: "fal-ai/flux/dev" }, { prompt: "x" }, context("k-429")))
    expect(error).toMatchObject({ retryable: true, retryAfterMs: 7_000 })
  })

  it("a connection refused is transient; a hanging call is ended by its time limit", async () => {
    const closed = Fal.make({ key: "fal-key", baseUrl: "http://127.0.0.1:9" })
    expect(await fail(closed.submit({ job: Testing.job(), model: "fal-ai/flux/dev" }, {}, context("k-refused-conn")))).toMatchObject({ retryable: true })
    fake.failNext("hang")
    const outcome = await run(
      fal().submit({ job: Testing.job(), model: "fal-ai/flux/dev" }, { prompt: "x" }, context("k-hang")).pipe(Effect.timeoutOption(Duration.millis(300)))
    )
    expect(outcome._tag).toBe("None")
  })

  it("cancel reaches fal's cancel URL", async () => {
    const provider = fal()
    const submitted = await run(provider.submit({ job: Testing.job({ sync: false }), model: "fal-ai/flux/dev" }, { prompt: "x" }, context("k-cancel")))
    expect(submitted._tag).toBe("Accepted")
    if (submitted._tag !== "Accepted") return
    await run(provider.cancel!(submitted.upstreamId, { job: Testing.job(), model: "fal-ai/flux/dev" }))
    expect(fake.jobs.get(submitted.upstreamId)!.cancelled).toBe(true)
  })

  it("a resubmit after a crash carries the same idempotency key and gets the same request", async () => {
    const provider = fal()
    const first = await run(provider.submit({ job: Testing.job({ sync: false }), model: "fal-ai/flux/dev" }, { prompt: "x" }, context("t9.1")))
    const again = await run(provider.submit({ job: Testing.job({ sync: false }), model: "fal-ai/flux/dev" }, { prompt: "x" }, context("t9.1")))
    expect(again).toEqual(first)
    expect(fake.requests.filter((r) => r.headers["idempotency-key"] === "t9.1")).toHaveLength(2)
    const size = fake.jobs.size
    await run(provider.submit({ job: Testing.job({ sync: false }), model: "fal-ai/flux/dev" }, { prompt: "x" }, context("t9.2")))
    expect(fake.jobs.size).toBe(size + 1)
  })

  it("a 2xx without a request_id is a permanent failure naming what was missing", async () => {
    fake.failNext({ status: 200, body: { queued: true } })
    const error = await fail(fal().submit({ job: Testing.job(), model: "fal-ai/flux/dev" }, { prompt: "x" }, context("k-odd")))
    expect(error).toMatchObject({ retryable: false, reason: null })
    expect(error.message).toContain("without a request_id")
  })
})

describe("fal progress", () => {
  /** What the job has logged by each IN_PROGRESS status call: tqdm redraws after a first line. */
  const printed = [
    "Loading pipeline",
    "  0%|          | 0/20 [00:00<?, ?it/s]",
    " 45%|████▌     | 9/20 [00:02<00:02,  4.12it/s]",
    "100%|██████████| 20/20 [00:04<00:00,  4.30it/s]"
  ]
  let queue: Awaited<ReturnType<typeof FakeFal.start>>
  beforeAll(async () => {
    queue = await FakeFal.start({
      key: "fal-key",
      queued: 3,
      steps: 6,
      logs: (job, step) => (job.input["prompt"] === "quiet" ? [] : job.input["prompt"] === "chatty" ? Array.from({ length: 40 }, (_, i) => `line ${i} ${"x".repeat(600)}`) : printed.slice(0, step + 2))
    })
  })
  afterAll(() => queue.close())

  const polls = async (prompt: string, count: number) => {
    const provider = Fal.make({ key: "fal-key", baseUrl: queue.url })
    const work = { job: Testing.job({ sync: false }), model: "fal-ai/flux/dev" }
    const submitted = await run(provider.submit(work, { prompt }, context(`k-progress-${prompt}`)))
    if (submitted._tag !== "Accepted") return expect.fail("fal accepts")
    const outcomes: Array<unknown> = []
    for (let i = 0; i < count; i++) outcomes.push(await run(provider.poll(submitted.upstreamId, work)))
    return outcomes
  }

  it("queued: the queue position counts down; running: the log messages, with the percent of the last bar line", async () => {
    const outcomes = await polls("a cat", 6)
    expect(outcomes).toEqual([
      { _tag: "Running", progress: { queuePosition: 3 } },
      { _tag: "Running", progress: { queuePosition: 2 } },
      { _tag: "Running", progress: { queuePosition: 1 } },
      { _tag: "Running", progress: { percent: 0, logs: printed.slice(0, 2) } },
      { _tag: "Running", progress: { percent: 45, logs: printed.slice(0, 3) } },
      { _tag: "Running", progress: { percent: 100, logs: printed } }
    ])
    // The status is asked with its logs, as the official client's status({ logs: true }).
    expect(queue.requests.filter((r) => r.path.endsWith("/status")).every((r) => r.query === "?logs=1")).toBe(true)
  })

  it("a job that logs nothing while running has no progress; a long log passes its last 20 lines, cut to 500 characters", async () => {
    expect((await polls("quiet", 4)).at(-1)).toEqual({ _tag: "Running" })
    const chatty = (await polls("chatty", 4)).at(-1) as { progress: { logs: ReadonlyArray<string>; percent?: number } }
    expect(chatty.progress.logs).toHaveLength(20)
    expect(chatty.progress.logs[0]).toMatch(/^line 20 /)
    expect(chatty.progress.logs.every((line) => line.length === 500)).toBe(true)
    expect(chatty.progress.percent).toBeUndefined()
  })

  it("a status without queue_position or logs (an older answer) is Running with no progress", async () => {
    const provider = Fal.make({ key: "fal-key", baseUrl: queue.url })
    const work = { job: Testing.job({ sync: false }), model: "fal-ai/flux/dev" }
    const submitted = await run(provider.submit(work, { prompt: "x" }, context("k-progress-bare")))
    if (submitted._tag !== "Accepted") return expect.fail("fal accepts")
    queue.failNext({ status: 200, body: { status: "IN_PROGRESS", request_id: submitted.upstreamId, logs: null } }, { path: /\/status$/ })
    expect(await run(provider.poll(submitted.upstreamId, work))).toEqual({ _tag: "Running" })
    queue.failNext({ status: 200, body: { status: "IN_QUEUE", request_id: submitted.upstreamId, queue_position: -1 } }, { path: /\/status$/ })
    expect(await run(provider.poll(submitted.upstreamId, work))).toEqual({ _tag: "Running" })
  })
})
