/**
 * The query through `MediagateHttp.httpApp` (the limits in front of HttpApi, and the query's
 * own route beside HttpApi's router, `QueryRoute`) gives exactly what HttpApi alone
 * (`MediagateHttp.apiApp`) gives: the same status, content type and body, request by
 * request, for good and bad keys, ids in any case, other owners' tasks, unknown, malformed
 * and escaped ids, query strings, and the paths next to it. And which requests the route
 * answers itself (a plain query, whatever its outcome) and which it leaves to HttpApi (every
 * other, a host's route next to the query's included).
 */
import { HttpApiBuilder, HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Moderation } from "@mediagate/core"
import { MediagateHttp } from "@mediagate/http"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import * as Envelope from "../packages/http/src/EnvelopeMiddleware.js"
import * as QueryRoute from "../packages/http/src/QueryRoute.js"
import { memoryApiServices } from "./support.js"

const key = "query-path-key"
const otherKey = "query-path-other"
const adminKey = "query-path-admin-key"
const services = memoryApiServices(
  [
    { id: "acct_a", name: "a", apiKey: Redacted.make(key) },
    { id: "acct_b", name: "b", apiKey: Redacted.make(otherKey) }
  ],
  Moderation.layerAllowAll,
  adminKey
)

/** A host's own route next to the query's, which the query's route must leave to the router. */
const hostRoute = HttpApiBuilder.Router.use((router) => router.get("/api/v1/task/stats", Effect.succeed(HttpServerResponse.text("the host's"))))

const runtime = ManagedRuntime.make(
  Layer.mergeAll(MediagateHttp.layer, hostRoute, HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer, NodeHttpServer.layerContext).pipe(
    Layer.provideMerge(services)
  )
)
let fast: (request: Request) => Promise<Response>
let api: (request: Request) => Promise<Response>
let mine: string
let theirs: string

beforeAll(async () => {
  const [withPath, alone] = await runtime.runPromise(Effect.all([MediagateHttp.httpApp, MediagateHttp.apiApp]))
  const handler = HttpApp.toWebHandlerRuntime(await runtime.runtime())
  fast = handler(withPath)
  api = handler(alone)
  const submit = (apiKey: string) =>
    fast(new Request("http://127.0.0.1/api/v1/task/submit", {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse", n: 2 } })
    })).then((r) => r.json() as Promise<{ data: { taskId: string } }>)
  mine = (await submit(key)).data.taskId
  theirs = (await submit(otherKey)).data.taskId
})
afterAll(() => runtime.dispose())

const answer = async (handler: (request: Request) => Promise<Response>, path: string, headers: Record<string, string>) => {
  const response = await handler(new Request(`http://127.0.0.1${path}`, { headers }))
  return { status: response.status, type: response.headers.get("content-type"), allow: response.headers.get("allow"), body: await response.text() }
}

describe("the query's own path", () => {
  const bearer = { authorization: `Bearer ${key}` }
  const cases: ReadonlyArray<readonly [string, () => string, Record<string, string>, number]> = [
    ["a task of the caller", () => `/api/v1/task/${mine}`, bearer, 200],
    ["its id in capitals", () => `/api/v1/task/${mine.toUpperCase()}`, bearer, 200],
    ["another account's task", () => `/api/v1/task/${theirs}`, bearer, 404],
    ["an unknown id", () => "/api/v1/task/0190a5f4-0000-7000-8000-000000000000", bearer, 404],
    ["an id that is no UUID", () => "/api/v1/task/not-a-task", bearer, 404],
    ["an id of 64 characters", () => `/api/v1/task/${"a".repeat(64)}`, bearer, 404],
    ["an id longer than the router takes", () => `/api/v1/task/${"a".repeat(200)}`, bearer, 404],
    ["the same without a key", () => `/api/v1/task/${"a".repeat(200)}`, {}, 401],
    ["an id with odd characters", () => "/api/v1/task/a;b,c=d", bearer, 404],
    ["no key", () => `/api/v1/task/${mine}`, {}, 401],
    ["a wrong key", () => `/api/v1/task/${mine}`, { authorization: "Bearer nope" }, 401],
    ["another scheme", () => `/api/v1/task/${mine}`, { authorization: `Basic ${key}` }, 401],
    ["the key in lower-case scheme and extra spaces", () => `/api/v1/task/${mine}`, { authorization: `bearer   ${key}` }, 200],
    ["GET on the submit path", () => "/api/v1/task/submit", bearer, 405],
    ["GET on the submit path without a key", () => "/api/v1/task/submit", {}, 401],
    ["a query string", () => `/api/v1/task/${mine}?x=1`, bearer, 200],
    ["a trailing slash", () => `/api/v1/task/${mine}/`, bearer, 200],
    ["`wait` that is no number", () => `/api/v1/task/${mine}?wait=soon`, bearer, 400],
    ["`wait` out of range", () => `/api/v1/task/${mine}?wait=0`, bearer, 400],
    ["an escaped id", () => `/api/v1/task/${encodeURIComponent(mine).replace(/-/g, "%2D")}`, bearer, 200],
    ["an escaped slash in the id", () => `/api/v1/task/${mine}%2Fcancel`, bearer, 404],
    ["an admin key", () => `/api/v1/task/${mine}`, { authorization: `Bearer ${adminKey}` }, 403],
    ["the events path", () => `/api/v1/task/${mine}/events?x`, { authorization: "Bearer nope" }, 401],
    ["two slashes", () => `/api/v1/task//${mine}`, bearer, 200]
  ]
  for (const [name, path, headers, status] of cases) {
    it(`${name}: ${status}, the same as HttpApi's answer`, async () => {
      const viaFast = await answer(fast, path(), headers)
      const viaApi = await answer(api, path(), headers)
      expect(viaFast).toEqual(viaApi)
      expect(viaFast.status).toBe(status)
      if (status === 200) expect(JSON.parse(viaFast.body)).toMatchObject({ code: 0, msg: "ok", data: { taskId: mine, input: { prompt: "a lighthouse" } } })
    })
  }
})

describe("the query's own route", () => {
  const bearer = { authorization: `Bearer ${key}` }
  /** The route over a fallback that names itself, in the envelope: which answers came from the route. */
  const viaRoute = async (path: string, headers: Record<string, string>, method = "GET") => {
    const route = await runtime.runPromise(QueryRoute.make)
    const fallback = Effect.succeed(HttpServerResponse.text("HttpApi", { headers: { "x-answered-by": "HttpApi" } }))
    const handler = HttpApp.toWebHandlerRuntime(await runtime.runtime())(
      Envelope.middleware(Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => route(request, fallback)))
    )
    const response = await handler(new Request(`http://127.0.0.1${path}`, { method, headers }))
    return { by: response.headers.get("x-answered-by"), status: response.status, body: await response.text() }
  }

  it("answers a plain query of the caller's task itself, in any case", async () => {
    for (const id of [mine, mine.toUpperCase()]) {
      const { body, by } = await viaRoute(`/api/v1/task/${id}`, bearer)
      expect(by).toBeNull()
      expect(JSON.parse(body)).toMatchObject({ code: 0, data: { taskId: mine } })
    }
  })

  const failing: ReadonlyArray<readonly [string, () => string, Record<string, string>, number]> = [
    ["another account's task", () => `/api/v1/task/${theirs}`, bearer, 404],
    ["an unknown id", () => "/api/v1/task/0190a5f4-0000-7000-8000-000000000000", bearer, 404],
    ["no key", () => `/api/v1/task/${mine}`, {}, 401],
    ["an admin key", () => `/api/v1/task/${mine}`, { authorization: `Bearer ${adminKey}` }, 403]
  ]
  for (const [name, path, headers, status] of failing) {
    it(`answers ${name} itself: ${status}, once`, async () => {
      const { by, status: answered } = await viaRoute(path(), headers)
      expect(by).toBeNull()
      expect(answered).toBe(status)
    })
  }

  const others: ReadonlyArray<readonly [string, () => string, Record<string, string>, string?]> = [
    ["a query string", () => `/api/v1/task/${mine}?wait=1`, bearer],
    ["a trailing slash", () => `/api/v1/task/${mine}/`, bearer],
    ["an escaped id", () => `/api/v1/task/${mine.replace(/-/g, "%2D")}`, bearer],
    ["the events path", () => `/api/v1/task/${mine}/events`, bearer],
    ["the submit path (a route of its own)", () => "/api/v1/task/submit", bearer],
    ["the estimate path", () => "/api/v1/task/estimate", bearer],
    ["a host's route next to it", () => "/api/v1/task/stats", bearer],
    ["HEAD", () => `/api/v1/task/${mine}`, bearer, "HEAD"],
    ["DELETE", () => `/api/v1/task/${mine}`, bearer, "DELETE"]
  ]
  for (const [name, path, headers, method] of others) {
    it(`leaves ${name} to HttpApi`, async () => {
      expect((await viaRoute(path(), headers, method)).by).toBe("HttpApi")
    })
  }

  it("a host's own route next to the query's is the host's", async () => {
    const viaFast = await answer(fast, "/api/v1/task/stats", { authorization: `Bearer ${key}` })
    expect(viaFast).toMatchObject({ status: 200, body: "the host's" })
  })
})
