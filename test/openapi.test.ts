/**
 * The OpenAPI document describes exactly the answers the server gives: real answers of
 * every kind are validated against the schema the document gives for their path, method
 * and status.
 */
import { HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Validator } from "@seriousme/openapi-schema-validator"
import { Ajv } from "ajv"
import { Routes } from "@mediagate/http"
import { Effect, Layer, Option } from "effect"
import { apiKey, testServer } from "./support.js"

interface Answer {
  readonly status: number
  readonly body: unknown
}

const call = (request: HttpClientRequest.HttpClientRequest, key: string | null = apiKey) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const response = yield* client.execute(key === null ? request : request.pipe(HttpClientRequest.bearerToken(key)))
    return { status: response.status, body: yield* response.json } satisfies Answer
  })

const submit = (body: unknown) =>
  call(HttpClientRequest.post("/api/v1/task/submit").pipe(HttpClientRequest.bodyText(JSON.stringify(body), "application/json")))

/** Every key named `title` anywhere in a JSON value. */
const titles = (value: unknown): ReadonlyArray<unknown> =>
  Array.isArray(value)
    ? value.flatMap(titles)
    : typeof value === "object" && value !== null
    ? Object.entries(value).flatMap(([key, v]) => (key === "title" ? [v] : titles(v)))
    : []

const pointer = (...segments: ReadonlyArray<string>) =>
  segments.map((segment) => encodeURIComponent(segment.replace(/~/g, "~0").replace(/\//g, "~1"))).join("/")

describe("the OpenAPI document", () => {
  it.layer(testServer())((it) => {
    it.effect("describes the answers the server really gives, and only those", () =>
      Effect.gen(function*() {
        const served = yield* call(HttpClientRequest.get("/api/v1/openapi.json"))
        expect(served.status).toBe(200)
        const document = served.body as {
          servers: ReadonlyArray<{ url: string }>
          info: { title: string }
          paths: Record<string, Record<string, { responses: Record<string, unknown> }>>
          components: unknown
        }

        const server = yield* HttpServer.HttpServer
        const port = server.address._tag === "TcpAddress" ? server.address.port : 0
        expect(document.servers).toEqual([{ url: `http://127.0.0.1:${port}` }])
        expect(JSON.stringify(document)).not.toMatch(/HttpApiDecodeError|"_tag"|"issues"/)
        // Schema titles such as `between(4, 15)` or `int` name code, not the API.
        expect(titles({ paths: document.paths, components: document.components })).toEqual([])
        expect(JSON.stringify(document)).not.toContain("\"$id\"")
        expect(document.info.title).toBe("mediagate")

        const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true })
        ajv.addSchema({ ...document, $id: "openapi" })
        const conforms = (answer: Answer, ...location: ReadonlyArray<string>) => {
          const schema = `openapi#/${pointer(...location)}`
          const valid = ajv.validate({ $ref: schema }, answer.body)
          expect({ schema, body: answer.body, errors: valid ? null : ajv.errorsText() }).toEqual({ schema, body: answer.body, errors: null })
        }
        const documented = (path: string, method: string, answer: Answer) => {
          expect(Object.keys(document.paths[path]?.[method]?.responses ?? {})).toContain(String(answer.status))
          conforms(answer, "paths", path, method, "responses", String(answer.status), "content", "application/json", "schema")
        }

        const submitted = yield* submit({ model: "alpha-image-2/text-to-image", input: { prompt: "a kite" } })
        expect(submitted.status).toBe(200)
        documented("/api/v1/task/submit", "post", submitted)
        const taskId = (submitted.body as { data: { taskId: string } }).data.taskId

        const queried = yield* call(HttpClientRequest.get(`/api/v1/task/${taskId}`))
        expect(queried.status).toBe(200)
        documented("/api/v1/task/{taskId}", "get", queried)

        const invalid = yield* submit({ model: "alpha-image-2/text-to-image", input: { prompt: "x", n: 99 } })
        expect(invalid.status).toBe(400)
        documented("/api/v1/task/submit", "post", invalid)

        const moderated = yield* submit({ model: "alpha-image-2/text-to-image", input: { prompt: "x [sim:moderation]" } })
        expect([moderated.status, (moderated.body as { msg: string }).msg]).toEqual([400, "content rejected by moderation"])
        documented("/api/v1/task/submit", "post", moderated)

        const tooLarge = yield* submit({ model: "alpha-image-2/text-to-image", input: { prompt: "x".repeat(1_100_000) } })
        expect(tooLarge.status).toBe(413)
        documented("/api/v1/task/submit", "post", tooLarge)

        const unauthorized = yield* call(HttpClientRequest.get(`/api/v1/task/${taskId}`), null)
        expect(unauthorized.status).toBe(401)
        documented("/api/v1/task/{taskId}", "get", unauthorized)

        const notFound = yield* call(HttpClientRequest.get("/api/v1/task/0190c8a4-0000-7000-8000-000000000000"))
        expect(notFound.status).toBe(404)
        documented("/api/v1/task/{taskId}", "get", notFound)

        const badCursor = yield* call(HttpClientRequest.get("/api/v1/tasks?cursor=zzz"))
        expect(badCursor.status).toBe(400)
        documented("/api/v1/tasks", "get", badCursor)

        const listed = yield* call(HttpClientRequest.get("/api/v1/tasks?limit=5"))
        expect(listed.status).toBe(200)
        documented("/api/v1/tasks", "get", listed)

        const models = yield* call(HttpClientRequest.get("/api/v1/models"))
        expect(models.status).toBe(200)
        documented("/api/v1/models", "get", models)

        // No operation describes a method the path does not take; the schema is a component.
        const wrongMethod = yield* call(HttpClientRequest.del(`/api/v1/task/${taskId}`))
        expect(wrongMethod.status).toBe(405)
        conforms(wrongMethod, "components", "schemas", "MethodNotAllowed")

        // Statuses the server never answers are not documented.
        expect(Object.keys(document.paths["/api/v1/task/{taskId}"]!["get"]!.responses).sort()).toEqual(["200", "400", "401", "404", "500"])
        expect(Object.keys(document.paths["/api/v1/task/submit"]!["post"]!.responses).sort()).toEqual(["200", "400", "401", "409", "413", "422", "500", "503"])
      }))
  })

  it.layer(testServer())((it) => {
    it.effect("the public copy at /openapi.json is a valid OpenAPI document (a third-party validator says so)", () =>
      Effect.gen(function*() {
        const served = yield* call(HttpClientRequest.get("/openapi.json"), null)
        expect(served.status).toBe(200)
        const document = served.body as Record<string, unknown> & { openapi: string; paths: Record<string, unknown> }
        expect(document.openapi).toMatch(/^3\.1\./)
        expect(Object.keys(document.paths)).toEqual(expect.arrayContaining(["/api/v1/task/submit", "/api/v1/task/{taskId}"]))
        const validator = new Validator({ allErrors: true })
        const result = yield* Effect.promise(() => validator.validate(document))
        expect({ valid: result.valid, errors: result.errors ?? null }).toEqual({ valid: true, errors: null })
        // The validator does reject a broken document, so its "valid" above means something.
        const broken = yield* Effect.promise(() => new Validator().validate({ ...document, paths: { "no-slash": {} } }))
        expect(broken.valid).toBe(false)
      }))
  })

  it.effect("names the configured public URL in servers when there is one", () =>
    Effect.gen(function*() {
      const served = yield* call(HttpClientRequest.get("/api/v1/openapi.json"))
      expect((served.body as { servers: unknown }).servers).toEqual([{ url: "https://media.example.com" }])
    }).pipe(Effect.provide(testServer().pipe(Layer.provide(Layer.succeed(Routes.PublicUrl, Option.some("https://media.example.com")))))))
})
