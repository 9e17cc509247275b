/**
 * The OpenAPI document describes exactly the answers the server gives: real answers of
 * every kind are validated against the schema the document gives for their path, method
 * and status.
 */
import { HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Validator } from "@seriousme/openapi-schema-validator"
import { Ajv } from "ajv"
import { AuthFailures, HeldRequests, RateLimit, Routes } from "@mediagate/http"
import { Duration, Effect, Layer, Logger, Option } from "effect"
import { Outage, outageServer } from "./outage.js"
import { apiKey, idleServer, testServer } from "./support.js"

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
        // 403: an admin key on a customer path (and a scoped key's rule on submit).
        expect(Object.keys(document.paths["/api/v1/task/{taskId}"]!["get"]!.responses).sort()).toEqual(["200", "400", "401", "403", "404", "429", "500", "503"])
        expect(Object.keys(document.paths["/api/v1/task/submit"]!["post"]!.responses).sort()).toEqual(["200", "400", "401", "403", "408", "409", "413", "422", "429", "500", "503"])
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

/** The document as served, with the few shapes these tests read. */
interface Document {
  readonly security?: ReadonlyArray<unknown>
  readonly paths: Record<string, Record<string, Operation>>
  readonly components: { readonly schemas: Record<string, JsonSchema>; readonly securitySchemes?: Record<string, JsonSchema> }
}
interface Operation {
  readonly summary?: string
  readonly description?: string
  readonly parameters?: ReadonlyArray<{ readonly name: string; readonly in: string; readonly schema: JsonSchema }>
  readonly security?: ReadonlyArray<unknown>
  readonly requestBody?: unknown
  readonly responses: Record<string, {
    readonly headers?: Record<string, { readonly required?: boolean; readonly schema: JsonSchema }>
    readonly content?: Record<string, { readonly schema: JsonSchema }>
  }>
}
type JsonSchema = Record<string, any>

interface Seen {
  readonly status: number
  readonly body: unknown
  readonly headers: Readonly<Record<string, string>>
}

/** A request with (or without) the key, its answer with its headers. */
const send = (request: HttpClientRequest.HttpClientRequest, key: string | null = apiKey) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const response = yield* client.execute(key === null ? request : request.pipe(HttpClientRequest.bearerToken(key)))
    const text = yield* response.text
    return { status: response.status, body: text === "" ? null : JSON.parse(text), headers: response.headers } satisfies Seen
  })

const getDocument = Effect.map(send(HttpClientRequest.get("/openapi.json"), null), (answer) => answer.body as Document)

const submitRequest = (body: unknown, headers: Record<string, string> = {}) =>
  HttpClientRequest.post("/api/v1/task/submit").pipe(
    HttpClientRequest.setHeaders(headers),
    HttpClientRequest.bodyText(JSON.stringify(body), "application/json")
  )

/** The same body to estimate, which takes submit's. */
const estimateRequest = (body: unknown) =>
  HttpClientRequest.post("/api/v1/task/estimate").pipe(HttpClientRequest.bodyText(JSON.stringify(body), "application/json"))

const validBody = { model: "alpha-image-2/text-to-image", input: { prompt: "a kite" } }

/** A task of the test account that has ended (cancelled), so that `?wait=` answers at once. */
const endedTask = Effect.gen(function*() {
  const submitted = yield* send(submitRequest(validBody))
  const taskId = (submitted.body as { data: { taskId: string } }).data.taskId
  expect((yield* send(HttpClientRequest.post(`/api/v1/task/${taskId}/cancel`))).status).toBe(200)
  return taskId
})

const unknownTask = "0190c8a4-0000-7000-8000-000000000000"

/** Whether an operation is the admin API's (an admin key; test/admin-auth.test.ts and test/admin-api.test.ts cover it). */
const isAdminPath = (path: string) => path.startsWith("/api/v1/admin/")

/** Every operation of the document but the admin API's, with a request for it. */
const customerOperations = (document: Document, taskId: string) => operations(document, taskId).filter(({ path }) => !isAdminPath(path))

/** Every operation of the document, with a request for it (`taskId` fills the path). */
const operations = (document: Document, taskId: string) =>
  Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item).map(([method, operation]) => {
      const url = path.replace("{taskId}", taskId)
      const request = method === "post"
        ? (path.endsWith("/submit") ? submitRequest(validBody) : path.endsWith("/estimate") ? estimateRequest(validBody) : HttpClientRequest.post(url))
        : HttpClientRequest.get(url)
      return { path, method, operation, request }
    })
  )

/** An https URL of exactly `length` characters on a public host. */
const urlOf = (length: number) => {
  const base = "https://example.com/"
  return `${base}${"a".repeat(Math.max(0, length - base.length))}`
}

/** A value of `length` characters the field's schema would take but for the length. */
const stringOf = (schema: JsonSchema, length: number) => schema["format"] === "uri" ? urlOf(length) : "a".repeat(length)

/**
 * Values just inside and just outside each bound a schema declares (minimum, maximum,
 * minLength, maxLength).
 */
const boundSamples = (schema: JsonSchema): ReadonlyArray<string | number> => {
  const samples: Array<string | number> = []
  if (typeof schema["minimum"] === "number") samples.push(schema["minimum"], schema["minimum"] - 1)
  if (typeof schema["maximum"] === "number") samples.push(schema["maximum"], schema["maximum"] + 1)
  if (typeof schema["minLength"] === "number") {
    samples.push(stringOf(schema, schema["minLength"]))
    if (schema["minLength"] > 0) samples.push(stringOf(schema, schema["minLength"] - 1))
  }
  if (typeof schema["maxLength"] === "number") samples.push(stringOf(schema, schema["maxLength"]), stringOf(schema, schema["maxLength"] + 1))
  return samples
}

/** Values for what a pattern or format says, beyond the bounds: some the server takes, some it refuses. */
const patternSamples: Readonly<Record<string, ReadonlyArray<string>>> = {
  status: ["SUCCESS", "SUCCESS,FAILURE", "PENDING, CANCELLED", "SUCCES", "success", "SUCCESS,,FAILURE", ""],
  cursor: [unknownTask, unknownTask.toUpperCase(), "zzz", `${unknownTask}0`, ""],
  created_after: ["2025-01-31", "2025-01-31T12:00:00Z", "2025-01-31T12:00:00.123+01:00", "2025-01-31 12:00:00+0100", "2025-01-31T12:00:00", "yesterday", ""],
  created_before: ["2025-01-31T12:00Z", "2025-1-31", ""],
  wait: ["1.5", "abc", "-1", ""],
  limit: ["abc", "2.0", ""],
  "Idempotency-Key": ["k", "\"quoted key\"", "\"a\\\"b\"", "\"a\\b\"", "\"\"", "\"" + "a".repeat(255) + "\"", "\"" + "a".repeat(256) + "\"", "\"abc", "é"],
  callBackUrl: ["https://example.com/cb", "HTTP://EXAMPLE.COM/cb", "https:example.com/cb", "ftp://example.com/cb", "example.com/cb"],
  prompt: ["   ", "\n\t", " a "],
  user_id: [""]
}

/** A query or header value as the parameter's schema reads it: digits are a number where the type is integer. */
const asParameter = (schema: JsonSchema, value: string | number) =>
  schema["type"] === "integer" && typeof value === "string" && /^-?\d+$/.test(value) ? Number(value) : value

/** The string member of `anyOf` (a nullable field), or the schema itself. */
const stringMember = (schema: JsonSchema): JsonSchema =>
  (schema["anyOf"] as ReadonlyArray<JsonSchema> | undefined)?.find((member) => member["type"] === "string") ?? schema

describe("the OpenAPI document's key and titles", () => {
  it.effect("declares the bearer key: the scheme, the document's default, and on every operation under /api/v1/", () =>
    Effect.gen(function*() {
      const document = yield* getDocument
      expect(document.components.securitySchemes).toEqual({
        bearer: { type: "http", scheme: "bearer", description: expect.stringContaining("Authorization: Bearer <key>") },
        adminBearer: { type: "http", scheme: "bearer", description: expect.stringContaining("admin key") }
      })
      // The default is what viewers (the docs page's authentication box) offer: either key.
      expect(document.security).toEqual([{ bearer: [] }, { adminBearer: [] }])
      for (const { method, operation, path } of operations(document, unknownTask).filter(({ path }) => isAdminPath(path))) {
        expect({ path, method, security: operation.security }).toEqual({ path, method, security: [{ adminBearer: [] }] })
      }
      const all = customerOperations(document, unknownTask)
      expect(all.length).toBe(14)
      for (const { method, operation, path } of all) {
        // None under /api/v1/ is public; a public operation would say `security: []`.
        expect(path.startsWith("/api/v1/")).toBe(true)
        expect({ path, method, security: operation.security }).toEqual({ path, method, security: [{ bearer: [] }] })
      }
      // Declaring it changed nothing the server answers: no key is still the 401 envelope.
      const answer = yield* send(HttpClientRequest.get("/api/v1/models"), null)
      expect([answer.status, answer.body]).toEqual([401, { code: 401, msg: "unauthorized" }])
    }).pipe(Effect.provide(idleServer)))

  it.effect("titles are plain: no remark in parentheses; what the spec lacks says so in the description", () =>
    Effect.gen(function*() {
      const document = yield* getDocument
      for (const { method, operation, path } of operations(document, unknownTask)) {
        expect({ path, method, summary: operation.summary }).toEqual({ path, method, summary: expect.stringMatching(/^[A-Z][^()]*$/) })
        const inSpec = path === "/api/v1/task/submit" || (path === "/api/v1/task/{taskId}" && method === "get")
        expect({ path, method, additive: operation.description?.startsWith("Additive: not in the spec.") ?? false })
          .toEqual({ path, method, additive: !inSpec })
      }
    }).pipe(Effect.provide(idleServer)))
})

describe("the OpenAPI document says exactly what the server enforces", () => {
  it.effect("every bound and pattern of a parameter or of the submit body: a value just inside is accepted, just outside is 400", () =>
    Effect.gen(function*() {
      const document = yield* getDocument
      const taskId = yield* endedTask
      const ajv = new Ajv({ strict: false, validateFormats: false })

      /** Each field the tests probe: where it sits, its schema, and the request carrying a value in it. */
      const fields: Array<{ readonly name: string; readonly schema: JsonSchema; readonly request: (value: string) => HttpClientRequest.HttpClientRequest }> = []
      // The admin API's parameters are probed with an admin key (test/admin-api.test.ts).
      for (const [path, item] of Object.entries(document.paths).filter(([path]) => !isAdminPath(path))) {
        for (const [method, operation] of Object.entries(item)) {
          for (const parameter of operation.parameters ?? []) {
            if (parameter.in === "query") {
              const url = path.replace("{taskId}", taskId)
              expect(method).toBe("get")
              fields.push({
                name: parameter.name,
                schema: parameter.schema,
                request: (value) => HttpClientRequest.get(`${url}?${new URLSearchParams({ [parameter.name]: value })}`)
              })
            } else if (parameter.in === "header") {
              expect(path).toBe("/api/v1/task/submit")
              fields.push({ name: parameter.name, schema: parameter.schema, request: (value) => submitRequest(validBody, { [parameter.name]: value }) })
            }
          }
        }
      }
      const body = document.components.schemas["SubmitRequest"]!
      const probedOn: Array<string> = []
      expect(body["required"]).toEqual(["model", "input"])
      // callBackEvents is only taken with a callBackUrl, and the document says so.
      expect(body["dependentRequired"]).toEqual({ callBackEvents: ["callBackUrl"] })
      // Estimate declares the same body (SubmitRequest), so each of its fields is probed on both.
      expect(document.paths["/api/v1/task/estimate"]!["post"]!.requestBody).toEqual(document.paths["/api/v1/task/submit"]!["post"]!.requestBody)
      for (const [operation, send] of [["submit", submitRequest], ["estimate", estimateRequest]] as const) {
        for (const name of ["callBackUrl", "user_id"]) {
          fields.push({ name, schema: stringMember(body["properties"][name]), request: (value) => send({ ...validBody, [name]: value }) })
        }
        fields.push({
          name: "prompt",
          schema: body["properties"]["input"]["properties"]["prompt"],
          request: (value) => send({ ...validBody, input: { prompt: value } })
        })
        probedOn.push(operation)
      }
      expect(fields.map((field) => field.name).sort()).toEqual(
        ["Idempotency-Key", "callBackUrl", "callBackUrl", "created_after", "created_before", "cursor", "from", "group_by", "limit", "model", "prompt", "prompt", "status", "to", "user_id", "user_id", "wait"]
      )
      expect(probedOn).toEqual(["submit", "estimate"])

      const disagreements: Array<unknown> = []
      const probed: Array<string> = []
      for (const field of fields) {
        for (const value of [...boundSamples(field.schema), ...(patternSamples[field.name] ?? [])]) {
          const answer = yield* send(field.request(String(value)))
          expect([200, 400]).toContain(answer.status)
          const declared = ajv.validate(field.schema, asParameter(field.schema, value))
          probed.push(`${field.name}=${String(value).slice(0, 24)}`)
          if (declared !== (answer.status === 200)) {
            disagreements.push({ field: field.name, value: String(value).slice(0, 80), length: String(value).length, declared, answer: answer.body })
          }
        }
      }
      expect(disagreements).toEqual([])
      // The bounds the server has are all declared, so all were probed above.
      for (const bound of ["wait=60", "wait=61", "limit=100", "limit=101", "limit=0", "model=", "callBackUrl=https://example.com/aaaa", "user_id=aaaa"]) {
        expect(probed.some((sample) => sample.startsWith(bound))).toBe(true)
      }
      expect(probed.length).toBeGreaterThan(60)
    }).pipe(Effect.provide(idleServer)))

  /** Each answer with a status other than 200 is declared for its operation, body and headers included. */
  const declared = (document: Document, path: string, method: string, answer: Seen) => {
    const response = document.paths[path]?.[method]?.responses[String(answer.status)]
    expect({ path, method, status: answer.status, declared: response !== undefined }).toEqual({ path, method, status: answer.status, declared: true })
    const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true })
    ajv.addSchema({ ...document, $id: "openapi" })
    const schema = `openapi#/${pointer("paths", path, method, "responses", String(answer.status), "content", "application/json", "schema")}`
    const valid = ajv.validate({ $ref: schema }, answer.body)
    expect({ schema, body: answer.body, errors: valid ? null : ajv.errorsText() }).toEqual({ schema, body: answer.body, errors: null })
    for (const [name, header] of Object.entries(response!.headers ?? {})) {
      const value = answer.headers[name.toLowerCase()]
      if (header.required === true) expect({ path, method, header: name, value }).toEqual({ path, method, header: name, value: expect.any(String) })
      if (value !== undefined) {
        const read = header.schema["type"] === "integer" && /^\d+$/.test(value) ? Number(value) : value
        expect({ header: name, value, valid: ajv.validate(header.schema, read) }).toEqual({ header: name, value, valid: true })
      }
    }
  }

  it.effect("401 and 404 on every operation that gives them are declared, with schemas their bodies validate against", () =>
    Effect.gen(function*() {
      const document = yield* getDocument
      const taskId = yield* endedTask
      const all = customerOperations(document, taskId)
      expect(all.length).toBe(14)
      for (const { method, operation, path, request } of all) {
        // Every operation asks for the key.
        expect(operation.security).toEqual([{ bearer: [] }])
        declared(document, path, method, yield* send(request, null))
        declared(document, path, method, yield* send(request, "mg_wrong_key_0000000000"))
      }
      for (const { method, path, request } of customerOperations(document, unknownTask).filter(({ path }) => path.includes("{taskId}"))) {
        const answer = yield* send(request)
        expect([path, answer.status]).toEqual([path, 404])
        declared(document, path, method, answer)
      }
      // 400 where the server answers it.
      declared(document, "/api/v1/task/submit", "post", yield* send(submitRequest({ model: "alpha-image-2/text-to-image" })))
      declared(document, "/api/v1/task/{taskId}", "get", yield* send(HttpClientRequest.get(`/api/v1/task/${taskId}?wait=0`)))
      declared(document, "/api/v1/tasks", "get", yield* send(HttpClientRequest.get("/api/v1/tasks?limit=0")))
      declared(document, "/api/v1/tasks", "get", yield* send(HttpClientRequest.get("/api/v1/tasks?other=1")))
      // 413: the body limit, on the one operation with a body.
      const tooLarge = yield* send(submitRequest({ ...validBody, input: { prompt: "x".repeat(1_100_000) } }))
      expect(tooLarge.status).toBe(413)
      declared(document, "/api/v1/task/submit", "post", tooLarge)
      // Estimate reads the same body: its 400 and 413 are declared too.
      declared(document, "/api/v1/task/estimate", "post", yield* send(estimateRequest({ model: "alpha-image-2/text-to-image" })))
      const tooLargeEstimate = yield* send(estimateRequest({ ...validBody, input: { prompt: "x".repeat(1_100_000) } }))
      expect(tooLargeEstimate.status).toBe(413)
      declared(document, "/api/v1/task/estimate", "post", tooLargeEstimate)
    }).pipe(Effect.provide(idleServer)))

  it.effect("503 for a database out of reach, on every operation, is declared with its body and its Retry-After", () =>
    Effect.gen(function*() {
      const document = yield* getDocument
      const taskId = yield* endedTask
      Outage.down = true
      try {
        for (const { method, path, request } of operations(document, taskId)) {
          const answer = yield* send(request)
          expect([path, method, answer.status]).toEqual([path, method, 503])
          expect(answer.headers["retry-after"]).toMatch(/^[1-9][0-9]*$/)
          declared(document, path, method, answer)
        }
      } finally {
        Outage.down = false
      }
    }).pipe(Effect.provide(outageServer), Effect.provide(Logger.replace(Logger.defaultLogger, Logger.none))))

  it.effect("429 from the key's rate limit, on every operation, is declared with its body and its Retry-After", () =>
    Effect.gen(function*() {
      const document = yield* getDocument
      // The one request the burst allows; virtual time never refills it.
      expect((yield* send(HttpClientRequest.get("/api/v1/models"))).status).toBe(200)
      for (const { method, path, request } of operations(document, unknownTask)) {
        const answer = yield* send(request)
        expect([path, method, answer.status]).toEqual([path, method, 429])
        expect(answer.headers["retry-after"]).toMatch(/^[1-9][0-9]*$/)
        expect(answer.headers["ratelimit-policy"]).toBeDefined()
        declared(document, path, method, answer)
      }
    }).pipe(Effect.provide(idleServer.pipe(Layer.provide(RateLimit.layer({ perSecond: 0.001, burst: 1 }))))))

  it.effect("429 for requests held open (events, ?wait=) and for failed authentications is declared, with Retry-After", () =>
    Effect.gen(function*() {
      const document = yield* getDocument
      const taskId = yield* endedTask
      const held = [
        ["/api/v1/task/{taskId}", HttpClientRequest.get(`/api/v1/task/${taskId}?wait=5`)],
        ["/api/v1/task/{taskId}/events", HttpClientRequest.get(`/api/v1/task/${taskId}/events`)]
      ] as const
      for (const [path, request] of held) {
        const answer = yield* send(request)
        expect([path, answer.status]).toEqual([path, 429])
        declared(document, path, "get", answer)
      }
      // One failed authentication uses up the address's allowance: the next wrong key is 429 on every operation
      // (the admin API's failures count apart: test/admin-auth.test.ts).
      expect((yield* send(HttpClientRequest.get("/api/v1/models"), "mg_wrong_key_0000000000")).status).toBe(401)
      for (const { method, path, request } of customerOperations(document, taskId)) {
        const answer = yield* send(request, "mg_other_wrong_key_000000")
        expect([path, method, answer.status]).toEqual([path, method, 429])
        declared(document, path, method, answer)
      }
    }).pipe(
      Effect.provide(idleServer.pipe(
        Layer.provide(Layer.mergeAll(
          HeldRequests.layer({ perKey: 0, total: 1_000 }),
          AuthFailures.layer(Option.some({ failures: 1, window: Duration.hours(1) }))
        ))
      ))
    ))
})
