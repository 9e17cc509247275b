/**
 * The whole service end to end over HTTP, timed by the TestClock: submit, advance virtual
 * time, query SUCCESS, download the PNG files and check their pixel size.
 */
import { HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Api } from "@mediagate/core"
import { Effect, TestClock } from "effect"
import { apiKey, testServer } from "./support.js"

const client = Effect.flatMap(HttpClient.HttpClient, (http) =>
  HttpApiClient.makeWith(Api.MediagateApi, {
    httpClient: http.pipe(HttpClient.mapRequest(HttpClientRequest.bearerToken(apiKey))),
    baseUrl: ""
  }))

/** Reads width and height from a PNG's IHDR chunk. */
const pngSize = (bytes: Uint8Array) => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  expect(Array.from(bytes.slice(0, 8))).toEqual([137, 80, 78, 71, 13, 10, 26, 10])
  expect(new TextDecoder().decode(bytes.slice(12, 16))).toBe("IHDR")
  return { width: view.getUint32(16), height: view.getUint32(20) }
}

const download = (url: string) =>
  Effect.gen(function*() {
    const http = yield* HttpClient.HttpClient
    // layerTest's client is bound to the test server; keep only the path of the absolute URL.
    const response = yield* http.get(new URL(url).pathname)
    expect(response.status).toBe(200)
    expect(response.headers["content-type"]).toBe("image/png")
    return new Uint8Array(yield* response.arrayBuffer)
  })

/** Advances virtual time a second at a time until the task is terminal. */
const advanceUntilTerminal = (taskId: string, maxSeconds = 120) =>
  Effect.gen(function*() {
    const api = yield* client
    for (let second = 0; second <= maxSeconds; second++) {
      const { data } = yield* api.tasks.query({ path: { taskId }, urlParams: {} })
      if (["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"].includes(data.status)) return data
      yield* TestClock.adjust("1 second")
    }
    return yield* Effect.dieMessage(`task ${taskId} not terminal after ${maxSeconds} virtual seconds`)
  })

describe("end to end with the TestClock", () => {
  it.effect("alpha-image-2/text-to-image: submit, advance time, SUCCESS with n PNGs of the table's size", () =>
    Effect.gen(function*() {
      const api = yield* client
      const submitted = yield* api.tasks.submit({
        headers: {},
        payload: { model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse at dawn", ratio: "16:9", n: 3 } }
      })
      expect(submitted.code).toBe(0)
      expect(submitted.msg).toBe("ok")
      const taskId = submitted.data.taskId
      expect(taskId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)

      // No virtual time has passed: the demo simulator cannot have finished.
      const early = yield* api.tasks.query({ path: { taskId }, urlParams: {} })
      expect(["PENDING", "PROCESSING"]).toContain(early.data.status)
      expect(early.data.result).toBeNull()
      expect(early.data.failure_reason).toBeNull()

      const done = yield* advanceUntilTerminal(taskId)
      expect(done.status).toBe("SUCCESS")
      expect(done.failure_reason).toBeNull()
      expect(done.input).toEqual({ model: "alpha-image-2/text-to-image", prompt: "a lighthouse at dawn", ratio: "16:9", n: 3 })
      expect(done.result?.type).toBe("image")
      expect(done.result?.urls).toHaveLength(3)
      expect(new Set(done.result?.urls).size).toBe(3)
      expect(done.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
      expect(Date.parse(done.updated_at)).toBeGreaterThan(Date.parse(done.created_at))
      for (const url of done.result!.urls) {
        expect(pngSize(yield* download(url))).toEqual({ width: 1536, height: 864 })
      }
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))

  it.effect("image-to-image at 2k with ratio 3:4 gives 1536x2048", () =>
    Effect.gen(function*() {
      const api = yield* client
      const { data } = yield* api.tasks.submit({
        headers: {},
        payload: {
          model: "alpha-image-2/image-to-image",
          input: { prompt: "make it autumn", imageUrls: ["https://example.com/in.jpg"], ratio: "3:4", resolution: "2k" }
        }
      })
      const done = yield* advanceUntilTerminal(data.taskId)
      expect(done.status).toBe("SUCCESS")
      expect(done.result?.urls).toHaveLength(1)
      expect(pngSize(yield* download(done.result!.urls[0]!))).toEqual({ width: 1536, height: 2048 })
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))

  it.effect("without a ratio the upstream's choice is 1:1 at 1k", () =>
    Effect.gen(function*() {
      const api = yield* client
      const { data } = yield* api.tasks.submit({ headers: {}, payload: { model: "alpha-image-2/text-to-image", input: { prompt: "x" } } })
      const done = yield* advanceUntilTerminal(data.taskId)
      expect(done.result?.urls).toHaveLength(1)
      expect(pngSize(yield* download(done.result!.urls[0]!))).toEqual({ width: 1024, height: 1024 })
      expect(done.input).toEqual({ model: "alpha-image-2/text-to-image", prompt: "x" })
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))

  it.effect("[sim:fail] ends in FAILURE with failure_reason null and result null", () =>
    Effect.gen(function*() {
      const api = yield* client
      const { data } = yield* api.tasks.submit({
        headers: {},
        payload: { model: "alpha-image-2/text-to-image", input: { prompt: "x [sim:fail]" } }
      })
      const done = yield* advanceUntilTerminal(data.taskId)
      expect(done.status).toBe("FAILURE")
      expect(done.failure_reason).toBeNull()
      expect(done.result).toBeNull()
      // Additive: the upstream's own words, for the person debugging it.
      expect(done.error).toBe("simulated upstream failure")
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))

  it.effect("[sim:rejected] and [sim:insufficient] carry their failure classes", () =>
    Effect.gen(function*() {
      const api = yield* client
      for (const [marker, reason] of [["[sim:rejected]", "CONTENT_MODERATION"], ["[sim:insufficient]", "INSUFFICIENT_POINTS"]]) {
        const { data } = yield* api.tasks.submit({
        headers: {},
          payload: { model: "alpha-image-2/text-to-image", input: { prompt: `x ${marker}` } }
        })
        const done = yield* advanceUntilTerminal(data.taskId)
        expect(done.status).toBe("FAILURE")
        expect(done.failure_reason).toBe(reason)
      }
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))

  it.effect("[sim:timeout] becomes TIMEOUT when the model's 10-minute deadline passes, not before", () =>
    Effect.gen(function*() {
      const api = yield* client
      const { data } = yield* api.tasks.submit({
        headers: {},
        payload: { model: "alpha-image-2/text-to-image", input: { prompt: "x [sim:timeout]" } }
      })
      yield* TestClock.adjust("9 minutes")
      const before = yield* api.tasks.query({ path: { taskId: data.taskId }, urlParams: {} })
      expect(before.data.status).toBe("PROCESSING")
      const done = yield* advanceUntilTerminal(data.taskId, 120)
      expect(done.status).toBe("TIMEOUT")
      expect(done.result).toBeNull()
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))

  it.effect("the typed client sees the envelope errors as typed failures", () =>
    Effect.gen(function*() {
      const api = yield* client
      const missing = yield* api.tasks.query({ path: { taskId: "nope" }, urlParams: {} }).pipe(Effect.flip)
      expect(missing).toBeInstanceOf(Api.NotFound)
      expect(missing).toMatchObject({ code: 404, msg: "task not found" })
      const invalid = yield* api.tasks.submit({
        headers: {},
        payload: { model: "alpha-image-2/text-to-image", input: { prompt: "x", n: 0 } }
      }).pipe(Effect.flip)
      expect(invalid).toMatchObject({ code: 400, msg: "input.n must be an integer between 1 and 10 for alpha-image-2/text-to-image" })
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))
})
