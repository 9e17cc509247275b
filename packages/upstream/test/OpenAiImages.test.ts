/**
 * The OpenAI-compatible images adapter against a loopback fake: generations by URL and by
 * base64 (stored in the MediaStore, so the task still returns URLs), edits as multipart with
 * the reference images downloaded and attached, the safety system's refusal, error classes.
 */
import type { HttpClient } from "@effect/platform"
import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Ids, MediaStore } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryMediaStore } from "@mediagate/store-memory"
import { OpenAiImages, Png } from "@mediagate/upstream"
import { Effect, Layer, Option } from "effect"
import * as FakeOpenAi from "./fakes/FakeOpenAi.js"
import * as FakeServer from "./fakes/FakeServer.js"

const png = Png.encodePng({ width: 8, height: 8, seed: 1 })
let urls: FakeServer.FakeServer
let base64: FakeServer.FakeServer
let images: FakeServer.FakeServer
beforeAll(async () => {
  urls = await FakeOpenAi.start({ key: "sk-test" })
  base64 = await FakeOpenAi.start({ key: "sk-test", base64: true, image: png })
  // Where the reference images of an edit live.
  images = await FakeServer.start((request) =>
    request.path === "/in.png" ? { status: 200, body: Buffer.from(png).toString("latin1"), headers: { "content-type": "image/png" } } : undefined
  )
})
afterAll(() => Promise.all([urls.close(), base64.close(), images.close()]))

const media = MemoryMediaStore.layer({ baseUrl: "https://cdn.test/media/" }).pipe(Layer.provide(Ids.layer))
const context = { taskId: Ids.TaskId.make("t1"), idempotencyKey: "t1.1", request: {} }
const run = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient | MediaStore.MediaStore>) =>
  Effect.runPromise(Effect.provide(effect, Layer.merge(FetchHttpClient.layer, media)))
const submit = (server: FakeServer.FakeServer, job = Testing.job(), input: Record<string, unknown> = OpenAiImages.defaultInput(job, "gpt-image-1")) =>
  Effect.flatMap(OpenAiImages.make({ key: "sk-test", baseUrl: server.url }), (provider) => provider.submit({ job, model: "gpt-image-1" }, input, context))

describe("OpenAI-compatible images adapter", () => {
  it("generations answer with the images' URLs, synchronously", async () => {
    const job = Testing.job({ n: 2, ratio: "9:16" })
    expect(await run(submit(urls, job))).toEqual({
      _tag: "Completed",
      result: { type: "image", urls: ["https://images.example/gen-0.png", "https://images.example/gen-1.png"] }
    })
    const sent = urls.requests.at(-1)!
    expect(sent.path).toBe("/v1/images/generations")
    expect(sent.headers.authorization).toBe("Bearer sk-test")
    expect(FakeServer.json(sent)).toEqual({ model: "gpt-image-1", prompt: "a test", n: 2, size: "1024x1536" })
  })

  it("base64 images are stored in the MediaStore and returned as its URLs", async () => {
    const stored = await run(Effect.gen(function*() {
      const outcome = yield* submit(base64)
      if (outcome._tag !== "Completed") throw new Error("expected the images")
      const store = yield* MediaStore.MediaStore
      const url = outcome.result.urls[0]!
      expect(url.startsWith("https://cdn.test/media/")).toBe(true)
      return yield* store.get(url.slice("https://cdn.test/media/".length))
    }))
    expect(Option.map(stored, (object) => [object.contentType, Buffer.from(object.bytes).equals(Buffer.from(png))])).toEqual(Option.some(["image/png", true]))
  })

  it("with reference images, edits: multipart with each image downloaded and attached", async () => {
    const job = Testing.job({ mode: "image-to-image", imageUrls: [`${images.url}/in.png`, `${images.url}/in.png`] })
    const outcome = await run(submit(urls, job))
    expect(outcome).toMatchObject({ _tag: "Completed", result: { urls: ["https://images.example/edit-0.png"] } })
    const sent = urls.requests.at(-1)!
    expect(sent.path).toBe("/v1/images/edits")
    expect(String(sent.headers["content-type"])).toMatch(/^multipart\/form-data; boundary=/)
    expect(sent.body.match(/name="image\[\]"; filename=/g)).toHaveLength(2)
    expect(sent.body).toContain("\x89PNG")
  })

  it("a reference image that cannot be fetched is INVALID_PARAMETERS", async () => {
    const job = Testing.job({ imageUrls: [`${images.url}/missing.png`] })
    expect(await run(Effect.flip(submit(urls, job)))).toMatchObject({ reason: "INVALID_PARAMETERS", retryable: false })
  })

  it("the safety system's refusal is CONTENT_MODERATION; a bad request INVALID_PARAMETERS; a bad key permanent", async () => {
    const refused = Testing.job({ prompt: "refused" })
    expect(await run(Effect.flip(submit(urls, refused)))).toMatchObject({ reason: "CONTENT_MODERATION", retryable: false })
    expect(await run(Effect.flip(submit(urls, Testing.job(), { model: "gpt-image-1" })))).toMatchObject({ reason: "INVALID_PARAMETERS", retryable: false })
    const wrongKey = Effect.flatMap(OpenAiImages.make({ key: "sk-wrong", baseUrl: urls.url }), (p) => p.submit({ job: Testing.job(), model: "m" }, { prompt: "x" }, context))
    expect(await run(Effect.flip(wrongKey))).toMatchObject({ reason: null, retryable: false })
  })

  it("429 and 5xx are transient", async () => {
    urls.failNext({ status: 429, body: { error: { message: "Rate limit reached" } }, headers: { "retry-after": "20" } })
    expect(await run(Effect.flip(submit(urls)))).toMatchObject({ retryable: true, retryAfterMs: 20_000 })
    urls.failNext({ status: 500, body: { error: { message: "The server had an error" } } })
    expect(await run(Effect.flip(submit(urls)))).toMatchObject({ retryable: true })
  })

  it("an input without a model is sent with the target's", async () => {
    await run(submit(urls, Testing.job(), { prompt: "x" }))
    expect(FakeServer.json(urls.requests.at(-1)!)).toEqual({ model: "gpt-image-1", prompt: "x" })
  })

  it("sizes follow the ratio", () => {
    expect(OpenAiImages.sizeOf(Testing.job({ ratio: "1:1" }))).toBe("1024x1024")
    expect(OpenAiImages.sizeOf(Testing.job({ ratio: "16:9" }))).toBe("1536x1024")
    expect(OpenAiImages.sizeOf(Testing.job({ ratio: null }))).toBe("auto")
  })
})
