/**
 * Every model over HTTP: each example of the catalog, submitted to the standalone
 * composition, reaches SUCCESS with the right result type and count, and its files are
 * real (PNG of the job's size, MP4 read by mp4box). Timed by the TestClock.
 */
import { HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Api, ModelCatalog } from "@mediagate/core"
import { Png } from "@mediagate/upstream"
import { Effect, TestClock } from "effect"
import * as MP4Box from "mp4box"
import { apiKey, testServer } from "./support.js"

const client = Effect.flatMap(HttpClient.HttpClient, (http) =>
  HttpApiClient.makeWith(Api.MediagateApi, {
    httpClient: http.pipe(HttpClient.mapRequest(HttpClientRequest.bearerToken(apiKey))),
    baseUrl: ""
  }))

const download = (url: string) =>
  Effect.gen(function*() {
    const response = yield* (yield* HttpClient.HttpClient).get(new URL(url).pathname)
    expect(response.status).toBe(200)
    return { contentType: response.headers["content-type"], bytes: new Uint8Array(yield* response.arrayBuffer) }
  })

/** Reads an MP4 with mp4box (GPAC's parser): duration in seconds and the video track's size. */
const probeMp4 = (bytes: Uint8Array) =>
  Effect.sync(() => {
    const file = MP4Box.createFile()
    let info: any
    file.onReady = (ready: any) => (info = ready)
    const buffer = bytes.slice().buffer as ArrayBuffer & { fileStart: number }
    buffer.fileStart = 0
    file.appendBuffer(buffer as any)
    file.flush()
    expect(info).toBeDefined()
    const track = info.tracks[0]
    return { seconds: info.duration / info.timescale, width: track.track_width, height: track.track_height }
  })

const untilTerminal = (taskId: string) =>
  Effect.gen(function*() {
    const api = yield* client
    for (let second = 0; second < 120; second++) {
      const { data } = yield* api.tasks.query({ path: { taskId }, urlParams: {} })
      if (!["PENDING", "SUBMITTED", "PROCESSING"].includes(data.status)) return data
      yield* TestClock.adjust("1 second")
    }
    return yield* Effect.dieMessage(`task ${taskId} did not finish`)
  })

describe("every model over HTTP", () => {
  it.layer(testServer({ profile: "instant" }), { timeout: 120_000 })((it) => {
    for (const model of ModelCatalog.allModels) {
      model.examples.forEach((example, index) => {
        it.effect(`${model.id} example ${index + 1}: SUCCESS with ${example.count} ${example.type}`, () =>
          Effect.gen(function*() {
            const api = yield* client
            const { data } = yield* api.tasks.submit({ headers: {}, payload: { model: model.id, input: example.input } })
            const done = yield* untilTerminal(data.taskId)
            expect(done.status).toBe("SUCCESS")
            expect(done.input).toEqual({ model: model.id, ...example.input })
            expect(done.result?.type).toBe(example.type)
            expect(done.result?.urls).toHaveLength(example.count)
            const job = (model.normalize(example.input) as any).right.job
            const file = yield* download(done.result!.urls[0]!)
            if (example.type === "image") {
              expect(file.contentType).toBe("image/png")
              const size = Png.readPngSize(file.bytes)!
              if (job.width !== null) expect(size).toEqual({ width: job.width, height: job.height })
            } else {
              expect(file.contentType).toBe("video/mp4")
              expect(yield* probeMp4(file.bytes)).toEqual({ seconds: job.duration, width: job.width, height: job.height })
            }
          }))
      })
    }

    it.effect("GET /api/v1/models lists every model with the JSON Schema of its input", () =>
      Effect.gen(function*() {
        const api = yield* client
        const { data } = yield* api.catalog.models()
        expect(data.models.map((m) => m.id)).toEqual(ModelCatalog.allModels.map((m) => m.id))
        for (const info of data.models) {
          expect(info.inputSchema["type"]).toBe("object")
          expect(info.inputSchema["required"]).toContain("prompt")
          expect(info.examples.length).toBeGreaterThan(0)
        }
        // No titles derived from code (`between(4, 15)`) anywhere in the schemas.
        expect(JSON.stringify(data.models)).not.toMatch(/"title"|between\(|minItems\(/)
        const clip3 = data.models.find((m) => m.id === "clip3")!
        expect((clip3.inputSchema["properties"] as any).duration.enum).toEqual([4, 6, 8])
        expect(clip3.inputSchema["additionalProperties"]).toBe(false)
        // Every model has prices in numbers: the spec's where it publishes them, the price table's otherwise.
        for (const info of data.models) {
          expect([info.id, info.prices.length > 0 && info.prices.every((priced) => priced.usd > 0)]).toEqual([info.id, true])
        }
        expect(data.models.filter((m) => m.priceSource === "spec").map((m) => m.family).sort()).toEqual(
          ["alpha-image-2", "alpha-image-2", ...data.models.filter((m) => m.family === "beta-imagine").map(() => "beta-imagine")].sort()
        )
        const alpha = data.models.find((m) => m.id === "alpha-image-2/text-to-image")!
        expect(alpha.prices.find((priced) => priced.input["resolution"] === "4k" && priced.input["n"] === 2)?.usd).toBe(0.12)
        const motion = data.models.find((m) => m.id === "motion-2.0")!
        expect(motion.priceSource).toBe("price table")
        expect(motion.prices.find((priced) => priced.input["duration"] === 5)?.usd).toBe(0.2)
      }))

    it.effect("motion mediaUrls beyond the limits: accepted, then FAILURE with INVALID_PARAMETERS", () =>
      Effect.gen(function*() {
        const api = yield* client
        const images = (count: number) => Array.from({ length: count }, (_, i) => `https://example.com/${i}.png`)
        const cases: ReadonlyArray<[string, ReadonlyArray<string>]> = [
          ["motion-2.0", images(10)],
          // A URL whose type the URL does not tell is no 400: the count rule comes first.
          ["motion-2.0", [...images(12), "https://example.com/signed?sig=abc"]],
          ["motion-1.5-pro", images(3)]
        ]
        for (const [model, mediaUrls] of cases) {
          const { data } = yield* api.tasks.submit({ headers: {}, payload: { model, input: { prompt: "x", mediaUrls } } })
          const task = yield* api.tasks.query({ path: { taskId: data.taskId }, urlParams: {} })
          expect(task.data.status).toBe("FAILURE")
          expect(task.data.failure_reason).toBe("INVALID_PARAMETERS")
          expect(task.data.result).toBeNull()
        }
      }))

    it.effect("a failing motion-2.0 job falls back to motion-1.5-pro, recorded in adjustments", () =>
      Effect.gen(function*() {
        const api = yield* client
        const { data } = yield* api.tasks.submit({ headers: {}, payload: { model: "motion-2.0", input: { prompt: "x [sim:fallback]", duration: 12 } } })
        const done = yield* untilTerminal(data.taskId)
        expect(done.status).toBe("SUCCESS")
        expect(done.adjustments.map((a) => [a.field, a.applied])).toEqual([["model", "motion-1.5-pro"], ["duration", 10]])
        const video = yield* download(done.result!.urls[0]!)
        expect((yield* probeMp4(video.bytes)).seconds).toBe(10)
      }))

    it.effect("with fallback false the original error is returned", () =>
      Effect.gen(function*() {
        const api = yield* client
        const { data } = yield* api.tasks.submit({ headers: {}, payload: { model: "motion-2.0", input: { prompt: "x [sim:fallback]", fallback: false } } })
        expect((yield* untilTerminal(data.taskId)).status).toBe("SUCCESS")
        const failing = yield* api.tasks.submit({ headers: {}, payload: { model: "motion-2.0", input: { prompt: "x [sim:fail]", fallback: false } } })
        const failed = yield* untilTerminal(failing.data.taskId)
        expect(failed.status).toBe("FAILURE")
        expect(failed.adjustments).toEqual([])
      }))

    it.effect("silent adjustments are shown to the client", () =>
      Effect.gen(function*() {
        const api = yield* client
        const { data } = yield* api.tasks.submit({
        headers: {},
          payload: { model: "clip3", input: { prompt: "x", imageUrls: ["https://example.com/a.jpg"], duration: 6 } }
        })
        const task = yield* api.tasks.query({ path: { taskId: data.taskId }, urlParams: {} })
        expect(task.data.input).toEqual({ model: "clip3", prompt: "x", imageUrls: ["https://example.com/a.jpg"], duration: 6 })
        expect(task.data.adjustments).toEqual([
          { field: "duration", requested: 6, applied: 8, reason: "i2v on clip3 and clip3_fast supports only 8 seconds" }
        ])
      }))
  })
})
