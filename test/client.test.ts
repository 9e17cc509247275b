/**
 * @mediagate/client against the standalone server as a child process on loopback (memory
 * database, instant simulator): the Effect client and the promise facade submit, get, list,
 * cancel and run; errors arrive as MediagateError with the server's status, code and msg.
 * The `@ts-expect-error` lines are checked by `npm run typecheck`: a wrong input field, a
 * value of the wrong type or outside a model's literals, a missing required field and an
 * unknown model do not compile, for models of every family.
 */
import { FetchHttpClient, HttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import {
  type Client,
  Mediagate,
  MediagateClient,
  MediagateError,
  modelIds,
  RunTimeout,
  type Task,
  verifyCallback
} from "@mediagate/client"
import { Effect, Either, Layer, Stream } from "effect"
import { readFileSync } from "node:fs"
import { killAll, type Server, startServer, stop } from "./standalone-process.js"

/** A real PNG (64x48) on disk, and an image-to-image model whose imageUrls take this server's http URLs. */
const png = new URL("../packages/media/test/fixtures/image-64x48.png", import.meta.url).pathname
const imageModel = "dream-4"

const key = "client-test-key-0123456789"
let server: Server
let baseUrl: string

beforeAll(async () => {
  server = await startServer({
    MEDIAGATE_API_KEY: key,
    MEDIAGATE_DATABASE_URL: "memory",
    MEDIAGATE_SIMULATOR_PROFILE: "instant"
  })
  baseUrl = server.url
}, 60_000)

afterAll(async () => {
  if (server !== undefined) await stop(server, "SIGTERM")
  killAll()
})

/** Runs `use` with an Effect client of the server, over fetch. */
const withClient = <A, E>(use: (client: Client) => Effect.Effect<A, E>, apiKey = key) =>
  Effect.flatMap(MediagateClient.make({ baseUrl, apiKey }), use).pipe(Effect.provide(FetchHttpClient.layer))

// Compile-time checks, never run: `npm run typecheck` fails if any of these compiles.
export const typeChecks = (client: Client, facade: Mediagate) => {
  // @ts-expect-error `size` is not a field of alpha-image-2/text-to-image
  client.submit("alpha-image-2/text-to-image", { prompt: "a kite", size: "1k" })
  // @ts-expect-error 7:3 is not one of alpha-image-2's ratios
  client.submit("alpha-image-2/text-to-image", { prompt: "a kite", ratio: "7:3" })
  // @ts-expect-error n is an integer, not a string
  void facade.submit("alpha-image-2/text-to-image", { prompt: "a kite", n: "2" })
  // @ts-expect-error image-to-image needs imageUrls
  void facade.run("alpha-image-2/image-to-image", { prompt: "autumn" })
  // @ts-expect-error not a model of the catalog
  client.submit("alpha-image-3/text-to-image", { prompt: "a kite" })
  // @ts-expect-error every model requires a prompt
  client.submit("dream-4", { n: 2 })
  // @ts-expect-error 7 is not one of beta-imagine's video durations (6, 10, 12, 16, 20)
  client.submit("beta-imagine/text-to-video", { prompt: "waves", duration: 7 })
  // @ts-expect-error text-to-video takes no imageUrls
  client.submit("beta-imagine/text-to-video", { prompt: "waves", imageUrls: ["https://example.com/a.png"] })
  // @ts-expect-error image-to-video needs imageUrls
  client.submit("beta-imagine/image-to-video", { prompt: "bring it to life" })
  // @ts-expect-error text-to-image-lite takes no ratio
  client.submit("beta-imagine/text-to-image-lite", { prompt: "dunes", ratio: "16:9" })
  // @ts-expect-error mediaUrls is an array of URLs, not one URL
  client.submit("motion-2.0", { prompt: "a heron", mediaUrls: "https://example.com/a.png" })
  // @ts-expect-error `mediaUrl` is not a field of motion-2.0
  void facade.submit("motion-2.0-fast", { prompt: "a heron", mediaUrl: ["https://example.com/a.png"] })
  // @ts-expect-error n is a number, not a string
  client.submit("dream-4", { prompt: "a koi pond", n: "3" })
  // @ts-expect-error dream models take imageUrls, not canvas's images
  client.submit("dream-4.5", { prompt: "a koi pond", images: ["https://example.com/a.png"] })
  // @ts-expect-error clip3's resolution is 1080p or 4k (720p is the default, not a value)
  client.submit("clip3_fast", { prompt: "a paper boat", resolution: "720p" })
  // @ts-expect-error compact-image takes 16:9 or 9:16 only
  client.submit("compact-image", { prompt: "a poster", ratio: "1:1" })
  // @ts-expect-error canvas-video durations are 5, 10 or 15
  void facade.run("canvas-video-3.0", { prompt: "a city", duration: 8 })
  // @ts-expect-error estimate takes the model's input as submit does: `size` is not a field
  client.estimate("alpha-image-2/text-to-image", { prompt: "a kite", size: "1k" })
  // @ts-expect-error an estimate has no Idempotency-Key
  void facade.estimate("dream-4", { prompt: "a koi pond" }, { idempotencyKey: "k" })
  // Compiles: each model's own fields.
  client.submit("alpha-image-2/text-to-image", { prompt: "a kite", ratio: "16:9", resolution: "2k", n: 2 })
  client.submit("dream-4", { prompt: "a koi pond", n: 3 })
  client.submit("beta-imagine/text-to-video", { prompt: "waves at night", duration: 10, ratio: "16:9", mode: "normal" })
  client.submit("beta-imagine/image-to-video", { prompt: "bring it to life", imageUrls: ["https://example.com/a.png"] })
  client.submit("beta-imagine/text-to-image-pro", { prompt: "a red fox", ratio: "16:9", resolution: "1080p", n: 3 })
  client.submit("motion-2.0", { prompt: "a heron", mediaUrls: ["https://example.com/a.png", "https://example.com/b.mp4"], fallback: false })
  void facade.run("motion-1.5-pro", { prompt: "a heron", imageUrls: ["https://example.com/a.png"], duration: 10 })
  client.submit("clip3", { prompt: "a paper boat", resolution: "4k", duration: 6, mode: "i2v", imageUrls: ["https://example.com/a.jpg"] })
  client.submit("compact-image-pro", { prompt: "a poster", ratio: "1:1", resolution: "4k" })
  client.submit("canvas-4.6", { prompt: "a teapot", images: ["https://example.com/a.png"], resolution: "1k" })
  void facade.submit("canvas-video-3.5-pro", { prompt: "a city", imageUrls: ["https://example.com/1.png"], duration: 15 })
  // Compiles: a Blob or a local path in a media URL field (uploaded first).
  client.run("alpha-image-2/image-to-image", { prompt: "autumn", imageUrls: ["./cat.png"] })
  void facade.run("canvas-4.6", { prompt: "a teapot", images: [new Blob([]), "https://example.com/a.png"] })
  // @ts-expect-error a Blob goes in a media URL field only, not in the prompt
  client.submit("dream-4", { prompt: new Blob([]) })
  // @ts-expect-error a media URL field is still a list
  client.run("alpha-image-2/image-to-image", { prompt: "autumn", imageUrls: new Blob([]) })
}

describe("Effect client", () => {
  it.live("submit, get, list and cancel; run waits for the end and reports each status change", () =>
    withClient((client) =>
      Effect.gen(function*() {
        const taskId = yield* client.submit("alpha-image-2/text-to-image", { prompt: "a lighthouse", ratio: "16:9" })
        const task = yield* client.get(taskId)
        expect(task.taskId).toBe(taskId)
        expect(task.input).toMatchObject({ model: "alpha-image-2/text-to-image", prompt: "a lighthouse", ratio: "16:9" })

        const page = yield* client.list({ limit: 1 })
        expect(page.tasks.map((t) => t.taskId)).toEqual([taskId])

        const seen: Array<string> = []
        const ran = yield* client.run("alpha-image-2/text-to-image", { prompt: "a harbour", n: 2 }, {
          onProgress: (t) => void seen.push(t.status),
          timeout: "30 seconds"
        })
        expect(ran.status).toBe("SUCCESS")
        expect(ran.result?.urls).toHaveLength(2)
        // Called first with the task as first seen, then once per change: never twice in a row alike.
        expect(seen.at(-1)).toBe("SUCCESS")
        expect(seen.filter((status, i) => seen[i - 1] === status)).toEqual([])

        // A task that never ends: run gives up with RunTimeout; cancel ends it.
        const stuck = yield* Effect.flip(client.run("dream-4", { prompt: "a koi pond [sim:timeout]" }, { timeout: "2 seconds", wait: "1 second" }))
        expect(stuck).toBeInstanceOf(RunTimeout)
        const stuckId = (stuck as RunTimeout).taskId
        expect(((stuck as RunTimeout).task as Task | undefined)?.status).toMatch(/PENDING|PROCESSING|SUBMITTED/)
        const cancelled = yield* client.cancel(stuckId)
        expect(cancelled).toMatchObject({ taskId: stuckId, status: "CANCELLED", result: null })
        const again = yield* Effect.flip(client.cancel(stuckId))
        expect(again).toMatchObject({ _tag: "MediagateError", status: 409, code: 409, msg: "task is already CANCELLED" })

        // The list's filters: only the cancelled dream-4 task, then only alpha-image-2's.
        const cancelledOnly = yield* client.list({ status: "CANCELLED", model: "dream-4" })
        expect(cancelledOnly.tasks.map((t) => t.taskId)).toContain(stuckId)
        expect(new Set(cancelledOnly.tasks.map((t) => t.status))).toEqual(new Set(["CANCELLED"]))
        const ended = yield* client.list({ status: ["SUCCESS", "FAILURE"], model: "alpha-image-2/text-to-image", createdAfter: new Date(0) })
        expect(ended.tasks.map((t) => t.taskId)).toContain(ran.taskId)
        expect(ended.tasks.map((t) => t.taskId)).not.toContain(stuckId)
      })))

  it.live("an Idempotency-Key sent again with the same input answers the same task; with another input, 422", () =>
    withClient((client) =>
      Effect.gen(function*() {
        const idempotencyKey = `client-test-${Date.now()}`
        const first = yield* client.submit("alpha-image-2/text-to-image", { prompt: "once" }, { idempotencyKey })
        const second = yield* client.submit("alpha-image-2/text-to-image", { prompt: "once" }, { idempotencyKey })
        expect(second).toBe(first)
        const other = yield* Effect.flip(client.submit("alpha-image-2/text-to-image", { prompt: "twice" }, { idempotencyKey }))
        expect(other).toMatchObject({ _tag: "MediagateError", status: 422, code: 422 })
      })))

  it.live("estimate answers the price, adjustments and stored input of a submit, and creates nothing", () =>
    withClient((client) =>
      Effect.gen(function*() {
        const before = (yield* client.list({ limit: 100 })).tasks.length
        const estimate = yield* client.estimate("clip3", { prompt: "a paper boat", duration: 4 }, { userId: "u-7" })
        expect(estimate).toEqual({
          model: "clip3",
          input: { model: "clip3", prompt: "a paper boat", duration: 4 },
          adjustments: [{ field: "duration", requested: 4, applied: 8, reason: "t2v on the quality tier supports only 8 seconds" }],
          priceMicroUsd: expect.any(Number),
          priceUsd: (estimate.priceMicroUsd / 1_000_000).toFixed(6),
          rejection: null
        })
        expect((yield* client.list({ limit: 100 })).tasks.length).toBe(before)
        const task = yield* client.get(yield* client.submit("clip3", { prompt: "a paper boat", duration: 4 }, { userId: "u-7" }))
        expect([task.input, task.price_micro_usd]).toEqual([estimate.input, estimate.priceMicroUsd])
        const refused = yield* Effect.flip(client.estimate("alpha-image-2/text-to-image", { prompt: "a kite", n: 11 }))
        expect(refused).toMatchObject({
          _tag: "MediagateError",
          status: 400,
          msg: "input.n must be an integer between 1 and 10 for alpha-image-2/text-to-image"
        })
        const unknownModel = yield* Effect.flip(client.estimate("alpha-image-2" as "dream-4", { prompt: "a kite" }))
        expect((unknownModel as MediagateError).msg).toContain("model 'alpha-image-2' is not supported")
      })))

  it.live("callBackEvents are sent with a submit and an estimate: refused without completed, taken with it", () =>
    withClient((client) =>
      Effect.gen(function*() {
        const callBackUrl = "https://hooks.example.com/mediagate"
        const refused = yield* Effect.flip(client.estimate("dream-4", { prompt: "a koi pond" }, { callBackUrl, callBackEvents: ["started"] }))
        expect(refused).toMatchObject({ status: 400, msg: `callBackEvents must include "completed": the terminal callback is always sent` })
        const notSubmitted = yield* Effect.flip(client.submit("dream-4", { prompt: "a koi pond" }, { callBackEvents: ["completed"] }))
        expect(notSubmitted).toMatchObject({ status: 400, msg: "callBackEvents needs a callBackUrl to send them to" })
        const estimate = yield* client.estimate("dream-4", { prompt: "a koi pond" }, { callBackUrl, callBackEvents: ["progress", "completed"] })
        expect(estimate.rejection).toBeNull()
      })))

  it.live("a failed task ends run with its status and reason, not an error", () =>
    withClient((client) =>
      Effect.gen(function*() {
        const task = yield* client.run("dream-4", { prompt: "a koi pond [sim:fail]" }, { timeout: "30 seconds" })
        expect(task).toMatchObject({ status: "FAILURE", result: null, error: "simulated upstream failure" })
      })))

  it.live("errors are MediagateError with the server's status, code and msg", () =>
    Effect.gen(function*() {
      const invalid = yield* Effect.flip(withClient((client) => client.submit("alpha-image-2/text-to-image", { prompt: "a kite", n: 11 })))
      expect(invalid).toBeInstanceOf(MediagateError)
      expect(invalid).toMatchObject({
        status: 400,
        code: 400,
        msg: "input.n must be an integer between 1 and 10 for alpha-image-2/text-to-image"
      })
      expect(invalid.message).toBe("input.n must be an integer between 1 and 10 for alpha-image-2/text-to-image")

      const unknownModel = yield* Effect.flip(withClient((client) => client.submit("alpha-image-2" as "dream-4", { prompt: "a kite" })))
      expect(unknownModel).toMatchObject({ _tag: "MediagateError", status: 400 })
      expect((unknownModel as MediagateError).msg).toContain("model 'alpha-image-2' is not supported")

      const missing = yield* Effect.flip(withClient((client) => client.get("0190c8a4-0000-7000-8000-000000000000")))
      expect(missing).toMatchObject({ _tag: "MediagateError", status: 404, code: 404, msg: "task not found" })

      const wrongKey = yield* Effect.flip(withClient((client) => client.models, "not-the-key"))
      expect(wrongKey).toMatchObject({ _tag: "MediagateError", status: 401, code: 401, msg: "unauthorized" })

      const badLimit = yield* Effect.flip(withClient((client) => client.list({ limit: 1000 })))
      expect(badLimit).toMatchObject({ _tag: "MediagateError", status: 400, msg: "limit must be an integer between 1 and 100" })
    }))

  it.live("run with a local path uploads it first: the server holds the file, the task succeeds with the upload's URL", () =>
    withClient((client) =>
      Effect.gen(function*() {
        const upload = yield* client.upload(png)
        expect(upload).toMatchObject({ contentType: "image/png", bytes: readFileSync(png).length, width: 64, height: 48, durationSeconds: null })
        const served = yield* Effect.promise(() => fetch(upload.url).then(async (response) => Buffer.from(await response.arrayBuffer())))
        expect(served.equals(readFileSync(png))).toBe(true)
        const fromBlob = yield* client.upload(new Blob([readFileSync(png)], { type: "image/png" }))
        expect(fromBlob.fileId).not.toBe(upload.fileId)

        const task = yield* client.run(imageModel, { prompt: "autumn leaves", imageUrls: [png] }, { timeout: "30 seconds" })
        expect(task.status).toBe("SUCCESS")
        const [url] = task.input["imageUrls"] as ReadonlyArray<string>
        expect(url).toMatch(new RegExp(`^${baseUrl}/media/`))
        const file = yield* Effect.promise(() => fetch(url!).then(async (response) => Buffer.from(await response.arrayBuffer())))
        expect(file.equals(readFileSync(png))).toBe(true)
      })))

  it.live("the model ids the client types are the server's catalog", () =>
    withClient((client) =>
      Effect.gen(function*() {
        const catalog = yield* client.models
        expect(catalog.map((model) => model.id)).toEqual(modelIds)
        expect(catalog).toHaveLength(37)
      })))
})

describe("run follows the events stream", () => {
  let demo: Server
  beforeAll(async () => {
    demo = await startServer({ MEDIAGATE_API_KEY: key, MEDIAGATE_DATABASE_URL: "memory", MEDIAGATE_SIMULATOR_PROFILE: "demo" })
  }, 60_000)
  afterAll(async () => {
    if (demo !== undefined) await stop(demo, "SIGTERM")
  })

  it.live("a job of 2 to 4 s shows its queue positions and percents as the server sends them, with no query of the task", () =>
    Effect.gen(function*() {
      const paths: Array<string> = []
      const recording = Layer.effect(
        HttpClient.HttpClient,
        Effect.map(HttpClient.HttpClient, HttpClient.tapRequest((request) => Effect.sync(() => void paths.push(`${request.method} ${new URL(request.url, demo.url).pathname}`))))
      ).pipe(Layer.provide(FetchHttpClient.layer))
      const seen: Array<string> = []
      const task = yield* Effect.flatMap(MediagateClient.make({ baseUrl: demo.url, apiKey: key }), (client) =>
        client.run("dream-4", { prompt: "a koi pond" }, {
          onProgress: (t, p) =>
            void seen.push(`${t.status} ${p === null ? "-" : p.stage === "queued" ? `#${p.queue_position}` : `${p.stage} ${p.percent}`}`),
          timeout: "30 seconds"
        })).pipe(Effect.provide(recording))
      expect(task.status).toBe("SUCCESS")
      // Queue positions and percents between the start and the end, all from the stream: the task is never queried.
      const between = seen.slice(0, -1).filter((line) => line.startsWith("PROCESSING #") || line.startsWith("PROCESSING running"))
      expect(between.length, seen.join(", ")).toBeGreaterThanOrEqual(2)
      expect(seen.at(-1)).toMatch(/^SUCCESS/)
      expect(paths).toEqual(["POST /api/v1/task/submit", `GET /api/v1/task/${task.taskId}/events`])
    }).pipe(Effect.provide(FetchHttpClient.layer)), 30_000)

  it.live("events: the stream of an ended task is the task, then its end; an unknown task is 404 task not found", () =>
    Effect.flatMap(MediagateClient.make({ baseUrl: demo.url, apiKey: key }), (client) =>
      Effect.gen(function*() {
        const ended = yield* client.run("dream-4", { prompt: "a heron" })
        const updates = yield* Stream.runCollect(client.events(ended.taskId))
        expect([...updates].filter((update) => update._tag !== "KeepAlive")).toEqual([{ _tag: "Task", task: ended }])
        const unknown = yield* Effect.flip(Stream.runDrain(client.events("01900000-0000-7000-8000-000000000000")))
        expect(unknown).toMatchObject({ _tag: "MediagateError", status: 404, msg: "task not found" })
        const notWaited = yield* Effect.flip(client.waitFor("01900000-0000-7000-8000-000000000000"))
        expect(notWaited).toMatchObject({ _tag: "MediagateError", status: 404, msg: "task not found" })
      })).pipe(Effect.provide(FetchHttpClient.layer)), 30_000)
})

describe("promise facade", () => {
  it("submit, get, list, cancel and run resolve; failures reject with MediagateError", { timeout: 30_000 }, async () => {
    const mediagate = new Mediagate({ baseUrl, apiKey: key })
    const taskId = await mediagate.submit("alpha-image-2/text-to-image", { prompt: "a windmill" })
    expect((await mediagate.get(taskId)).taskId).toBe(taskId)
    expect((await mediagate.list({ limit: 5 })).tasks.map((task) => task.taskId)).toContain(taskId)

    const statuses: Array<string> = []
    const done = await mediagate.run("alpha-image-2/text-to-image", { prompt: "a mill pond", resolution: "2k" }, {
      onProgress: (task) => statuses.push(task.status),
      timeout: 30_000
    })
    expect(done.status).toBe("SUCCESS")
    expect(done.result?.type).toBe("image")
    expect(statuses.at(-1)).toBe("SUCCESS")

    const stuck = await mediagate.submit("dream-4", { prompt: "slow [sim:timeout]" })
    expect((await mediagate.cancel(stuck)).status).toBe("CANCELLED")

    const refused = await mediagate.submit("alpha-image-2/text-to-image", { prompt: "" }).then(() => undefined, (error: unknown) => error)
    expect(refused).toBeInstanceOf(MediagateError)
    expect(refused).toMatchObject({ status: 400, code: 400, msg: "input.prompt must not be empty for alpha-image-2/text-to-image" })

    const priced = await mediagate.estimate("alpha-image-2/text-to-image", { prompt: "a windmill", resolution: "2k", n: 2 })
    expect(priced).toMatchObject({ model: "alpha-image-2/text-to-image", adjustments: [], priceMicroUsd: 80_000, priceUsd: "0.080000" })

    const unauthorized = await new Mediagate({ baseUrl, apiKey: "wrong" }).get(taskId).then(() => undefined, (error: unknown) => error)
    expect(unauthorized).toBeInstanceOf(MediagateError)
    expect(unauthorized).toMatchObject({ status: 401, msg: "unauthorized" })
  })

  it("verifyCallback is there for receivers: a body signed with another secret is refused", () => {
    const refused = verifyCallback("whsec_c2VjcmV0", { "webhook-id": "msg_1", "webhook-timestamp": "1", "webhook-signature": "v1,AAAA" }, "{}", { now: 1000 })
    expect(Either.isLeft(refused)).toBe(true)
  })
})
