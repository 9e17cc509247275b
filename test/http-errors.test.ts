/**
 * Every error case of the HTTP contract, over a real loopback server, with raw requests:
 * each answer is the envelope with the status equal to its code.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Answer } from "./support.js"
import { apiKey, client, otherApiKey, Raw, testServer } from "./support.js"

const api = client()
const anonymous = client(null)

/** Submits whose bodies are off the wire shape on purpose: as text, or any JSON value. */
const submitRaw = (text: string, contentType?: string | null) => api.call("POST", "/api/v1/task/submit", { body: new Raw(text, contentType) })
const submit = (body: unknown, key?: string) => api.call("POST", "/api/v1/task/submit", { body, key })

const expectEnvelope = (answer: Answer, code: number, msg: string) => {
  expect(answer.status).toBe(code)
  expect(answer.headers["content-type"]).toMatch(/^application\/json/)
  expect(answer.body).toEqual({ code, msg })
  expect(answer.text).not.toMatch(/at .*\.ts|stack|_tag|HttpApi/)
}

describe("HTTP errors", () => {
  it.layer(testServer())((it) => {
    it.effect("401 without an Authorization header, on submit and query", () =>
      Effect.gen(function*() {
        const noKey = anonymous.submit({ model: "alpha-image-2/text-to-image", input: { prompt: "x" } })
        expectEnvelope(yield* noKey, 401, "unauthorized")
        expectEnvelope(yield* anonymous.call("GET", "/api/v1/task/abc"), 401, "unauthorized")
      }))

    it.effect("401 with a wrong key, another scheme, or the key without the Bearer scheme", () =>
      Effect.gen(function*() {
        const body = { model: "alpha-image-2/text-to-image", input: { prompt: "x" } }
        expectEnvelope(yield* submit(body, "wrong-key"), 401, "unauthorized")
        for (const header of [`Basic ${apiKey}`, apiKey, `Bearer`, `Bearer ${apiKey} extra`, `xxxxxxx${apiKey}`]) {
          const request = anonymous.call("GET", "/api/v1/task/abc", { headers: { authorization: header } })
          expectEnvelope(yield* request, 401, "unauthorized")
        }
      }))

    it.effect("the Bearer scheme is case-insensitive (RFC 7235)", () =>
      Effect.gen(function*() {
        const request = anonymous.call("GET", "/api/v1/task/abc", { headers: { authorization: `bearer ${apiKey}` } })
        expectEnvelope(yield* request, 404, "task not found")
      }))

    it.effect("a leading byte order mark is tolerated", () =>
      Effect.gen(function*() {
        const answer = yield* submitRaw(`\uFEFF${JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "x" } })}`)
        expect(answer.status).toBe(200)
      }))

    it.effect("any unknown task id, however long or odd, is 'task not found'", () =>
      Effect.gen(function*() {
        for (const id of ["x".repeat(5000), "..%2F..%2Fetc", "%00", "x'%20OR%20'1'='1"]) {
          expectEnvelope(yield* api.call("GET", `/api/v1/task/${id}`), 404, "task not found")
        }
      }))

    it.effect("400 on malformed JSON", () =>
      Effect.gen(function*() {
        expectEnvelope(yield* submitRaw("{\"model\": "), 400, "request body is not valid JSON")
        expectEnvelope(yield* submitRaw(""), 400, "request body is required")
      }))

    it.effect("400 on a wrong or missing content type", () =>
      Effect.gen(function*() {
        const body = JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "x" } })
        expectEnvelope(yield* submitRaw(body, "text/plain"), 400, "Content-Type must be application/json")
        expectEnvelope(
          yield* submitRaw(body, "application/x-www-form-urlencoded"),
          400,
          "Content-Type must be application/json"
        )
        const answer = yield* submitRaw(body, null)
        expectEnvelope(answer, 400, "Content-Type must be application/json")
      }))

    it.effect("a JSON body that is not an object is refused", () =>
      Effect.gen(function*() {
        expectEnvelope(yield* submitRaw("[1,2]"), 400, "request body must be a JSON object")
        expectEnvelope(yield* submitRaw("\"text\""), 400, "request body must be a JSON object")
        expectEnvelope(yield* submitRaw("null"), 400, "request body must be a JSON object")
      }))

    it.effect("404 on unknown routes, 405 on a wrong method; 401 first under /api/v1/ without a key", () =>
      Effect.gen(function*() {
        expectEnvelope(yield* api.call("GET", "/api/v1/nope"), 404, "not found: /api/v1/nope")
        expectEnvelope(yield* anonymous.call("GET", "/api/v1/nope"), 401, "unauthorized")
        expectEnvelope(yield* anonymous.call("GET", "/nope"), 404, "not found: /nope")
        expectEnvelope(yield* api.call("PUT", "/api/v1/task/submit"), 405, "method PUT is not allowed here; use POST")
        expectEnvelope(yield* api.call("DELETE", "/api/v1/task/abc"), 405, "method DELETE is not allowed here; use GET")
        expectEnvelope(yield* api.call("GET", "/api/v1/task/abc/cancel/x"), 404, "not found: /api/v1/task/abc/cancel/x")
        expectEnvelope(yield* anonymous.call("GET", "/media/nothing-here.png"), 404, "not found: /media/nothing-here.png")
        // The pages take GET only.
        for (const path of ["/docs", "/playground", "/console"]) {
          const wrong = yield* anonymous.call("POST", path)
          expectEnvelope(wrong, 405, "method POST is not allowed here; use GET")
          expect(wrong.headers["allow"]).toBe("GET")
        }
      }))

    it.effect("400 'model is required' when model is missing, and other envelope problems", () =>
      Effect.gen(function*() {
        expectEnvelope(yield* submit({ input: { prompt: "x" } }), 400, "model is required")
        expectEnvelope(yield* submit({ model: "", input: { prompt: "x" } }), 400, "model is required")
        expectEnvelope(yield* submit({ model: 7, input: { prompt: "x" } }), 400, "model must be a string")
        expectEnvelope(yield* submit({ model: "alpha-image-2/text-to-image" }), 400, "input is required")
        expectEnvelope(yield* submit({ model: "alpha-image-2/text-to-image", input: "x" }), 400, "input must be an object")
        expectEnvelope(
          yield* submit({ model: "alpha-image-2/text-to-image", input: { prompt: "x" }, extra: 1 }),
          400,
          "extra is not a supported field"
        )
        expectEnvelope(
          yield* submit({ model: "alpha-image-2/text-to-image", input: { prompt: "x" }, callBackUrl: "http://localhost:9/cb" }),
          400,
          "callBackUrl must name a public host (localhost and private addresses are not supported; for local development allow them with MEDIAGATE_ALLOW_PRIVATE_URLS=true, or allowPrivateUrls: true in Deployment.services (or Mediagate.layer) when embedding)"
        )
        expectEnvelope(
          yield* submit({ model: "alpha-image-2/text-to-image", input: { prompt: "x" }, user_id: 5 }),
          400,
          "user_id must be a string"
        )
      }))

    it.effect("400 on an unknown model", () =>
      Effect.gen(function*() {
        const hint = "GET /api/v1/models lists every model"
        expectEnvelope(yield* submit({ model: "gamma-9", input: { prompt: "x" } }), 400, `model 'gamma-9' is not supported; ${hint}`)
        const long = "m".repeat(100_000)
        expectEnvelope(yield* submit({ model: long, input: { prompt: "x" } }), 400, `model '${"m".repeat(64)}…' is not supported; ${hint}`)
      }))

    it.effect("400 naming the field and the rule on invalid input", () =>
      Effect.gen(function*() {
        const cases: ReadonlyArray<[unknown, string]> = [
          [{ prompt: "x", n: 11 }, "input.n must be an integer between 1 and 10 for alpha-image-2/text-to-image"],
          [{ n: 1 }, "input.prompt is required for alpha-image-2/text-to-image"],
          [{ prompt: "x", ratio: "7:3" }, "input.ratio must be one of 1:1, 3:2, 2:3, 4:3, 3:4, 5:4, 4:5, 16:9, 9:16, 2:1, 1:2, 21:9, 9:21 for alpha-image-2/text-to-image"],
          [{ prompt: "x", ratio: "1:1", resolution: "4k" }, "input.ratio must be one of 16:9, 9:16, 2:1, 1:2, 21:9, 9:21 when resolution is 4k for alpha-image-2/text-to-image"],
          [{ prompt: "x", resolution: "8k" }, "input.resolution must be one of 1k, 2k, 4k for alpha-image-2/text-to-image"],
          [{ prompt: "x", seed: 1 }, "input.seed is not a supported field for alpha-image-2/text-to-image"]
        ]
        for (const [input, msg] of cases) {
          expectEnvelope(yield* submit({ model: "alpha-image-2/text-to-image", input }), 400, msg)
        }
        expectEnvelope(
          yield* submit({ model: "alpha-image-2/image-to-image", input: { prompt: "x", imageUrls: [] } }),
          400,
          "input.imageUrls must contain exactly 1 URL for alpha-image-2/image-to-image"
        )
        expectEnvelope(
          yield* submit({ model: "alpha-image-2/image-to-image", input: { prompt: "x", imageUrls: ["https://10.0.0.1/a.png"] } }),
          400,
          "input.imageUrls[0] must name a public host (localhost and private addresses are not supported; for local development allow them with MEDIAGATE_ALLOW_PRIVATE_URLS=true, or allowPrivateUrls: true in Deployment.services (or Mediagate.layer) when embedding) for alpha-image-2/image-to-image"
        )
      }))

    it.effect("400 with data.flagged and all 13 categories when moderation rejects", () =>
      Effect.gen(function*() {
        const answer = yield* submit({ model: "alpha-image-2/text-to-image", input: { prompt: "bad [sim:moderation]" } })
        expect(answer.status).toBe(400)
        expect(answer.body.code).toBe(400)
        expect(answer.body.msg).toBe("content rejected by moderation")
        expect(answer.body.data.flagged).toBe(true)
        expect(Object.keys(answer.body.data.categories)).toHaveLength(13)
        expect(Object.values(answer.body.data.categories).every((v) => typeof v === "boolean")).toBe(true)
      }))

    it.effect("404 'task not found' for an unknown task and for another account's task", () =>
      Effect.gen(function*() {
        expectEnvelope(
          yield* api.call("GET", "/api/v1/task/0190c8a4-0000-7000-8000-000000000000"),
          404,
          "task not found"
        )
        const created = yield* submit({ model: "alpha-image-2/text-to-image", input: { prompt: "mine" } })
        expect(created.status).toBe(200)
        const taskId = created.body.data.taskId as string
        const mine = yield* api.call("GET", `/api/v1/task/${taskId}`)
        expect(mine.status).toBe(200)
        const theirs = yield* api.query(taskId, { key: otherApiKey })
        expectEnvelope(theirs, 404, "task not found")
      }))

    it.effect("413 on a body over 1 MiB", () =>
      Effect.gen(function*() {
        const big = JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "x".repeat(1_100_000) } })
        expectEnvelope(yield* submitRaw(big), 413, "request body must be at most 1048576 bytes")
      }))

    it.effect("the OpenAPI document is served under /api/v1/ with the key", () =>
      Effect.gen(function*() {
        const answer = yield* api.call("GET", "/api/v1/openapi.json")
        expect(answer.status).toBe(200)
        expect(Object.keys(answer.body.paths)).toEqual(expect.arrayContaining(["/api/v1/task/submit", "/api/v1/task/{taskId}"]))
        expectEnvelope(yield* anonymous.call("GET", "/api/v1/openapi.json"), 401, "unauthorized")
      }))
  })
})
