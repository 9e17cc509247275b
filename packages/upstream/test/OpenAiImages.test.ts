/**
 * The OpenAI images adapter against a loopback fake that refuses what the real service
 * refuses (sizes, `n` and parameters a model does not take, files typed wrong) and answers
 * real PNGs: every scenario of `conformance/openai/Scenarios.ts` (each model family's sizes
 * and `n`, base64 images stored in the MediaStore, URLs, edits with one and several
 * images), reference images typed by their bytes, and the error classes.
 */
import type { HttpClient } from "@effect/platform"
import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Ids, MediaStore } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryMediaStore } from "@mediagate/store-memory"
import { OpenAiImages, Png } from "@mediagate/upstream"
import { Effect, Layer, Option } from "effect"
import { inputOf, references, scenarios } from "./conformance/openai/Scenarios.js"
import * as FakeOpenAi from "./fakes/FakeOpenAi.js"
import * as FakeServer from "./fakes/FakeServer.js"

let api: FakeOpenAi.FakeOpenAi
let host: FakeOpenAi.FileHost
beforeAll(async () => {
  api = await FakeOpenAi.start({ key: "sk-test" })
  // Where the reference images of an edit live.
  host = await FakeOpenAi.startFileHost()
  references(host)
})
afterAll(() => Promise.all([api.close(), host.close()]))

const cdn = "https://cdn.test/media/"
const media = MemoryMediaStore.layer({ baseUrl: cdn }).pipe(Layer.provide(Ids.layer))
const context = { taskId: Ids.TaskId.make("t1"), idempotencyKey: "t1.1", request: {} }
const run = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient | MediaStore.MediaStore>) =>
  Effect.runPromise(Effect.provide(effect, Layer.merge(FetchHttpClient.layer, media)))
const submit = (job = Testing.job(), input: Record<string, unknown> = OpenAiImages.defaultInput(job, "gpt-image-1"), model = "gpt-image-1") =>
  Effect.flatMap(OpenAiImages.make({ key: "sk-test", baseUrl: api.url }), (provider) => provider.submit({ job, model }, input, context))

/** The bytes behind a result URL: the MediaStore's (base64 answers) or the provider's file host. */
const fetchResult = (url: string) =>
  Effect.gen(function*() {
    if (!url.startsWith(cdn)) return new Uint8Array(yield* Effect.promise(() => fetch(url).then((response) => response.arrayBuffer())))
    const stored = yield* (yield* MediaStore.MediaStore).get(url.slice(cdn.length))
    return Option.getOrThrow(stored).bytes
  })

/** The files of the last edit request: field, name and type of each. */
const sentFiles = () =>
  FakeOpenAi.parts(api.requests.at(-1)!).filter((part) => part.filename !== undefined).map((part) => [part.name, part.filename, part.type])

describe("OpenAI images adapter", () => {
  for (const scenario of scenarios) {
    it(`${scenario.name}: ${scenario.images} real ${scenario.size.join("x")} PNGs`, async () => {
      const job = scenario.job(host.url)
      const before = api.requests.length
      const images = await run(Effect.gen(function*() {
        const outcome = yield* submit(job, inputOf(scenario, job), scenario.model)
        if (outcome._tag !== "Completed") throw new Error("expected the images")
        return yield* Effect.forEach(outcome.result.urls, (url) => Effect.map(fetchResult(url), (bytes) => ({ url, bytes })))
      }))
      expect(images).toHaveLength(scenario.images)
      for (const { bytes, url } of images) {
        expect(Png.readPngSize(bytes)).toEqual({ width: scenario.size[0], height: scenario.size[1] })
        expect(url.startsWith(scenario.answer === "url" ? api.files.url : cdn)).toBe(true)
      }
      const calls = api.requests.slice(before)
      expect(calls).toHaveLength(scenario.calls)
      for (const call of calls) {
        const edit = job.imageUrls.length > 0
        expect(call.path).toBe(edit ? "/v1/images/edits" : "/v1/images/generations")
        const size = edit ? FakeOpenAi.parts(call).find((part) => part.name === "size")?.value.toString() : FakeServer.json(call).size
        expect(size).toBe(scenario.sizeSent)
      }
    })
  }

  it("a reference image is typed by its bytes, not by its host's Content-Type, and named to match", async () => {
    await run(submit(Testing.job({ imageUrls: [`${host.url}/ref.png`] })))
    expect(sentFiles()).toEqual([["image", "image-1.png", "image/png"]])
    await run(submit(Testing.job({ imageUrls: [`${host.url}/ref.png`, `${host.url}/ref.jpg`, `${host.url}/ref.webp`] })))
    expect(sentFiles()).toEqual([
      ["image[]", "image-1.png", "image/png"],
      ["image[]", "image-2.jpg", "image/jpeg"],
      ["image[]", "image-3.webp", "image/webp"]
    ])
    expect(FakeOpenAi.parts(api.requests.at(-1)!).find((part) => part.name === "image[]")?.value.subarray(0, 4).toString("latin1")).toBe("\x89PNG")
  })

  it("a reference that is no PNG, JPEG or WebP is INVALID_PARAMETERS naming its URL, and nothing is sent", async () => {
    const before = api.requests.length
    for (const path of ["/ref.gif", "/not-an-image.png"]) {
      const error = await run(Effect.flip(submit(Testing.job({ imageUrls: [`${host.url}/ref.png`, `${host.url}${path}`] }))))
      expect(error).toMatchObject({ reason: "INVALID_PARAMETERS", retryable: false })
      expect(error.message).toBe(`the input ${host.url}${path} is not a PNG, JPEG or WebP image, the only files openai takes`)
    }
    expect(api.requests.length).toBe(before)
  })

  it("a reference image that cannot be fetched is INVALID_PARAMETERS", async () => {
    const job = Testing.job({ imageUrls: [`${host.url}/missing.png`] })
    expect(await run(Effect.flip(submit(job)))).toMatchObject({ reason: "INVALID_PARAMETERS", retryable: false })
  })

  it("what the model refuses is INVALID_PARAMETERS with the service's words", async () => {
    const wide = Testing.job({ imageUrls: [`${host.url}/wide.png`] })
    expect(await run(Effect.flip(submit(wide, OpenAiImages.defaultInput(wide, "dall-e-2"), "dall-e-2")))).toMatchObject({
      reason: "INVALID_PARAMETERS",
      message: "openai answered 400: Invalid input image - image must be square."
    })
    const job = Testing.job()
    expect(await run(Effect.flip(submit(job, { prompt: "x", size: "1536x1024" }, "dall-e-3")))).toMatchObject({
      reason: "INVALID_PARAMETERS",
      message: "openai answered 400: Invalid value: '1536x1024'. Supported values are: '1024x1024', '1792x1024', and '1024x1792'."
    })
  })

  it("the safety system's refusal is CONTENT_MODERATION; a bad request INVALID_PARAMETERS; a bad key permanent", async () => {
    const refused = Testing.job({ prompt: "refused" })
    expect(await run(Effect.flip(submit(refused)))).toMatchObject({ reason: "CONTENT_MODERATION", retryable: false })
    expect(await run(Effect.flip(submit(Testing.job(), { model: "gpt-image-1" })))).toMatchObject({ reason: "INVALID_PARAMETERS", retryable: false })
    const wrongKey = Effect.flatMap(OpenAiImages.make({ key: "sk-wrong", baseUrl: api.url }), (p) => p.submit({ job: Testing.job(), model: "m" }, { prompt: "x" }, context))
    expect(await run(Effect.flip(wrongKey))).toMatchObject({ reason: null, retryable: false })
  })

  it("429 and 5xx are transient", async () => {
    api.failNext(FakeOpenAi.rateLimited(20))
    expect(await run(Effect.flip(submit()))).toMatchObject({ retryable: true, retryAfterMs: 20_000 })
    api.failNext(FakeOpenAi.serverError(500))
    expect(await run(Effect.flip(submit()))).toMatchObject({ retryable: true })
  })

  it("an input without a model is sent with the target's", async () => {
    await run(submit(Testing.job(), { prompt: "x" }))
    expect(FakeServer.json(api.requests.at(-1)!)).toEqual({ model: "gpt-image-1", prompt: "x" })
  })

  it("sizes follow the ratio, per model family", () => {
    const size = (ratio: string | null, model?: string, pixels: [number, number] | [null, null] = [null, null]) =>
      OpenAiImages.sizeOf(Testing.job({ ratio, width: pixels[0], height: pixels[1] }), model)
    expect([size("1:1"), size("16:9"), size("4:3"), size("9:16"), size("2:3"), size(null)]).toEqual([
      "1024x1024", "1536x1024", "1536x1024", "1024x1536", "1024x1536", "auto"
    ])
    expect([size("1:1", "dall-e-3"), size("16:9", "dall-e-3"), size("3:4", "dall-e-3"), size(null, "dall-e-3")]).toEqual([
      "1024x1024", "1792x1024", "1024x1792", "1024x1024"
    ])
    expect([size("16:9", "dall-e-2"), size("1:1", "dall-e-2", [512, 512]), size("1:1", "dall-e-2", [300, 300]), size(null, "dall-e-2")]).toEqual([
      "1024x1024", "512x512", "256x256", "1024x1024"
    ])
    expect(size(null, "gpt-image-1", [1024, 1536])).toBe("1024x1536")
  })

  it("a split dall-e-3 job one of whose calls fails keeps the others' images: the retry asks only for the missing one", async () => {
    const job = Testing.job({ n: 3 })
    const input = OpenAiImages.defaultInput(job, "dall-e-3")
    const generations = () => api.requests.filter((request) => request.path === "/v1/images/generations")
    const before = generations().length
    // Exactly one of the three calls fails, once.
    api.failNext(FakeOpenAi.serverError(), { path: /\/v1\/images\/generations$/ })
    // One MediaStore throughout: the kept images are the ones it stored at the first submit.
    const { failed, retried, images } = await run(Effect.gen(function*() {
      const provider = yield* OpenAiImages.make({ key: "sk-test", baseUrl: api.url })
      const failed = yield* Effect.flip(provider.submit({ job, model: "dall-e-3" }, input, context))
      // The engine hands the kept images back with the attempt's next submit.
      const partial = failed.partialResult === undefined ? {} : { partialResult: failed.partialResult }
      const retried = yield* provider.submit({ job, model: "dall-e-3" }, input, { ...context, ...partial })
      if (retried._tag !== "Completed") throw new Error("expected the images")
      return { failed, retried: retried.result, images: yield* Effect.forEach(retried.result.urls, fetchResult) }
    }))
    // Three calls, then one asking for the one image missing.
    const calls = generations().slice(before)
    expect(calls.map((request) => FakeServer.json(request).n)).toEqual([1, 1, 1, 1])
    expect(failed).toMatchObject({ _tag: "UpstreamError", retryable: true, reason: null })
    const kept = failed.partialResult?.urls ?? []
    expect(failed.partialResult?.type).toBe("image")
    expect(kept).toHaveLength(2)
    expect(retried.urls).toHaveLength(3)
    expect(retried.urls.slice(0, 2)).toEqual(kept)
    for (const bytes of images) expect(Png.readPngSize(bytes)).toEqual({ width: 1792, height: 1024 })
  })

  it("a split job whose calls all fail keeps nothing; a submit with every image kept asks for none", async () => {
    const job = Testing.job({ n: 2 })
    const input = OpenAiImages.defaultInput(job, "dall-e-3")
    api.failNext(FakeOpenAi.serverError(503), { path: /\/v1\/images\/generations$/, times: 2 })
    const failed = await run(Effect.flip(submit(job, input, "dall-e-3")))
    expect(failed.retryable).toBe(true)
    expect(failed.partialResult).toBeUndefined()
    const before = api.requests.length
    const partialResult = { type: "image" as const, urls: [`${cdn}a.png`, `${cdn}b.png`] }
    const done = await run(
      Effect.flatMap(OpenAiImages.make({ key: "sk-test", baseUrl: api.url }), (provider) =>
        provider.submit({ job, model: "dall-e-3" }, input, { ...context, partialResult }))
    )
    expect(done).toEqual({ _tag: "Completed", result: partialResult })
    expect(api.requests.length).toBe(before)
  })

  it("the default input asks dall-e for base64 (its URLs expire in an hour), never the GPT image models", () => {
    const job = Testing.job({ n: 2 })
    expect(OpenAiImages.defaultInput(job, "dall-e-3")).toEqual({ model: "dall-e-3", prompt: "a test", n: 2, size: "1792x1024", response_format: "b64_json" })
    expect(OpenAiImages.defaultInput(job, "gpt-image-1")).toEqual({ model: "gpt-image-1", prompt: "a test", n: 2, size: "1536x1024" })
  })
})
