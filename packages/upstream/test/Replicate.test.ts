/**
 * The Replicate adapter against a loopback fake of its predictions API: output URLs (one,
 * several, a video), `Prefer: wait` (with `data:` outputs stored in the MediaStore), versions,
 * failed, canceled and aborted predictions, error classes, 429 with Retry-After, cancel, and
 * an idempotent resubmit.
 */
import type { HttpClient } from "@effect/platform"
import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { Task, UpstreamError } from "@mediagate/core"
import { Ids, MediaError, MediaStore } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryMediaStore } from "@mediagate/store-memory"
import { Png, Replicate } from "@mediagate/upstream"
import { Effect, Option } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as FakeReplicate from "./fakes/FakeReplicate.js"
import * as Drive from "./fakes/Drive.js"
import * as FakeServer from "./fakes/FakeServer.js"

const end = (p: FakeReplicate.Prediction): FakeReplicate.End =>
  p.input["prompt"] === "nsfw" ? { error: "NSFW content detected. Try running it again, or try a different prompt." }
  : p.input["prompt"] === "broken" ? { error: "CUDA out of memory" }
  : p.input["prompt"] === "aborted" ? { aborted: true }
  : p.input["prompt"] === "huge" ? { output: [`data:image/png;base64,${Buffer.alloc(64 * 1024).toString("base64")}`] }
  : p.model === "minimax/video-01" ? { output: "https://replicate.delivery/clip.mp4" }
  : { output: Array.from({ length: Number(p.input["num_outputs"] ?? 1) }, (_, i) => `https://replicate.delivery/out-${i}.webp`) }

let fake: Awaited<ReturnType<typeof FakeReplicate.start>>
/** A Replicate that answers `Prefer: wait` with data: URIs. */
let inline: Awaited<ReturnType<typeof FakeReplicate.start>>
beforeAll(async () => {
  fake = await FakeReplicate.start({ token: "r8_token", end })
  inline = await FakeReplicate.start({
    token: "r8_token",
    dataUris: true,
    end: (p) => p.input["prompt"] === "huge" ? end(p) : { output: ["https://replicate.delivery/out-0.png", "https://replicate.delivery/out-1.webp"] }
  })
})
afterAll(() => Promise.all([fake.close(), inline.close()]))

const replicate = (options: Partial<Replicate.Options> = {}) => Replicate.make({ token: "r8_token", baseUrl: fake.url, ...options })
const context = (key: string) => ({ taskId: Ids.TaskId.make("t1"), idempotencyKey: key, request: {} })
const run = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient>) => Effect.runPromise(Effect.provide(effect, FetchHttpClient.layer))
const fail = <A>(effect: Effect.Effect<A, UpstreamError, HttpClient.HttpClient>) => run(Effect.flip(effect))

const generate = (job: Task.UpstreamJob, model: string, input: Record<string, unknown>, key: string, options: Partial<Replicate.Options> = {}) =>
  Drive.generate(replicate(options), job, model, input, key)

describe("Replicate adapter", () => {
  it("creates a prediction on the model with the token and polls it to its output", async () => {
    const result = await run(generate(Testing.job({ sync: false }), "black-forest-labs/flux-schnell", { prompt: "a cat" }, "k1"))
    expect(result).toEqual({ type: "image", urls: ["https://replicate.delivery/out-0.webp"] })
    const create = fake.requests.find((r) => r.headers["idempotency-key"] === "k1")!
    expect(create.path).toBe("/v1/models/black-forest-labs/flux-schnell/predictions")
    expect(create.headers.authorization).toBe("Bearer r8_token")
    expect(FakeServer.json(create)).toEqual({ input: { prompt: "a cat" } })
  })

  it("several outputs, a single-URL video output, and a versioned model", async () => {
    expect((await run(generate(Testing.job({ sync: false, n: 4 }), "o/m", { prompt: "x", num_outputs: 4 }, "k-four"))).urls).toHaveLength(4)
    expect(await run(generate(Testing.job({ sync: false, output: "video" }), "minimax/video-01", { prompt: "x" }, "k-video")))
      .toEqual({ type: "video", urls: ["https://replicate.delivery/clip.mp4"] })
    await run(generate(Testing.job({ sync: false }), "o/m:5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa", { prompt: "x" }, "k-version"))
    const versioned = fake.requests.find((r) => r.headers["idempotency-key"] === "k-version")!
    expect(versioned.path).toBe("/v1/predictions")
    expect(FakeServer.json(versioned)).toMatchObject({ version: "5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa" })
  })

  it("with wait, a short job comes back finished from the submit itself", async () => {
    const outcome = await run(replicate({ wait: 30 }).submit({ job: Testing.job(), model: "o/m" }, { prompt: "x" }, context("k-wait")))
    expect(outcome).toEqual({ _tag: "Completed", result: { type: "image", urls: ["https://replicate.delivery/out-0.webp"] } })
    expect(fake.requests.find((r) => r.headers["idempotency-key"] === "k-wait")!.headers.prefer).toBe("wait=30")
  })

  it("with wait, data: outputs are decoded and stored in the MediaStore; the task gets our URLs, never a data: URI", async () => {
    const cdn = "https://cdn.example/media/"
    const program = Effect.gen(function*() {
      const provider = yield* Replicate.makeWithStore({ token: "r8_token", baseUrl: inline.url, wait: 60 })
      const outcome = yield* provider.submit({ job: Testing.job({ n: 2 }), model: "o/m" }, { prompt: "x", num_outputs: 2 }, context("k-data"))
      if (outcome._tag !== "Completed") throw new Error("expected a finished prediction")
      expect(outcome.result.urls).toHaveLength(2)
      expect(outcome.result.urls.every((url) => url.startsWith(cdn))).toBe(true)
      const [png, webp] = yield* Effect.forEach(outcome.result.urls, (url) => Effect.flatMap(MediaStore.MediaStore, (media) => media.get(url.slice(cdn.length))))
      expect(Option.getOrThrow(png!).contentType).toBe("image/png")
      expect(Png.readPngSize(Option.getOrThrow(png!).bytes)).toEqual({ width: 64, height: 64 })
      expect(Option.getOrThrow(webp!).contentType).toBe("image/webp")
      // Past the size limit the attempt fails, permanently, naming the limit.
      const small = Replicate.make({ token: "r8_token", baseUrl: inline.url, wait: 60, media: yield* MediaStore.MediaStore, maxDataBytes: 1024 })
      const huge = yield* Effect.flip(small.submit({ job: Testing.job(), model: "o/m" }, { prompt: "huge" }, context("k-huge")))
      expect(huge).toMatchObject({ retryable: false, reason: null, message: expect.stringContaining("larger than 1024 bytes") })
    })
    await Effect.runPromise(program.pipe(Effect.provide(MemoryMediaStore.layer({ baseUrl: cdn })), Effect.provide(FetchHttpClient.layer)))
    expect(inline.requests.find((r) => r.headers["idempotency-key"] === "k-data")!.headers.prefer).toBe("wait=60")
  })

  it("with wait, a prediction whose data: outputs could not be stored (the MediaStore down) is accepted and polled, never created again", async () => {
    const cdn = "https://cdn.example/media/"
    const program = Effect.gen(function*() {
      const media = yield* MediaStore.MediaStore
      let puts = 0
      // The first file the adapter stores fails, as a store that is down for a moment.
      const flaky: MediaStore.MediaStore["Type"] = {
        ...media,
        put: (file) => ++puts === 1 ? Effect.fail(new MediaError({ message: "the bucket answered 503" })) : media.put(file)
      }
      const provider = Replicate.make({ token: "r8_token", baseUrl: inline.url, wait: 60, media: flaky })
      const work = { job: Testing.job({ n: 2 }), model: "o/m" }
      const submitted = yield* provider.submit(work, { prompt: "x", num_outputs: 2 }, context("k-data-store-down"))
      if (submitted._tag !== "Accepted") throw new Error(`expected the prediction accepted, got ${submitted._tag}`)
      const polled = yield* provider.poll(submitted.upstreamId, work)
      if (polled._tag !== "Completed") throw new Error("expected the finished prediction")
      return polled.result.urls
    })
    const urls = await Effect.runPromise(program.pipe(Effect.provide(MemoryMediaStore.layer({ baseUrl: cdn })), Effect.provide(FetchHttpClient.layer)))
    expect(urls).toHaveLength(2)
    expect(urls.every((url) => url.startsWith(cdn))).toBe(true)
    expect(inline.requests.filter((r) => r.method === "POST" && r.headers["idempotency-key"] === "k-data-store-down")).toHaveLength(1)
  })

  it("without a MediaStore, a data: output fails the attempt instead of reaching the client", async () => {
    const error = await fail(Replicate.make({ token: "r8_token", baseUrl: inline.url, wait: 60 }).submit({ job: Testing.job() , model: "o/m" }, { prompt: "x" }, context("k-data-nostore")))
    expect(error).toMatchObject({ retryable: false, reason: null, message: expect.stringContaining("without a MediaStore") })
  })

  it("an aborted prediction ends the attempt, like a canceled one", async () => {
    const error = await fail(generate(Testing.job({ sync: false }), "o/m", { prompt: "aborted" }, "k-aborted"))
    expect(error).toMatchObject({ retryable: false, reason: null, message: expect.stringContaining("aborted") })
  })

  it("an input the model does not take is INVALID_PARAMETERS with Replicate's words", async () => {
    const error = await fail(replicate().submit({ job: Testing.job(), model: "o/m" }, { prompt: "x", num_outputs: 9 }, context("k-invalid")))
    expect(error).toMatchObject({ reason: "INVALID_PARAMETERS", retryable: false, message: expect.stringContaining("num_outputs") })
  })

  it("a failed prediction: NSFW is CONTENT_MODERATION, anything else permanent with no class", async () => {
    expect(await fail(generate(Testing.job({ sync: false }), "o/m", { prompt: "nsfw" }, "k-nsfw"))).toMatchObject({ reason: "CONTENT_MODERATION", retryable: false })
    const broken = await fail(generate(Testing.job({ sync: false }), "o/m", { prompt: "broken" }, "k-broken"))
    expect(broken).toMatchObject({ reason: null, retryable: false })
    expect(broken.message).toContain("CUDA out of memory")
  })

  it.each([
    [401, { detail: "Invalid token" }, { reason: null, retryable: false }],
    [402, { detail: "Insufficient credit" }, { reason: null, retryable: false }],
    [422, { detail: "- input.width: Must be a multiple of 64" }, { reason: "INVALID_PARAMETERS", retryable: false }],
    [500, { detail: "Internal server error" }, { reason: null, retryable: true }],
    [502, "Bad gateway", { reason: null, retryable: true }]
  ] as const)("a submit answered %i is classified", async (status, body, expected) => {
    fake.failNext({ status, body })
    expect(await fail(replicate().submit({ job: Testing.job(), model: "o/m" }, { prompt: "x" }, context(`k-${status}`)))).toMatchObject(expected)
  })

  it("429 is transient with Retry-After, on a poll as on a submit", async () => {
    const submitted = await run(replicate().submit({ job: Testing.job({ sync: false }), model: "o/m" }, { prompt: "x" }, context("k-poll429")))
    if (submitted._tag !== "Accepted") throw new Error("expected a prediction")
    fake.failNext({ status: 429, body: { detail: "Request was throttled. Expected available in 3 seconds." }, headers: { "retry-after": "3" } })
    expect(await fail(replicate().poll(submitted.upstreamId, { job: Testing.job(), model: "o/m" }))).toMatchObject({ retryable: true, retryAfterMs: 3_000 })
  })

  it("cancel cancels the prediction; a canceled prediction ends the attempt", async () => {
    const provider = replicate()
    const submitted = await run(provider.submit({ job: Testing.job({ sync: false }), model: "o/m" }, { prompt: "x" }, context("k-cancel")))
    if (submitted._tag !== "Accepted") throw new Error("expected a prediction")
    await run(provider.cancel!(submitted.upstreamId, { job: Testing.job(), model: "o/m" }))
    expect(fake.predictions.get(submitted.upstreamId)!.cancelled).toBe(true)
    expect(await fail(provider.poll(submitted.upstreamId, { job: Testing.job(), model: "o/m" }))).toMatchObject({ retryable: false, message: expect.stringContaining("canceled") })
  })

  it("a resubmit with the same idempotency key finds the same prediction", async () => {
    const provider = replicate()
    const first = await run(provider.submit({ job: Testing.job({ sync: false }), model: "o/m" }, { prompt: "x" }, context("t7.1")))
    const again = await run(provider.submit({ job: Testing.job({ sync: false }), model: "o/m" }, { prompt: "x" }, context("t7.1")))
    expect(again).toEqual(first)
    expect([...fake.predictions.values()].filter((p) => p.input["prompt"] === "x" && p.id === (first as { upstreamId: string }).upstreamId)).toHaveLength(1)
  })
})

describe("Replicate progress", () => {
  /** A model's logs by the prediction's gets: a line, then tqdm bars, as cog streams them. */
  const printed = [
    "Using seed: 42",
    "  0%|          | 0/4 [00:00<?, ?it/s]",
    " 50%|█████     | 2/4 [00:00<00:00,  4.12it/s]",
    "100%|██████████| 4/4 [00:00<00:00,  4.30it/s]"
  ]
  let logging: Awaited<ReturnType<typeof FakeReplicate.start>>
  beforeAll(async () => {
    logging = await FakeReplicate.start({
      token: "r8_token",
      processing: 3,
      logs: (p) => (p.input["prompt"] === "quiet" ? "" : `${printed.slice(0, p.gets + 1).join("\n")}\n`)
    })
  })
  afterAll(() => logging.close())

  const polls = async (prompt: string, count: number, options: Partial<Replicate.Options> = {}, webhookUrl?: string) => {
    const provider = Replicate.make({ token: "r8_token", baseUrl: logging.url, webhookSecret: logging.webhookSecret, ...options })
    const work = { job: Testing.job({ sync: false }), model: "o/m" }
    const submitted = await run(provider.submit(work, { prompt }, { ...context(`k-progress-${prompt}`), ...(webhookUrl === undefined ? {} : { webhookUrl }) }))
    if (submitted._tag !== "Accepted") return expect.fail("Replicate accepts")
    const outcomes: Array<unknown> = []
    for (let i = 0; i < count; i++) outcomes.push(await run(provider.poll(submitted.upstreamId, work)))
    return { provider, outcomes, id: submitted.upstreamId }
  }

  it("a running prediction's logs are its progress lines, with the percent of the last bar line; no queue position", async () => {
    const { outcomes } = await polls("a cat", 4)
    expect(outcomes.slice(0, 3)).toEqual([
      { _tag: "Running", progress: { percent: 0, logs: printed.slice(0, 2) } },
      { _tag: "Running", progress: { percent: 50, logs: printed.slice(0, 3) } },
      { _tag: "Running", progress: { percent: 100, logs: printed } }
    ])
    expect(outcomes[3]).toMatchObject({ _tag: "Completed" })
  })

  it("no logs is no progress", async () => {
    const { outcomes } = await polls("quiet", 1)
    expect(outcomes).toEqual([{ _tag: "Running" }])
  })

  it("a logs webhook (when asked for) is genuine, so it wakes the task, and the poll it causes carries the progress", async () => {
    const received: Array<{ headers: Record<string, string>; body: Buffer }> = []
    const receiver = Http.createServer((request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        received.push({ headers: Object.fromEntries(Object.entries(request.headers).map(([k, v]) => [k, String(v)])), body: Buffer.concat(chunks) })
        response.writeHead(200).end()
      })
    })
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/replicate/t1`
      const { id, provider } = await polls("a dog", 1, { webhookEvents: ["logs", "completed"] }, url)
      expect(FakeServer.json(logging.requests.find((r) => r.method === "POST" && r.headers["idempotency-key"] === "k-progress-a dog")!))
        .toMatchObject({ webhook: url, webhook_events_filter: ["logs", "completed"] })
      expect(await logging.logged(id)).toBe(200)
      const event = received[0]!
      expect(await run(provider.verifyWebhook!({ provider: "replicate", token: "t1", headers: event.headers, body: new Uint8Array(event.body) }))).toBe(true)
      expect(await run(provider.poll(id, { job: Testing.job({ sync: false }), model: "o/m" }))).toEqual({
        _tag: "Running",
        progress: { percent: 50, logs: printed.slice(0, 3) }
      })
      // By default only the end is asked for: a logs event is never sent.
      const quiet = await polls("a bird", 0, {}, url)
      expect(await logging.logged(quiet.id)).toBeUndefined()
    } finally {
      await new Promise<void>((resolve) => receiver.close(() => resolve()))
    }
  })
})
