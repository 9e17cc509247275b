/**
 * The submit through `MediagateHttp.httpApp` (the limits in front of HttpApi, and the
 * submit's own route beside HttpApi's router, `SubmitRoute`) gives exactly what HttpApi
 * alone (`MediagateHttp.apiApp`) gives: the same status, headers that matter and body,
 * request by request (the new task's id aside, which differs from one submit to the next),
 * for good and bad keys, bodies and inputs, a prompt moderation refuses, an
 * Idempotency-Key, query strings and the paths next to it. And which requests the route
 * answers itself (a plain submit, whatever its outcome) and which it leaves to HttpApi.
 */
import { HttpApiBuilder, HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { ModerationRules } from "@mediagate/core"
import { MediagateHttp } from "@mediagate/http"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import * as Envelope from "../packages/http/src/EnvelopeMiddleware.js"
import * as SubmitRoute from "../packages/http/src/SubmitRoute.js"
import { memoryApiServices } from "./support.js"

const key = "submit-path-key"
const adminKey = "submit-path-admin-key"
const services = memoryApiServices([{ id: "acct_a", name: "a", apiKey: Redacted.make(key) }], ModerationRules.layer(), adminKey)

const runtime = ManagedRuntime.make(
  Layer.mergeAll(MediagateHttp.layer, HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer, NodeHttpServer.layerContext).pipe(
    Layer.provideMerge(services)
  )
)
let fast: (request: Request) => Promise<Response>
let api: (request: Request) => Promise<Response>

beforeAll(async () => {
  const [withRoutes, alone] = await runtime.runPromise(Effect.all([MediagateHttp.httpApp, MediagateHttp.apiApp]))
  const handler = HttpApp.toWebHandlerRuntime(await runtime.runtime())
  fast = handler(withRoutes)
  api = handler(alone)
})
afterAll(() => runtime.dispose())

/** A task id, wherever it appears in a body: each submit makes a new one. */
const taskIds = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g

interface Sent {
  readonly path?: string
  readonly method?: string
  readonly headers?: Record<string, string>
  readonly body?: string
}

const request = ({ body, headers = {}, method = "POST", path = "/api/v1/task/submit" }: Sent) =>
  new Request(`http://127.0.0.1${path}`, { method, headers, ...(body === undefined ? {} : { body }) })

/**
 * `handler`'s answer to `sent`. An Idempotency-Key is made the handler's own (`side`), so that
 * neither answer is a replay of the other's task.
 */
const answer = async (handler: (request: Request) => Promise<Response>, sent: Sent, side: string) => {
  const key = sent.headers?.["idempotency-key"]
  const response = await handler(request(key === undefined || key === "" ? sent : { ...sent, headers: { ...sent.headers, "idempotency-key": `${key}-${side}` } }))
  const header = (name: string) => response.headers.get(name)
  return {
    status: response.status,
    type: header("content-type"),
    allow: header("allow"),
    replayed: header("idempotent-replayed"),
    body: (await response.text()).replace(taskIds, "<task id>")
  }
}

const bearer = { authorization: `Bearer ${key}`, "content-type": "application/json" }
const json = (value: unknown) => JSON.stringify(value)
const good = json({ model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse" } })

const cases: ReadonlyArray<readonly [string, Sent, number]> = [
  ["a good submit", { headers: bearer, body: good }, 200],
  ["with a callBackUrl and user_id", { headers: bearer, body: json({ model: "alpha-image-2/text-to-image", input: { prompt: "a kite" }, callBackUrl: "https://hooks.example/cb", user_id: "u-1" }) }, 200],
  ["no key", { headers: { "content-type": "application/json" }, body: good }, 401],
  ["a wrong key", { headers: { ...bearer, authorization: "Bearer nope" }, body: good }, 401],
  ["an admin key", { headers: { ...bearer, authorization: `Bearer ${adminKey}` }, body: good }, 403],
  ["no Content-Type", { headers: { authorization: `Bearer ${key}` }, body: good }, 400],
  ["text/plain", { headers: { ...bearer, "content-type": "text/plain" }, body: good }, 400],
  ["no body", { headers: bearer }, 400],
  ["a body that is no JSON", { headers: bearer, body: "{model:" }, 400],
  ["a body nested too deeply", { headers: bearer, body: `${"[".repeat(200)}${"]".repeat(200)}` }, 400],
  ["a body over 1 MiB", { headers: bearer, body: json({ model: "alpha-image-2/text-to-image", input: { prompt: "x".repeat(1024 * 1024) } }) }, 413],
  ["a JSON array", { headers: bearer, body: "[]" }, 400],
  ["no model", { headers: bearer, body: json({ input: { prompt: "a lighthouse" } }) }, 400],
  ["an unknown model", { headers: bearer, body: json({ model: "nope/nothing", input: { prompt: "a lighthouse" } }) }, 400],
  ["no prompt", { headers: bearer, body: json({ model: "alpha-image-2/text-to-image", input: {} }) }, 400],
  ["a field the model does not take", { headers: bearer, body: json({ model: "alpha-image-2/text-to-image", input: { prompt: "a", colour: "red" } }) }, 400],
  ["a private callBackUrl", { headers: bearer, body: json({ model: "alpha-image-2/text-to-image", input: { prompt: "a" }, callBackUrl: "http://127.0.0.1/cb" }) }, 400],
  ["callBackEvents without a callBackUrl", { headers: bearer, body: json({ model: "alpha-image-2/text-to-image", input: { prompt: "a" }, callBackEvents: ["completed"] }) }, 400],
  ["a prompt moderation refuses", { headers: bearer, body: json({ model: "alpha-image-2/text-to-image", input: { prompt: "gore" } }) }, 400],
  ["an Idempotency-Key", { headers: { ...bearer, "idempotency-key": "submit-path-1" }, body: good }, 200],
  ["an Idempotency-Key that is no key", { headers: { ...bearer, "idempotency-key": "" }, body: good }, 400],
  ["a query string", { path: "/api/v1/task/submit?x=1", headers: bearer, body: good }, 200],
  ["a trailing slash", { path: "/api/v1/task/submit/", headers: bearer, body: good }, 200],
  ["GET", { method: "GET", headers: { authorization: `Bearer ${key}` } }, 405],
  ["PUT", { method: "PUT", headers: bearer, body: good }, 405]
]

describe("the submit's own path", () => {
  for (const [name, sent, status] of cases) {
    it(`${name}: ${status}, the same as HttpApi's answer`, async () => {
      const viaFast = await answer(fast, sent, "fast")
      const viaApi = await answer(api, sent, "api")
      expect(viaFast).toEqual(viaApi)
      expect(viaFast.status).toBe(status)
      if (status === 200) expect(JSON.parse(viaFast.body)).toEqual({ code: 0, msg: "ok", data: { taskId: "<task id>" } })
    })
  }

  it("a second submit with the same Idempotency-Key is the first's task, through either", async () => {
    const sent = { headers: { ...bearer, "idempotency-key": "submit-path-2" }, body: good }
    const first = await (await fast(request(sent))).json() as { data: { taskId: string } }
    const again = await fast(request(sent))
    expect(again.headers.get("idempotent-replayed")).toBe("true")
    expect(((await again.json()) as { data: { taskId: string } }).data.taskId).toBe(first.data.taskId)
  })
})

describe("the submit's own route", () => {
  /** The route over a fallback that names itself, in the envelope: which answers came from the route. */
  const viaRoute = async (sent: Sent) => {
    const route = await runtime.runPromise(SubmitRoute.make)
    const fallback = Effect.succeed(HttpServerResponse.text("HttpApi", { headers: { "x-answered-by": "HttpApi" } }))
    const handler = HttpApp.toWebHandlerRuntime(await runtime.runtime())(
      Envelope.middleware(Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => route(request, fallback)))
    )
    const response = await handler(request(sent))
    return { by: response.headers.get("x-answered-by"), status: response.status, body: await response.text() }
  }

  const itself: ReadonlyArray<readonly [string, Sent, number]> = [
    ["a good submit", { headers: bearer, body: good }, 200],
    ["no key", { headers: { "content-type": "application/json" }, body: good }, 401],
    ["an admin key", { headers: { ...bearer, authorization: `Bearer ${adminKey}` }, body: good }, 403],
    ["a body that is no JSON", { headers: bearer, body: "{model:" }, 400],
    ["an unknown model", { headers: bearer, body: json({ model: "nope/nothing", input: { prompt: "a" } }) }, 400],
    ["a prompt moderation refuses", { headers: bearer, body: json({ model: "alpha-image-2/text-to-image", input: { prompt: "gore" } }) }, 400]
  ]
  for (const [name, sent, status] of itself) {
    it(`answers ${name} itself: ${status}`, async () => {
      const { by, status: answered } = await viaRoute(sent)
      expect(by).toBeNull()
      expect(answered).toBe(status)
    })
  }

  const others: ReadonlyArray<readonly [string, Sent]> = [
    ["an Idempotency-Key", { headers: { ...bearer, "idempotency-key": "k" }, body: good }],
    ["a query string", { path: "/api/v1/task/submit?x=1", headers: bearer, body: good }],
    ["a trailing slash", { path: "/api/v1/task/submit/", headers: bearer, body: good }],
    ["the estimate path", { path: "/api/v1/task/estimate", headers: bearer, body: good }],
    ["GET", { method: "GET", headers: bearer }]
  ]
  for (const [name, sent] of others) {
    it(`leaves ${name} to HttpApi`, async () => {
      expect((await viaRoute(sent)).by).toBe("HttpApi")
    })
  }

  it("takes nothing when the host mounted an app over the path", async () => {
    const mounted = ManagedRuntime.make(
      Layer.mergeAll(
        MediagateHttp.layer,
        HttpApiBuilder.Router.use((router) => router.mountApp("/api/v1/task", Effect.succeed(HttpServerResponse.text("the host's")))),
        HttpApiBuilder.Router.Live,
        HttpApiBuilder.Middleware.layer,
        NodeHttpServer.layerContext
      ).pipe(Layer.provideMerge(services))
    )
    try {
      const route = await mounted.runPromise(SubmitRoute.make)
      const fallback = Effect.succeed(HttpServerResponse.text("HttpApi", { headers: { "x-answered-by": "HttpApi" } }))
      const handler = HttpApp.toWebHandlerRuntime(await mounted.runtime())(
        Envelope.middleware(Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => route(request, fallback)))
      )
      const response = await handler(request({ headers: bearer, body: good }))
      expect(response.headers.get("x-answered-by")).toBe("HttpApi")
    } finally {
      await mounted.dispose()
    }
  })
})
