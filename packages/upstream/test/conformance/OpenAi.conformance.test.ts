/**
 * FakeOpenAi held to the official `openai` client (v6) on loopback, so the adapter's tests
 * prove something about the real service:
 *
 * - every scenario of the adapter's tests (`openai/Scenarios.ts`) is run through the adapter,
 *   and each request it made is replayed through `images.generate` / `images.edit` with
 *   `toFile`: the client's request reaches the fake as the adapter's did (same fields, same
 *   file parts, names, types and bytes), and the client accepts the fake's answer, real PNGs
 *   of the size asked, inline or at their URL;
 * - what the real service refuses, the fake refuses as it does (400, `invalid_request_error`,
 *   `param`), and the client raises it as `BadRequestError` with the service's message;
 * - 401, 429 with `retry-after`, 5xx and the safety system's refusal reach the client as its
 *   error classes, and the adapter classifies the same answers as the engine needs;
 * - `moderations.create` reads the fake's verdicts.
 */
import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { Task } from "@mediagate/core"
import { Ids } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryMediaStore } from "@mediagate/store-memory"
import { OpenAiImages, Png } from "@mediagate/upstream"
import { Effect, Layer } from "effect"
import OpenAI, { APIError, AuthenticationError, BadRequestError, InternalServerError, RateLimitError, toFile } from "openai"
import * as FakeOpenAi from "../fakes/FakeOpenAi.js"
import * as FakeServer from "../fakes/FakeServer.js"
import { files, inputOf, references, scenarios } from "./openai/Scenarios.js"

let api: FakeOpenAi.FakeOpenAi
let host: FakeOpenAi.FileHost
beforeAll(async () => {
  api = await FakeOpenAi.start({ key: "sk-conformance" })
  host = await FakeOpenAi.startFileHost()
  references(host)
})
afterAll(() => Promise.all([api.close(), host.close()]))

/** The official client on the fake; no retries unless a test asks, so failures stay quick. */
const client = (options: { readonly key?: string; readonly maxRetries?: number } = {}) =>
  new OpenAI({ apiKey: options.key ?? "sk-conformance", baseURL: `${api.url}/v1`, maxRetries: options.maxRetries ?? 0 })

const media = MemoryMediaStore.layer({ baseUrl: "https://cdn.test/media/" }).pipe(Layer.provide(Ids.layer))
/** The adapter's submit of `job` on the fake, as the engine runs it. */
const submitting = (job: Task.UpstreamJob, input: Record<string, unknown>, model: string, key = "sk-conformance") =>
  Effect.flatMap(
    OpenAiImages.make({ key, baseUrl: api.url }),
    (provider) => provider.submit({ job, model }, input, { taskId: Ids.TaskId.make("t1"), idempotencyKey: "t1.1", request: {} })
  ).pipe(Effect.provide(Layer.merge(FetchHttpClient.layer, media)))

/** A request as the fake read it: JSON fields, or the form's fields and files; comparable whoever sent it. */
const received = (request: FakeServer.Recorded) => {
  if (!String(request.headers["content-type"]).startsWith("multipart/")) return { path: request.path, fields: FakeServer.json(request), files: [] }
  const parts = FakeOpenAi.parts(request)
  return {
    path: request.path,
    fields: Object.fromEntries(parts.filter((part) => part.filename === undefined).map((part) => [part.name, part.value.toString()])),
    files: parts.filter((part) => part.filename !== undefined).map((part) => ({ name: part.name, filename: part.filename, type: part.type, bytes: part.value.toString("base64") }))
  }
}

/** The same request through the official client: `images.generate`, or `images.edit` with `toFile` for each file. */
const replay = async (request: FakeServer.Recorded) => {
  const { fields, files: attached } = received(request)
  if (request.path === "/v1/images/generations") return client().images.generate(fields)
  const uploads = await Promise.all(attached.map((file) => toFile(Buffer.from(file.bytes, "base64"), file.filename, { type: file.type! })))
  const image = attached[0]?.name === "image[]" ? uploads : uploads[0]!
  const { n, ...text } = fields
  return client().images.edit({ ...text, ...(n === undefined ? {} : { n: Number(n) }), prompt: String(fields.prompt), image })
}

/** The bytes of an image of an answer, inline or at its URL. */
const bytesOf = async (image: OpenAI.Images.Image) =>
  image.b64_json !== undefined ? Buffer.from(image.b64_json, "base64") : Buffer.from(await (await fetch(image.url!)).arrayBuffer())

/** The error a promise fails with. */
const failure = (promise: Promise<unknown>) => promise.then(() => expect.unreachable("expected a failure"), (error: unknown) => error)

describe("the official openai client replays every request of the adapter's scenarios", () => {
  for (const scenario of scenarios) {
    it(scenario.name, async () => {
      const job = scenario.job(host.url)
      const before = api.requests.length
      expect(await Effect.runPromise(submitting(job, inputOf(scenario, job), scenario.model))).toMatchObject({ _tag: "Completed" })
      const made = api.requests.slice(before)
      expect(made).toHaveLength(scenario.calls)
      for (const request of made) {
        const answer = await replay(request)
        // The client's request reached the fake as the adapter's did.
        expect(received(api.requests.at(-1)!)).toEqual(received(request))
        const n = Number(received(request).fields.n ?? 1)
        expect(answer.data).toHaveLength(n)
        for (const image of answer.data ?? []) {
          expect(image[scenario.answer]).toBeTypeOf("string")
          expect(Png.readPngSize(await bytesOf(image))).toEqual({ width: scenario.size[0], height: scenario.size[1] })
        }
      }
    })
  }

  it("a GPT image model's answer has the fields the client types: size, quality, output_format, background, usage", async () => {
    const answer = await client().images.generate({ model: "gpt-image-1", prompt: "a lighthouse", size: "1536x1024", quality: "high" })
    expect(answer).toMatchObject({ size: "1536x1024", quality: "high", output_format: "png", background: "opaque" })
    expect(answer.usage?.total_tokens).toBe((answer.usage?.input_tokens ?? 0) + (answer.usage?.output_tokens ?? 0))
    const free = await client().images.generate({ model: "gpt-image-2", prompt: "a lighthouse", size: "1536x864" })
    expect(Png.readPngSize(await bytesOf(free.data![0]!))).toEqual({ width: 1536, height: 864 })
  })
})

describe("the fake refuses what the service refuses, and the client raises it", () => {
  const refused = async (promise: Promise<unknown>, param: string, message: string | RegExp) => {
    const error = await failure(promise)
    expect(error).toBeInstanceOf(BadRequestError)
    const bad = error as BadRequestError
    expect([bad.status, bad.type, bad.param]).toEqual([400, "invalid_request_error", param])
    if (typeof message === "string") expect(bad.message).toBe(`400 ${message}`)
    else expect(bad.message).toMatch(message)
  }

  it("unknown parameters, and parameters of another family", async () => {
    await refused(client().images.generate({ model: "gpt-image-1", prompt: "x", colour: "blue" } as never), "colour", "Unknown parameter: 'colour'.")
    await refused(client().images.generate({ model: "gpt-image-1", prompt: "x", response_format: "url" }), "response_format", "Unknown parameter: 'response_format'.")
    await refused(client().images.generate({ model: "dall-e-3", prompt: "x", output_format: "webp" }), "output_format", "Unknown parameter: 'output_format'.")
    await refused(client().images.generate({ model: "gpt-image-1", prompt: "x", style: "vivid" }), "style", "Unknown parameter: 'style'.")
    await refused(client().images.generate({ model: "dall-e-4", prompt: "x" }), "model", /^400 Invalid value: 'dall-e-4'\. Supported values are: 'dall-e-2', /)
    await refused(client().images.generate({ model: "gpt-image-1" } as never), "prompt", "Missing required parameter: 'prompt'.")
  })

  it("sizes a model does not take", async () => {
    await refused(client().images.generate({ model: "dall-e-3", prompt: "x", size: "1536x1024" }), "size", "Invalid value: '1536x1024'. Supported values are: '1024x1024', '1792x1024', and '1024x1792'.")
    await refused(client().images.generate({ model: "dall-e-2", prompt: "x", size: "1792x1024" }), "size", "Invalid value: '1792x1024'. Supported values are: '256x256', '512x512', and '1024x1024'.")
    await refused(client().images.generate({ model: "dall-e-3", prompt: "x", size: "auto" }), "size", /^400 Invalid value: 'auto'/)
    await refused(client().images.generate({ model: "gpt-image-1", prompt: "x", size: "1792x1024" }), "size", /^400 Invalid value: '1792x1024'/)
    await refused(client().images.generate({ model: "gpt-image-1", prompt: "x", size: "512x512" }), "size", /^400 Invalid value: '512x512'/)
    await refused(client().images.generate({ model: "gpt-image-2", prompt: "x", size: "1000x1000" }), "size", /^400 Invalid value: '1000x1000'/)
  })

  it("n above what the model draws in one call, and qualities of another family", async () => {
    await refused(client().images.generate({ model: "dall-e-3", prompt: "x", n: 2 }), "n", "Invalid 'n': integer above maximum value. Expected a value <= 1, but got 2 instead.")
    await refused(client().images.generate({ model: "gpt-image-1", prompt: "x", n: 11 }), "n", /^400 Invalid 'n': integer above maximum value\. Expected a value <= 10/)
    await refused(client().images.generate({ model: "dall-e-2", prompt: "x", n: 0 }), "n", /^400 Invalid 'n': integer below minimum value/)
    await refused(client().images.generate({ model: "gpt-image-1", prompt: "x", quality: "hd" }), "quality", "Invalid value: 'hd'. Supported values are: 'low', 'medium', 'high', and 'auto'.")
    await refused(client().images.generate({ model: "dall-e-3", prompt: "x", quality: "high" }), "quality", /^400 Invalid value: 'high'/)
  })

  it("edits: files not typed as an image the model takes, bytes that are not what their type says, too many, a model without edits", async () => {
    const edit = (image: OpenAI.Images.ImageEditParams["image"], model = "gpt-image-1") => client().images.edit({ model, prompt: "x", image })
    // A file without a type goes as application/octet-stream, as the adapter's did before it typed its files.
    await refused(
      edit(await toFile(files.png, "in.png")),
      "image",
      "Invalid file 'image': unsupported mimetype ('application/octet-stream'). Supported file formats are 'image/png', 'image/jpeg', and 'image/webp'."
    )
    await refused(edit(await toFile(files.gif, "in.gif", { type: "image/gif" })), "image", /^400 Invalid file 'image': unsupported mimetype \('image\/gif'\)/)
    await refused(edit(await toFile(files.jpeg, "in.jpg", { type: "image/jpeg" }), "dall-e-2"), "image", "Invalid file 'image': unsupported mimetype ('image/jpeg'). Supported file formats are 'image/png'.")
    await refused(edit(await toFile(files.png, "in.jpg", { type: "image/jpeg" })), "image", "Invalid image file or mode for image 1, please check your image file.")
    const two = [await toFile(files.png, "a.png", { type: "image/png" }), await toFile(files.png, "b.png", { type: "image/png" })]
    await refused(edit(two, "dall-e-2"), "image", /^400 Invalid 'image': too many images/)
    await refused(edit(await toFile(files.wide, "wide.png", { type: "image/png" }), "dall-e-2"), "image", "Invalid input image - image must be square.")
    await refused(edit(await toFile(files.png, "in.png", { type: "image/png" }), "dall-e-3"), "model", /^400 Invalid value: 'dall-e-3'/)
    // The same files, typed right, are taken.
    const taken = await edit(await toFile(files.webp, "in.webp", { type: "image/webp" }))
    expect(Png.readPngSize(await bytesOf(taken.data![0]!))).toEqual({ width: 1024, height: 1024 })
  })
})

describe("failures reach the client as its error classes, and the adapter as the engine's", () => {
  const classes = [
    { name: "a bad key", key: "sk-wrong", reply: undefined, error: AuthenticationError, message: "401 Incorrect API key provided", upstream: { reason: null, retryable: false } },
    { name: "429", reply: FakeOpenAi.rateLimited(20), error: RateLimitError, message: "429 Rate limit reached for images per minute. Please try again later.", upstream: { reason: null, retryable: true, retryAfterMs: 20_000 } },
    { name: "500", reply: FakeOpenAi.serverError(500), error: InternalServerError, message: "500 The server had an error while processing your request. Sorry about that!", upstream: { reason: null, retryable: true } },
    { name: "503", reply: FakeOpenAi.serverError(503), error: InternalServerError, message: /^503 /, upstream: { reason: null, retryable: true } },
    { name: "the safety system", prompt: "refused", error: BadRequestError, message: /^400 Your request was rejected as a result of our safety system/, upstream: { reason: "CONTENT_MODERATION", retryable: false } },
    { name: "a bad request", reply: FakeOpenAi.error(400, "Invalid value: 'x'.", { param: "size", code: "invalid_value" }), error: BadRequestError, message: "400 Invalid value: 'x'.", upstream: { reason: "INVALID_PARAMETERS", retryable: false } }
  ] as const

  for (const scenario of classes) {
    it(scenario.name, async () => {
      const prompt = "prompt" in scenario ? scenario.prompt : "a lighthouse"
      if ("reply" in scenario && scenario.reply !== undefined) api.failNext(scenario.reply)
      const error = await failure(client({ key: "key" in scenario ? scenario.key : "sk-conformance" }).images.generate({ model: "gpt-image-1", prompt }))
      expect(error).toBeInstanceOf(scenario.error)
      expect((error as APIError).message).toMatch(scenario.message)
      if (scenario.name === "429") expect((error as APIError).headers?.get("retry-after")).toBe("20")

      // The same answer to the adapter.
      if ("reply" in scenario && scenario.reply !== undefined) api.failNext(scenario.reply)
      const job = Testing.job({ prompt })
      const key = "key" in scenario ? scenario.key : undefined
      const upstream = await Effect.runPromise(Effect.flip(submitting(job, OpenAiImages.defaultInput(job, "gpt-image-1"), "gpt-image-1", key)))
      expect(upstream).toMatchObject(scenario.upstream)
    })
  }

  it("the client honours retry-after and takes the answer after it", async () => {
    api.failNext(FakeOpenAi.rateLimited(1))
    const before = api.requests.length
    const started = performance.now()
    const answer = await client({ maxRetries: 1 }).images.generate({ model: "gpt-image-1", prompt: "a lighthouse" })
    expect(performance.now() - started).toBeGreaterThanOrEqual(900)
    expect(api.requests.length - before).toBe(2)
    expect(answer.data).toHaveLength(1)
  })
})

describe("moderations", () => {
  it("moderations.create reads the verdicts; unknown parameters are refused", async () => {
    const answer = await client().moderations.create({ model: "omni-moderation-latest", input: ["a storm, violence!", "a lighthouse"] })
    expect(answer.results.map((result) => result.flagged)).toEqual([true, false])
    expect(answer.results[0]!.categories.violence).toBe(true)
    expect(answer.results[0]!.category_applied_input_types.violence).toEqual(["text"])
    const error = await failure(client().moderations.create({ input: "x", threshold: 0.5 } as never))
    expect(error).toBeInstanceOf(BadRequestError)
    expect((error as BadRequestError).param).toBe("threshold")
  })
})
