/**
 * The fal fake answers to fal's official client (`@fal-ai/client`): the client, pointed at
 * the fake on loopback through its `requestMiddleware` (the hook its proxy support uses),
 * drives every scenario the adapter's tests use. The client must accept each answer (queue
 * states, results, errors, cancellation, webhooks, namespaced endpoints), and the fake must
 * refuse what fal refuses, so a wrong request from the adapter fails in its tests too.
 */
import { FetchHttpClient } from "@effect/platform"
import { ApiError, createFalClient, parseEndpointId, type QueueStatus, ValidationError, type WebHookResponse } from "@fal-ai/client"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Fal, Png } from "@mediagate/upstream"
import { Effect } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as FakeFal from "../fakes/FakeFal.js"
import * as Files from "./Files.js"

let fake: Awaited<ReturnType<typeof FakeFal.start>>
beforeAll(async () => {
  fake = await FakeFal.start({
    key: "fal-key",
    result: (job, id) =>
      job.input["prompt"] === "refused"
        ? { status: 422, body: { detail: [{ loc: ["body", "prompt"], msg: "The content could not be processed because it violates the content policy", type: "content_policy_violation" }] } }
        : FakeFal.defaultResult(job, id, job.model.includes("video") ? "video" : "image")
  })
})
afterAll(() => fake.close())

/** fal's client, its every request sent to the fake instead of `https://queue.fal.run`. */
const client = (credentials = "fal-key") =>
  createFalClient({
    credentials,
    requestMiddleware: (request) => Promise.resolve({ ...request, url: request.url.replace(/^https:\/\/(queue\.)?fal\.run/, fake.url) })
  })
const cdn = () => Files.cdnFetch({ "https://fal.media": fake.url })
const download = async (url: string) => new Uint8Array(await (await cdn()(url)).arrayBuffer())
const subscribe = { mode: "polling", pollInterval: 5 } as const

describe("fal's client against FakeFal", () => {
  it("queue: submit answers IN_QUEUE; status goes IN_QUEUE, IN_PROGRESS, COMPLETED; the result holds real PNGs", async () => {
    const fal = client()
    const submitted = await fal.queue.submit("fal-ai/flux/dev", { input: { prompt: "a cat", num_images: 2 } })
    expect(submitted).toMatchObject({ status: "IN_QUEUE", request_id: expect.any(String) })
    expect(submitted.status_url).toBe(`${fake.url}/fal-ai/flux/requests/${submitted.request_id}/status`)
    const statuses: Array<QueueStatus> = []
    for (let i = 0; i < 3; i++) statuses.push(await fal.queue.status("fal-ai/flux/dev", { requestId: submitted.request_id, logs: i === 1 }))
    expect(statuses.map((s) => s.status)).toEqual(["IN_QUEUE", "IN_PROGRESS", "COMPLETED"])
    expect(statuses[0]).toMatchObject({ queue_position: 0 })
    expect(statuses[1]).toMatchObject({ logs: [] })
    const result = await fal.queue.result("fal-ai/flux/dev", { requestId: submitted.request_id })
    expect(result.requestId).toBe(submitted.request_id)
    expect(result.data.images).toHaveLength(2)
    expect(result.data.has_nsfw_concepts).toEqual([false, false])
    const png = await download(result.data.images[0]!.url)
    expect(png.subarray(0, 8)).toEqual(Png.signature)
    expect(Png.readPngSize(png)).toEqual({ width: 64, height: 64 })
  })

  it("subscribe: every update is one the client knows; a video result is a real MP4", async () => {
    const updates: Array<string> = []
    const result = await client().subscribe("fal-ai/kling-video/v2/master/text-to-video", {
      input: { prompt: "a wave", duration: "5" },
      ...subscribe,
      onQueueUpdate: (update) => updates.push(update.status)
    })
    expect(updates).toEqual(["IN_QUEUE", "IN_PROGRESS", "COMPLETED"])
    const mp4 = await download(result.data.video.url)
    expect(Buffer.from(mp4.subarray(4, 8)).toString("latin1")).toBe("ftyp")
    expect(result.data.video.file_size).toBe(mp4.length)
  })

  it("namespaced endpoints: the client addresses workflows/ apps with three segments, and the fake answers there only", async () => {
    const fal = client()
    const result = await fal.subscribe("workflows/acme/poster-pipeline", { input: { prompt: "a poster" }, ...subscribe })
    expect(result.data.images).toHaveLength(1)
    const id = result.requestId
    expect(fake.requests.some((r) => r.path === `/workflows/acme/poster-pipeline/requests/${id}/status`)).toBe(true)
    // Where the adapter used to poll: fal answers 404, and so does the fake.
    const wrong = await fetch(`${fake.url}/workflows/acme/requests/${id}/status`, { headers: { authorization: "Key fal-key" } })
    expect(wrong.status).toBe(404)
    // The adapter names every app as the client does.
    for (const endpoint of ["fal-ai/flux/dev", "fal-ai/flux", "workflows/acme/poster-pipeline", "comfy/acme/upscale/v2", "12345-my-app"]) {
      const app = parseEndpointId(endpoint)
      expect(Fal.appOf(endpoint)).toBe([app.namespace, app.owner, app.alias].filter((part) => part !== undefined).join("/"))
    }
  })

  it("NSFW: has_nsfw_concepts flags images one by one", async () => {
    const result = await client().subscribe("fal-ai/flux/dev", { input: { prompt: "first-nsfw", num_images: 3 }, ...subscribe })
    expect(result.data.has_nsfw_concepts).toEqual([true, false, false])
  })

  it("a job refused for its content: the result is a 422 the client reads as a ValidationError", async () => {
    const error = await client().subscribe("fal-ai/flux/dev", { input: { prompt: "refused" }, ...subscribe }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ValidationError)
    expect((error as ValidationError).fieldErrors[0]).toMatchObject({ loc: ["body", "prompt"], type: "content_policy_violation" })
  })

  it.each([
    ["a wrong type", { prompt: "x", num_images: "two" }, ["body", "num_images"], "int_type"],
    ["out of range", { prompt: "x", num_images: 9 }, ["body", "num_images"], "less_than_equal"],
    ["an unknown field", { prompt: "x", steps: 4 }, ["body", "steps"], "extra_forbidden"],
    ["a missing prompt", { num_images: 1 }, ["body", "prompt"], "missing"],
    ["a bad image_size", { prompt: "x", image_size: { width: 512 } }, ["body", "image_size", "height"], "missing"]
  ] as const)("the fake refuses %s with 422, which the client reads as a ValidationError", async (_, input, loc, type) => {
    // A plain string endpoint: the client's types would refuse these inputs before the fake does.
    const endpoint: string = "fal-ai/flux/dev"
    const error = await client().queue.submit(endpoint, { input }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ValidationError)
    expect((error as ValidationError).status).toBe(422)
    expect((error as ValidationError).fieldErrors).toContainEqual(expect.objectContaining({ loc, type }))
  })

  it("a wrong key is 401; an unknown app is 404", async () => {
    const unauthorized = await client("wrong").queue.submit("fal-ai/flux/dev", { input: { prompt: "x" } }).catch((e: unknown) => e)
    expect(unauthorized).toBeInstanceOf(ApiError)
    expect(unauthorized).toMatchObject({ status: 401, body: { detail: "Invalid key" } })
    const unknown = await client().queue.submit("fal-ai/no-such-app", { input: { prompt: "x" } }).catch((e: unknown) => e)
    expect(unknown).toMatchObject({ status: 404 })
  })

  it.each([400, 401, 402, 403, 404, 422, 500] as const)("an error answer %i (the adapter's tests inject them) is an ApiError with its status and body", async (status) => {
    fake.failNext({ status, body: { detail: `failure ${status}` } }, { path: /^\/fal-ai\/flux\/dev$/ })
    const error = await client().queue.submit("fal-ai/flux/dev", { input: { prompt: "x" } }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ApiError)
    expect(error).toMatchObject({ status, body: { detail: `failure ${status}` } })
  })

  it("429 and 503 (with Retry-After) are retried by the client, which then takes the answer", { timeout: 15_000 }, async () => {
    fake.failNext({ status: 429, body: { detail: "Too many requests" }, headers: { "retry-after": "1" } }, { path: /^\/fal-ai\/flux\/dev$/ })
    const fal = client()
    const submitted = await fal.queue.submit("fal-ai/flux/dev", { input: { prompt: "x" } })
    fake.failNext({ status: 503, body: "upstream connect error" }, { path: /\/status$/ })
    const status = await fal.queue.status("fal-ai/flux/dev", { requestId: submitted.request_id })
    expect(status.status).toBe("IN_QUEUE")
  })

  it("cancel: 202 CANCELLATION_REQUESTED while the job runs; 400 ALREADY_COMPLETED after", async () => {
    const fal = client()
    const submitted = await fal.queue.submit("fal-ai/flux/dev", { input: { prompt: "x" } })
    await fal.queue.cancel("fal-ai/flux/dev", { requestId: submitted.request_id })
    expect(fake.jobs.get(submitted.request_id)!.cancelled).toBe(true)
    const done = await fal.subscribe("fal-ai/flux/dev", { input: { prompt: "y" }, ...subscribe })
    const late = await fal.queue.cancel("fal-ai/flux/dev", { requestId: done.requestId }).catch((e: unknown) => e)
    expect(late).toMatchObject({ status: 400, body: { status: "ALREADY_COMPLETED" } })
  })

  it("a repeated Idempotency-Key gets the same request", async () => {
    const fal = client()
    const first = await fal.queue.submit("fal-ai/flux/dev", { input: { prompt: "x" }, headers: { "Idempotency-Key": "conf-1" } })
    const again = await fal.queue.submit("fal-ai/flux/dev", { input: { prompt: "x" }, headers: { "Idempotency-Key": "conf-1" } })
    expect(again.request_id).toBe(first.request_id)
  })

  it("webhooks: the client's webhookUrl reaches the fake; its webhook is the client's WebHookResponse, signed as fal signs", async () => {
    const received: Array<{ headers: Http.IncomingHttpHeaders; body: string }> = []
    const receiver = Http.createServer((request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        received.push({ headers: request.headers, body: Buffer.concat(chunks).toString("utf8") })
        response.writeHead(200).end()
      })
    })
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/fal/t1`
      const submitted = await client().queue.submit("fal-ai/flux/dev", { input: { prompt: "x" }, webhookUrl: url })
      expect(fake.jobs.get(submitted.request_id)!.webhook).toBe(url)
      expect(await fake.complete(submitted.request_id)).toBe(200)
      const { body, headers } = received[0]!
      const payload = JSON.parse(body) as WebHookResponse
      expect(payload).toMatchObject({ status: "OK", request_id: submitted.request_id, payload: { images: [expect.objectContaining({ url: expect.any(String) })] } })
      const adapter = Fal.make({ key: "fal-key", baseUrl: fake.url, jwksUrl: fake.jwksUrl })
      const flat = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, String(value)]))
      const verified = await Effect.runPromise(
        adapter.verifyWebhook!({ provider: "fal", token: "t1", headers: flat, body: new Uint8Array(Buffer.from(body)) }).pipe(Effect.provide(FetchHttpClient.layer))
      )
      expect(verified).toBe(true)
    } finally {
      await new Promise<void>((resolve) => receiver.close(() => resolve()))
    }
  })
})

describe("fal's client reads FakeFal's progress", () => {
  const printed = ["Loading pipeline", " 45%|████▌     | 9/20 [00:02<00:02,  4.12it/s]"]
  let queue: Awaited<ReturnType<typeof FakeFal.start>>
  beforeAll(async () => {
    queue = await FakeFal.start({ key: "fal-key", queued: 2, steps: 4, logs: () => printed })
  })
  afterAll(() => queue.close())
  const on = () =>
    createFalClient({
      credentials: "fal-key",
      requestMiddleware: (request) => Promise.resolve({ ...request, url: request.url.replace(/^https:\/\/(queue\.)?fal\.run/, queue.url) })
    })

  it("status({ logs: true }): queue_position while queued, then RequestLogs; the adapter reads what the client reads", async () => {
    const fal = on()
    const submitted = await fal.queue.submit("fal-ai/flux/dev", { input: { prompt: "x" } })
    expect(submitted).toMatchObject({ status: "IN_QUEUE", queue_position: 1 })
    const statuses: Array<QueueStatus> = []
    for (let i = 0; i < 3; i++) statuses.push(await fal.queue.status("fal-ai/flux/dev", { requestId: submitted.request_id, logs: true }))
    expect(queue.requests.filter((r) => r.path.endsWith("/status")).map((r) => r.query)).toEqual(["?logs=1", "?logs=1", "?logs=1"])
    const [first, second, running] = statuses
    expect(first).toMatchObject({ status: "IN_QUEUE", queue_position: 1 })
    expect(second).toMatchObject({ status: "IN_QUEUE", queue_position: 0 })
    if (running?.status !== "IN_PROGRESS") return expect.fail("IN_PROGRESS third")
    expect(running.logs.map((log) => log.message)).toEqual(printed)
    expect(running.logs[0]).toEqual({ message: printed[0], level: "INFO", source: "USER", timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) })
    expect(statuses.map(Fal.progressOf)).toEqual([{ queuePosition: 2 }, { queuePosition: 1 }, { percent: 45, logs: printed }])
    // Without logs: true the client asks ?logs=0, and the fake answers no log lines.
    const quiet = await fal.queue.status("fal-ai/flux/dev", { requestId: submitted.request_id })
    expect(queue.requests.at(-1)!.query).toBe("?logs=0")
    expect(quiet).toMatchObject({ status: "IN_PROGRESS", logs: [] })
  })

  it("subscribe with logs: every update is one the client knows, the running ones with their logs", async () => {
    const updates: Array<QueueStatus> = []
    await on().subscribe("fal-ai/flux/dev", { input: { prompt: "x" }, logs: true, ...subscribe, onQueueUpdate: (update) => updates.push(update) })
    expect(updates.map((update) => update.status)).toEqual(["IN_QUEUE", "IN_QUEUE", "IN_PROGRESS", "IN_PROGRESS", "COMPLETED"])
    expect(updates.find((update) => update.status === "IN_PROGRESS")).toMatchObject({ logs: printed.map((message) => ({ message })) })
  })
})
