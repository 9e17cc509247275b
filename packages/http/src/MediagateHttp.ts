/**
 * The mediagate HTTP app, ready to serve on its own server or inside a host's.
 */
import type { HttpApi, HttpApp } from "@effect/platform"
import { HttpApiBuilder, HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import type { Ledger, MediaStore, ModelCatalog } from "@mediagate/core"
import { Accounts, Api, Ids, TaskService } from "@mediagate/core"
import { Effect, Layer, ManagedRuntime, Option, Redacted } from "effect"
import type * as Http from "node:http"
import * as Auth from "./Auth.js"
import * as Envelope from "./Envelope.js"
import * as Handlers from "./Handlers.js"
import { isApiPath } from "./Paths.js"
import * as RateLimit from "./RateLimit.js"
import * as Routes from "./Routes.js"

/** What the HTTP layer needs from the host's composition. */
export type Requirements = TaskService | Accounts.Accounts | Ledger.Ledger | MediaStore.MediaStore | ModelCatalog.ModelCatalog

/** The API with its handlers, auth and extra routes. */
export const layer: Layer.Layer<HttpApi.Api, never, Requirements> = HttpApiBuilder.api(Api.MediagateApi).pipe(
  Layer.provide([Handlers.layer, Handlers.callbacksLayer, Handlers.catalogLayer, Handlers.accountLayer]),
  Layer.provide(Auth.layer),
  Layer.merge(Routes.layer)
)

/** `GET /api/v1/task/{id}[?...]`: the path of the query, the request clients repeat most (`?wait=` included). */
const queryPath = /^\/api\/v1\/task\/([0-9A-Za-z-]{1,64})(\?[^#]*)?$/

/**
 * The query, answered beside HttpApi: the same authentication, use case, envelope and
 * errors, without the router, middleware chain and Schema encoding of the answer, which cost
 * more than the query itself (docs/benchmarks.md). `test/query-path.test.ts` checks that it
 * answers exactly as HttpApi does.
 */
const fastQuery = (tasks: TaskService, accounts: Accounts.Accounts["Type"], taskId: string, search: string) =>
  Auth.authenticate.pipe(
    Effect.flatMap((account) =>
      search === "" ? tasks.query(account, Ids.TaskId.make(taskId.toLowerCase())) : Handlers.queryTask(tasks, account, taskId, new URLSearchParams(search))
    ),
    Effect.map((task) => HttpServerResponse.unsafeJson(Api.ok(task))),
    Effect.mapError(Envelope.toHttpError),
    Effect.provideService(Accounts.Accounts, accounts)
  )

/** The API through HttpApi alone, every request, in the envelope (`httpApp` answers the same, faster). */
export const apiApp: Effect.Effect<
  HttpApp.Default<never, Accounts.Accounts | HttpRouter.HttpRouter.DefaultServices>,
  never,
  HttpApi.Api | HttpApiBuilder.Router | HttpApiBuilder.Middleware
> = Effect.map(HttpApiBuilder.httpApp, Envelope.middleware)

/**
 * The HttpApp of the API, for hosts that route requests to it themselves: HttpApi, with the
 * query on a path of its own.
 */
export const httpApp: Effect.Effect<
  HttpApp.Default<never, Accounts.Accounts | HttpRouter.HttpRouter.DefaultServices>,
  never,
  HttpApi.Api | HttpApiBuilder.Router | HttpApiBuilder.Middleware | TaskService | Accounts.Accounts
> = Effect.gen(function*() {
  const app = yield* HttpApiBuilder.httpApp
  const tasks = yield* TaskService
  const accounts = yield* Accounts.Accounts
  const limit = yield* Effect.serviceOption(RateLimit.RateLimit)
  const route = (request: HttpServerRequest.HttpServerRequest) => {
    const match = request.method === "GET" ? queryPath.exec(request.url) : null
    // `/api/v1/task/submit` is the submit endpoint's path: GET there is HttpApi's 405.
    return match === null || match[1] === "submit" ? app : fastQuery(tasks, accounts, match[1]!, match[2] ?? "")
  }
  return Envelope.middleware(
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      if (Option.isNone(limit) || !isApiPath(Envelope.requestPath(request))) return route(request)
      const key = Auth.bearerKey(request.headers["authorization"])
      if (Option.isNone(key)) return route(request)
      return Effect.flatMap(limit.value.take(Redacted.value(key.value)), (decision) =>
        decision._tag === "Allowed"
          ? route(request)
          : Effect.succeed(Envelope.envelope(429, "too many requests for this key; slow down", undefined, RateLimit.limitedHeaders(limit.value, decision.retryAfterMs))))
    })
  )
})

/**
 * Serves the API on the HttpServer in context, every answer in the envelope. The envelope
 * wraps the app itself: a server middleware would only see answers already made.
 */
export const serve: Layer.Layer<
  never,
  never,
  HttpServer.HttpServer | HttpRouter.HttpRouter.DefaultServices | Requirements
> = Layer.unwrapEffect(Effect.map(httpApp, (app) => HttpServer.serve(app))).pipe(
  Layer.provide(layer),
  Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer])
)

/** A `node:http` request listener and its disposal, built from a layer that provides the requirements. */
export interface NodeHandler {
  readonly handler: (request: Http.IncomingMessage, response: Http.ServerResponse) => void
  readonly dispose: () => Promise<void>
}

/**
 * Builds a `node:http` listener for an existing server. The host decides which requests
 * reach it (usually every path under `/api/v1/` and `/media/`).
 */
export const makeNodeHandler = async <E>(requirements: Layer.Layer<Requirements, E>): Promise<NodeHandler> => {
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(layer, HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer, NodeHttpServer.layerContext).pipe(
      Layer.provideMerge(requirements)
    )
  )
  const handler = await runtime.runPromise(
    Effect.gen(function*() {
      const app = yield* httpApp
      return yield* NodeHttpServer.makeHandler(app)
    })
  )
  return { handler, dispose: () => runtime.dispose() }
}
