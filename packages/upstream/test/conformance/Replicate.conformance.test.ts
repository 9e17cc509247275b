/**
 * The Replicate fake answers to Replicate's official client (`replicate` on npm): the
 * client, pointed at the fake with `baseUrl` and given a `fetch` that keeps every request on
 * loopback, drives every scenario the adapter's tests use. The client must accept each
 * answer (prediction states, outputs as https and data: files, failures, aborted, errors,
 * cancellation, webhooks), and the fake must refuse what Replicate refuses.
 */
import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Png, Replicate as ReplicateAdapter } from "@mediagate/upstream"
import { Effect } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import Replicate, { type FileOutput, parseProgressFromLogs, type Prediction, validateWebhook } from "replicate"
import * as FakeReplicate from "../fakes/FakeReplicate.js"

import * as Files from "./Files.js"

const end = (p: FakeReplicate.Prediction): FakeReplicate.End =>
  p.input["prompt"] === "nsfw" ? { error: "NSFW content detected. Try running it again, or try a different prompt." }
  : p.input["prompt"] === "aborted" ? { aborted: true }
  : p.model === "minimax/video-01" ? { output: `https://replicate.delivery/${p.id}.mp4` }
  : { output: Array.from({ length: Number(p.input["num_outputs"] ?? 1) }, (_, i) => `https://replicate.delivery/out-${i}.webp`) }

let fake: Awaited<ReturnType<typeof FakeReplicate.start>>
let inline: Awaited<ReturnType<typeof FakeReplicate.start>>
beforeAll(async () => {
  fake = await FakeReplicate.start({ token: "r8_token", end })
  inline = await FakeReplicate.start({ token: "r8_token", end: () => ({ output: ["https://replicate.delivery/out-0.png"] }), dataUris: true })
})
afterAll(() => Promise.all([fake.close(), inline.close()]))

/** Replicate's client on a fake; file outputs on `https://replicate.delivery` are fetched from the fake too. */
const client = (on = fake, auth = "r8_token") =>
  new Replicate({ auth, baseUrl: `${on.url}/v1`, fetch: Files.cdnFetch({ "https://replicate.delivery": `${on.url}/files` }) })
const bytes = async (file: unknown) => new Uint8Array(await (await (file as FileOutput).blob()).arrayBuffer())
const ascii = (data: Uint8Array, from: number, to: number) => Buffer.from(data.subarray(from, to)).toString("latin1")
/** The client's failure: its ApiError carries the response. */
const failure = (promise: Promise<unknown>) => promise.then(() => expect.fail("expected a failure"), (error: unknown) => error as Error & { response?: Response })
const flux = "black-forest-labs/flux-schnell"

describe("Replicate's client against FakeReplicate", () => {
  it("predictions: create answers starting; get moves it to processing, then succeeded; wait() takes it to its end", async () => {
    const replicate = client()
    const created = await replicate.predictions.create({ model: flux, input: { prompt: "a cat", num_outputs: 2 } })
    expect(created).toMatchObject({ status: "starting", model: flux, input: { prompt: "a cat", num_outputs: 2 }, output: null, error: null })
    expect(created.urls.get).toBe(`${fake.url}/v1/predictions/${created.id}`)
    expect((await replicate.predictions.get(created.id)).status).toBe("processing")
    const done: Prediction = await replicate.wait(created, { interval: 5 })
    expect(done.status).toBe("succeeded")
    expect(done.output).toEqual(["https://replicate.delivery/out-0.webp", "https://replicate.delivery/out-1.webp"])
  })

  it("run() with Prefer: wait: the prediction comes back finished and its files are real WebP", async () => {
    const output = await client().run(flux, { input: { prompt: "a cat" } }) as Array<FileOutput>
    const webp = await bytes(output[0])
    expect([ascii(webp, 0, 4), ascii(webp, 8, 12)]).toEqual(["RIFF", "WEBP"])
    const create = fake.requests.filter((r) => r.method === "POST").at(-1)!
    expect(create.headers.prefer).toBe("wait")
    const timed = await client().run(flux, { input: { prompt: "x" }, wait: { mode: "block", timeout: 30 } })
    expect(timed).toHaveLength(1)
    expect(fake.requests.filter((r) => r.method === "POST").at(-1)!.headers.prefer).toBe("wait=30")
  })

  it("run() on a version (owner/name:version) creates on /v1/predictions", async () => {
    const output = await client().run(`o/m:${FakeReplicate.models["o/m"]!.version}`, { input: { prompt: "x" } })
    expect(output).toHaveLength(1)
    expect(fake.requests.filter((r) => r.method === "POST").at(-1)!.path).toBe("/v1/predictions")
  })

  it("data: outputs under Prefer: wait: run() takes them as files, and they are real PNGs", async () => {
    const created = await client(inline).predictions.create({ model: flux, input: { prompt: "x" }, wait: 60 })
    expect(created.status).toBe("succeeded")
    expect(String((created.output as Array<string>)[0])).toMatch(/^data:image\/png;base64,/)
    const output = await client(inline).run(flux, { input: { prompt: "x" } }) as Array<FileOutput>
    expect(String(output[0]!.url())).toMatch(/^data:image\/png;base64,/)
    expect(Png.readPngSize(await bytes(output[0]))).toEqual({ width: 64, height: 64 })
  })

  it("a video, polled: run() in poll mode returns a real MP4", async () => {
    const output = await client().run("minimax/video-01", { input: { prompt: "a wave" }, wait: { mode: "poll", interval: 5 } })
    const mp4 = await bytes(output)
    expect(ascii(mp4, 4, 8)).toBe("ftyp")
  })

  it("a failed prediction: run() and wait() raise its error", async () => {
    const error = await failure(client().run(flux, { input: { prompt: "nsfw" } }))
    expect(error.message).toContain("Prediction failed: NSFW content detected")
  })

  it("aborted is a status of the client's Status type, and ends the prediction", async () => {
    const replicate = client()
    const created = await replicate.predictions.create({ model: flux, input: { prompt: "aborted" } })
    await replicate.predictions.get(created.id)
    const ended: Prediction = await replicate.predictions.get(created.id)
    const status: Prediction["status"] = ended.status
    expect(status).toBe("aborted")
    expect(ended.completed_at).toEqual(expect.any(String))
    // The client's wait() loops until succeeded, failed or canceled (its code and its types
    // disagree): its stop callback is how a caller ends on aborted.
    const waited: Prediction = await replicate.wait(created, { interval: 5 }, (p) => Promise.resolve(p.status === "aborted"))
    expect(waited.status).toBe("aborted")
  })

  it("cancel: the prediction is canceled, and wait() returns it", async () => {
    const replicate = client()
    const created = await replicate.predictions.create({ model: flux, input: { prompt: "x" } })
    const canceled = await replicate.predictions.cancel(created.id)
    expect(canceled.status).toBe("canceled")
    expect((await replicate.wait(created, { interval: 5 })).status).toBe("canceled")
  })

  it.each([
    ["a wrong type", { prompt: "x", num_outputs: "two" }, "input.num_outputs"],
    ["out of range", { prompt: "x", num_outputs: 9 }, "input.num_outputs"],
    ["an unknown input", { prompt: "x", steps: 4 }, "input.steps"],
    ["a missing prompt", { num_outputs: 1 }, "input.prompt"],
    ["a value not among the choices", { prompt: "x", aspect_ratio: "7:5" }, "input.aspect_ratio"]
  ] as const)("the fake refuses %s with 422 invalid_fields, an ApiError for the client", async (_, input, field) => {
    const error = await failure(client().predictions.create({ model: flux, input }))
    expect(error.name).toBe("ApiError")
    expect(error.response!.status).toBe(422)
    expect(error.message).toContain(field)
  })

  it("an unknown body field, an unknown version and a bad webhook are 422; an unknown model 404; a wrong token 401", async () => {
    const extra = await failure(client().predictions.create({ model: flux, input: { prompt: "x" }, stream_url: "x" } as never))
    expect(extra.response!.status).toBe(422)
    expect(extra.message).toContain("stream_url")
    expect((await failure(client().predictions.create({ version: "0".repeat(64), input: { prompt: "x" } }))).response!.status).toBe(422)
    expect((await failure(client().predictions.create({ model: flux, input: { prompt: "x" }, webhook: "mailto:a@b.c" }))).response!.status).toBe(422)
    expect((await failure(client().predictions.create({ model: "acme/nothing", input: { prompt: "x" } }))).response!.status).toBe(404)
    expect((await failure(client(fake, "wrong").predictions.create({ model: flux, input: { prompt: "x" } }))).response!.status).toBe(401)
  })

  it.each([401, 402, 422, 500] as const)("an error answer %i to a create (the adapter's tests inject them) is an ApiError with its status", async (status) => {
    fake.failNext({ status, body: { title: "failure", detail: `failure ${status}`, status } })
    const error = await failure(client().predictions.create({ model: flux, input: { prompt: "x" } }))
    expect(error.response!.status).toBe(status)
    expect(error.message).toContain(`failure ${status}`)
  })

  it("429 is retried by the client, which then takes the answer; past its retries it is an ApiError; a GET's 502 is retried", async () => {
    fake.failNext({ status: 429, body: { detail: "Request was throttled." }, headers: { "retry-after": "1" } })
    const created = await client().predictions.create({ model: flux, input: { prompt: "x" } })
    expect(created.status).toBe("starting")
    fake.failNext({ status: 429, body: { detail: "Request was throttled." } }, { times: 6 })
    expect((await failure(client().predictions.create({ model: flux, input: { prompt: "x" } }))).response!.status).toBe(429)
    fake.failNext({ status: 502, body: "Bad gateway" })
    expect((await client().predictions.get(created.id)).status).toBe("processing")
  })

  it("webhooks: the secret the client gets signs the fake's webhook, which validateWebhook and the adapter accept", async () => {
    const replicate = client()
    const { key } = await replicate.webhooks.default.secret.get()
    const received: Array<Request> = []
    const receiver = Http.createServer((request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        const headers = new Headers(Object.entries(request.headers).map(([name, value]) => [name, String(value)] as [string, string]))
        received.push(new Request("http://receiver/", { method: "POST", headers, body: Buffer.concat(chunks) }))
        response.writeHead(200).end()
      })
    })
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/replicate/t1`
      const created = await replicate.predictions.create({ model: flux, input: { prompt: "x" }, webhook: url, webhook_events_filter: ["completed"] })
      expect(await fake.complete(created.id)).toBe(200)
      const request = received[0]!
      const body = await request.clone().text()
      expect(JSON.parse(body)).toMatchObject({ id: created.id, status: "succeeded" })
      expect(await validateWebhook(request, key)).toBe(true)
      const adapter = ReplicateAdapter.make({ token: "r8_token", baseUrl: fake.url })
      const verified = await Effect.runPromise(
        adapter.verifyWebhook!({
          provider: "replicate",
          token: "t1",
          headers: Object.fromEntries(request.headers.entries()),
          body: new Uint8Array(Buffer.from(body))
        }).pipe(Effect.provide(FetchHttpClient.layer))
      )
      expect(verified).toBe(true)
    } finally {
      await new Promise<void>((resolve) => receiver.close(() => resolve()))
    }
  })
})

describe("Replicate's client reads FakeReplicate's logs", () => {
  const printed = ["Using seed: 42", "  0%|          | 0/4 [00:00<?, ?it/s]", " 50%|█████     | 2/4 [00:00<00:00,  4.12it/s]"]
  let logging: Awaited<ReturnType<typeof FakeReplicate.start>>
  beforeAll(async () => {
    logging = await FakeReplicate.start({ token: "r8_token", processing: 2, logs: (p) => `${printed.slice(0, p.gets + 1).join("\n")}\n` })
  })
  afterAll(() => logging.close())

  it("predictions.get: logs is the text so far; the client's parseProgressFromLogs and the adapter read the same percent", async () => {
    const replicate = client(logging)
    const created = await replicate.predictions.create({ model: flux, input: { prompt: "a cat" } })
    const seen: Array<Prediction> = []
    for (let i = 0; i < 2; i++) seen.push(await replicate.predictions.get(created.id))
    expect(seen.map((p) => p.status)).toEqual(["processing", "processing"])
    expect(seen.map((p) => p.logs)).toEqual([`${printed.slice(0, 2).join("\n")}\n`, `${printed.join("\n")}\n`])
    for (const prediction of seen) {
      const theirs = parseProgressFromLogs(prediction)
      expect(ReplicateAdapter.progressOf(prediction)?.percent).toBe(theirs === null ? undefined : Math.round(theirs.percentage * 100))
    }
    expect(ReplicateAdapter.progressOf(seen[1])).toEqual({ percent: 50, logs: printed })
    const done = await replicate.wait(seen[1]!, { interval: 5 })
    expect(done.status).toBe("succeeded")
  })

  it("a logs webhook is the client's Prediction, signed so that its validateWebhook accepts it", async () => {
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
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/replicate/t1`
      const replicate = client(logging)
      const created = await replicate.predictions.create({ model: flux, input: { prompt: "x" }, webhook: url, webhook_events_filter: ["logs"] })
      await replicate.predictions.get(created.id)
      expect(await logging.logged(created.id)).toBe(200)
      const { body, headers } = received[0]!
      const event = JSON.parse(body) as Prediction
      expect(event).toMatchObject({ id: created.id, status: "processing", logs: expect.stringContaining("0/4") })
      const valid = await validateWebhook({
        id: String(headers["webhook-id"]),
        timestamp: String(headers["webhook-timestamp"]),
        signature: String(headers["webhook-signature"]),
        body,
        secret: logging.webhookSecret
      })
      expect(valid).toBe(true)
    } finally {
      await new Promise<void>((resolve) => receiver.close(() => resolve()))
    }
  })
})
