/**
 * The query through `MediagateHttp.httpApp` (HttpApi with the limits in front; it once
 * answered the query on a path of its own) gives exactly what HttpApi alone
 * (`MediagateHttp.apiApp`) gives: the
 * same status, content type and body, request by request, for good and bad keys, ids in any
 * case, other owners' tasks, unknown and malformed ids, and the paths next to it.
 */
import { HttpApiBuilder, HttpApp } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Ids, ModelCatalog, Moderation, TaskServiceAlone } from "@mediagate/core"
import { MediagateHttp } from "@mediagate/http"
import { MemoryAccounts, MemoryLedger, MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { memoryAdmin } from "./support.js"

const key = "query-path-key"
const otherKey = "query-path-other"
const services = Layer.mergeAll(
  TaskServiceAlone.layer.pipe(Layer.provide([MemoryTaskStore.layer, ModelCatalog.layer, Moderation.layerAllowAll, TaskServiceAlone.noUpstream])),
  MemoryAccounts.layer([
    { id: "acct_a", name: "a", apiKey: Redacted.make(key) },
    { id: "acct_b", name: "b", apiKey: Redacted.make(otherKey) }
  ]),
  MemoryMediaStore.layer({ baseUrl: "http://127.0.0.1/media" }),
  MemoryLedger.layer,
  ModelCatalog.layer
).pipe(Layer.provide(Ids.layerTest), (services) =>
  // The admin API's services in memory, on the same store and ids (layers are memoised by reference).
  Layer.provideMerge(memoryAdmin.pipe(Layer.provide([MemoryTaskStore.layer, Ids.layerTest])), services))

const runtime = ManagedRuntime.make(
  Layer.mergeAll(MediagateHttp.layer, HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer, NodeHttpServer.layerContext).pipe(
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
    ["no key", () => `/api/v1/task/${mine}`, {}, 401],
    ["a wrong key", () => `/api/v1/task/${mine}`, { authorization: "Bearer nope" }, 401],
    ["another scheme", () => `/api/v1/task/${mine}`, { authorization: `Basic ${key}` }, 401],
    ["the key in lower-case scheme and extra spaces", () => `/api/v1/task/${mine}`, { authorization: `bearer   ${key}` }, 200],
    ["GET on the submit path", () => "/api/v1/task/submit", bearer, 405],
    ["GET on the submit path without a key", () => "/api/v1/task/submit", {}, 401],
    ["a query string", () => `/api/v1/task/${mine}?x=1`, bearer, 200],
    ["a trailing slash", () => `/api/v1/task/${mine}/`, bearer, 200]
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
