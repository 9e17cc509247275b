/**
 * The mediagate HTTP app, ready to serve on its own server or inside a host's.
 */
import type * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { NodeHttpServer } from "@effect/platform-node"
import type { Ledger, MediaStore, ModelCatalog, UsageStore } from "@mediagate/core"
import { Accounts, AdminKeys, AdminService, Api, TaskService } from "@mediagate/core"
import type { Scope } from "effect"
import { Context, Effect, Layer, ManagedRuntime, Option, Redacted } from "effect"
import type * as Http from "node:http"
import * as AdminAuthentication from "./AdminAuthentication.js"
import * as AdminHandlers from "./AdminHandlers.js"
import * as AdminTaskHandlers from "./AdminTaskHandlers.js"
import * as Auth from "./Auth.js"
import * as AuthFailures from "./AuthFailures.js"
import * as ClientErrors from "./ClientErrors.js"
import * as Embedding from "./Embedding.js"
import * as Envelope from "./EnvelopeMiddleware.js"
import * as FilesHandlers from "./FilesHandlers.js"
import * as Handlers from "./Handlers.js"
import * as HeldRequests from "./HeldRequests.js"
import { isAdminPath, isApiPath } from "./Paths.js"
import * as QueryRoute from "./QueryRoute.js"
import * as RateLimit from "./RateLimit.js"
import * as Routes from "./Routes.js"
import * as SubmitRoute from "./SubmitRoute.js"
import * as UsageHandlers from "./UsageHandlers.js"

/**
 * What the HTTP layer needs from the host's composition: the use cases and the backends, and
 * for the admin API the operator's service and the admin keys it authenticates.
 */
export type Requirements =
  | TaskService
  | Accounts.Accounts
  | Ledger.Ledger
  | MediaStore.MediaStore
  | ModelCatalog.ModelCatalog
  | AdminService.AdminService
  | AdminKeys.AdminKeys
  | UsageStore.UsageStore

/** The API with its handlers, auth and extra routes. */
export const layer: Layer.Layer<HttpApi.Api, never, Requirements> = HttpApiBuilder.api(Api.MediagateApi).pipe(
  Layer.provide([Handlers.layer, Handlers.callbacksLayer, Handlers.catalogLayer, Handlers.accountLayer]),
  Layer.provide([AdminHandlers.accountsLayer, AdminTaskHandlers.tasksLayer, AdminTaskHandlers.accessLayer]),
  Layer.provide([UsageHandlers.usageLayer, UsageHandlers.insightsLayer, FilesHandlers.filesLayer]),
  Layer.provide([Auth.layer, AdminAuthentication.layer]),
  Layer.merge(Routes.layer),
  Layer.merge(Handlers.decodeFailures)
)

/** The API through HttpApi alone, every request, in the envelope, without the limits `httpApp` puts in front. */
export const apiApp: Effect.Effect<
  HttpApp.Default<never, Accounts.Accounts | AdminKeys.AdminKeys | HttpRouter.HttpRouter.DefaultServices>,
  never,
  HttpApi.Api | HttpApiBuilder.Router | HttpApiBuilder.Middleware
> = Effect.map(HttpApiBuilder.httpApp, Envelope.middleware)

/** Retry-After of a request refused for a held-request cap: a held request may last a minute, a retry every few seconds is enough. */
const heldRetryAfterSeconds = 5

/**
 * The HttpApp of the API, for hosts that route requests to it themselves: HttpApi, with a
 * plain query of a task answered beside its router (`QueryRoute`: the same answers, a
 * quarter to a third less CPU), and a submit without an Idempotency-Key too
 * (`SubmitRoute`). Before a request under /api/v1/ with a key reaches them, in this order:
 * the limit on failed authentications from its address (`AuthFailures`), the key's rate
 * limit when there is one (`RateLimit`), and for a request held open (events, `?wait=`) the
 * caps on those (`HeldRequests`). Each refusal is 429 in the envelope with Retry-After. Keys
 * are only ever kept as fixed-size digests.
 */
export const httpApp: Effect.Effect<
  HttpApp.Default<never, Accounts.Accounts | AdminKeys.AdminKeys | HttpRouter.HttpRouter.DefaultServices | Scope.Scope>,
  never,
  HttpApi.Api | HttpApiBuilder.Router | HttpApiBuilder.Middleware | TaskService | Accounts.Accounts | AdminKeys.AdminKeys
> = Effect.gen(function*() {
  const api = yield* HttpApiBuilder.httpApp
  // A plain query (`GET /api/v1/task/{id}`, nothing more) is answered beside HttpApi's
  // router, as HttpApi would answer it; every other request by HttpApi (`QueryRoute`).
  const query = yield* QueryRoute.make
  // So is a plain submit (no Idempotency-Key: `SubmitRoute`).
  const submit = yield* SubmitRoute.make
  // Optional by nature, as before: a host that wants no rate limit provides none.
  const limit = yield* Effect.serviceOption(RateLimit.RateLimit)
  const failures = Option.map(yield* AuthFailures.Settings, AuthFailures.make)
  // Failed admin sign-ins count apart, against a stricter limit.
  const adminFailures = Option.map(yield* AuthFailures.AdminSettings, AuthFailures.make)
  const heldLimits = yield* HeldRequests.Settings
  const held = (yield* HeldRequests.Backend)(heldLimits)
  const tooMany = (msg: string, seconds: number, headers: Record<string, string> = {}) =>
    Effect.succeed(Envelope.envelope(429, msg, undefined, { "retry-after": String(seconds), ...headers }))
  /** Answers the request, and tells the failure limit (`failures`: the API's or the admin API's) how its authentication went. */
  const answerRecorded = (
    app: HttpApp.Default<unknown, HttpRouter.HttpRouter.DefaultServices>,
    failures: Option.Option<AuthFailures.AuthFailures>,
    address: Option.Option<string>,
    digest: string
  ) =>
    Option.isNone(failures) || Option.isNone(address)
      ? app
      : Effect.tap(app, (response) =>
        // 401 is the one answer to a key that names no account; a server error says nothing about the key.
        response.status < 500 ? failures.value.record(address.value, digest, response.status !== 401) : Effect.void)
  return Envelope.middleware(
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
      Effect.gen(function*() {
        const path = Envelope.requestPath(request)
        if (!isApiPath(path)) return yield* api
        const limited = isAdminPath(path) ? adminFailures : failures
        const key = Auth.bearerKey(request.headers["authorization"])
        // Without a key the answer is 401 at once: nothing to limit, count or hold.
        if (Option.isNone(key)) return yield* api
        const digest = RateLimit.keyDigest(Redacted.value(key.value))
        const address = request.remoteAddress
        if (Option.isSome(limited) && Option.isSome(address)) {
          const allowed = yield* limited.value.check(address.value, digest)
          if (allowed._tag === "Limited") {
            return yield* tooMany("too many failed authentications from this address; try again later", RateLimit.retryAfterSeconds(allowed.retryAfterMs))
          }
        }
        if (Option.isSome(limit)) {
          const decision = yield* limit.value.take(digest)
          if (decision._tag === "Limited") {
            const headers = RateLimit.limitedHeaders(yield* RateLimit.rateFor(limit.value, digest), decision.retryAfterMs)
            return yield* tooMany("too many requests for this key; slow down", RateLimit.retryAfterSeconds(decision.retryAfterMs), headers)
          }
        }
        if (HeldRequests.isHeld(request.method, request.url)) {
          const refused = yield* HeldRequests.hold(held, digest)
          if (refused === "key") {
            return yield* tooMany(`too many requests held open for this key (at most ${heldLimits.perKey}); close one first`, heldRetryAfterSeconds)
          }
          if (refused === "total") {
            return yield* tooMany(`too many requests held open on this server (at most ${heldLimits.total}); try again later`, heldRetryAfterSeconds)
          }
        }
        return yield* answerRecorded(submit(request, query(request, api)), limited, address, digest)
      }))
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

/** A `node:http` request listener for a host's server, its adapters and its disposal. */
export interface NodeHandler {
  /**
   * The `node:http` listener. Where the host mounted it under a path (Express's `app.use(path,
   * ...)`), it answers for the whole URL (`originalUrl`); where the host's body parser read
   * the body first, it takes the body from `request.rawBody` or `request.body`.
   */
  readonly handler: (request: Http.IncomingMessage, response: Http.ServerResponse) => void
  /** Express 4 or 5: `app.use(api.express)` serves mediagate's paths and passes every other request on. */
  readonly express: Embedding.ExpressMiddleware
  /** Fastify: `app.register(api.fastify)` serves mediagate's paths, in a scope that leaves their bodies unread. */
  readonly fastify: Embedding.FastifyPlugin
  /** Whether a request path is one mediagate answers (`paths`). */
  readonly owns: (path: string) => boolean
  /** Stops the engine, the deliverer and the sweeps, and releases the backends. */
  readonly dispose: () => Promise<void>
}

/** Settings of `makeNodeHandler` and `makeWebHandler`. */
export interface HandlerOptions {
  /**
   * The paths the adapters (`express`, `fastify`, `owns`) hand to mediagate: a pattern ending
   * in `/*` takes every path under it. Default `Embedding.defaultPaths`: the API, result
   * files, provider webhooks, the docs page and OpenAPI document, health and metrics.
   */
  readonly paths?: ReadonlyArray<string>
}

/** Settings of `makeNodeHandler`. */
export interface NodeHandlerOptions extends HandlerOptions {
  /**
   * The host's server, to answer Node's own errors on it in the envelope (`ClientErrors`):
   * oversized headers, unparsable requests, unknown methods. It concerns every request the
   * server takes, not only those the host sends to mediagate; `dispose` removes it again.
   */
  readonly server?: Http.Server
}

/** The runtime of an embedded API: its layers over the host's requirements. */
const embeddedRuntime = <E>(requirements: Layer.Layer<Requirements, E>) =>
  ManagedRuntime.make(
    Layer.mergeAll(layer, HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer, NodeHttpServer.layerContext).pipe(
      Layer.provideMerge(requirements)
    )
  )

/**
 * Builds a `node:http` listener for an existing server, with the engine and the deliverer
 * running until `dispose`. The caps on held requests and the limit on failed
 * authentications are the library's defaults unless `requirements` provides
 * `HeldRequests.layer(...)` or `AuthFailures.layer(...)`.
 */
export const makeNodeHandler = async <E>(requirements: Layer.Layer<Requirements, E>, options: NodeHandlerOptions = {}): Promise<NodeHandler> => {
  const runtime = embeddedRuntime(requirements)
  const listener = await runtime.runPromise(Effect.flatMap(httpApp, (app) => NodeHttpServer.makeHandler(app)))
  const handler = (request: Http.IncomingMessage, response: Http.ServerResponse) => {
    const prepared = Embedding.prepare(request)
    return prepared === "Consumed" ? Embedding.answerConsumed(response) : listener(prepared, response)
  }
  const uninstall = options.server === undefined ? () => {} : ClientErrors.install(options.server)
  return {
    handler,
    ...Embedding.adapters(handler, options.paths ?? Embedding.defaultPaths),
    dispose: () => {
      uninstall()
      return runtime.dispose()
    }
  }
}

/** A web-standard handler (`Request` in, `Response` out) and its disposal. */
export interface WebHandler {
  /**
   * Answers a request. `remoteAddress`, where the runtime knows it, feeds the limit on
   * failed authentications per address; without it that limit does not apply.
   */
  readonly handler: (request: Request, info?: { readonly remoteAddress?: string | undefined }) => Promise<Response>
  /** Whether a request path is one mediagate answers (`paths`). */
  readonly owns: (path: string) => boolean
  /** Stops the engine, the deliverer and the sweeps, and releases the backends. */
  readonly dispose: () => Promise<void>
}

/** The client address a web runtime gave with a request. */
class WebRemoteAddress extends Context.Tag("@mediagate/http/WebRemoteAddress")<WebRemoteAddress, string>() {}

/**
 * Builds a web-standard handler for runtimes on `fetch`: Hono, Next.js route handlers, Bun,
 * Deno, Cloudflare-style workers running Node. It serves what the node listener serves: the
 * API, result files, provider webhooks, the docs page, OpenAPI and health.
 */
export const makeWebHandler = async <E>(requirements: Layer.Layer<Requirements, E>, options: HandlerOptions = {}): Promise<WebHandler> => {
  const runtime = embeddedRuntime(requirements)
  const app = await runtime.runPromise(httpApp)
  const addressed = Effect.flatMap(Effect.serviceOption(WebRemoteAddress), (address) =>
    Option.isNone(address)
      ? app
      : Effect.updateService(app, HttpServerRequest.HttpServerRequest, (request) => request.modify({ remoteAddress: address.value })))
  const handle = HttpApp.toWebHandlerRuntime(await runtime.runtime())(addressed)
  return {
    handler: (request, info) =>
      info?.remoteAddress === undefined ? handle(request) : handle(request, Context.make(WebRemoteAddress, info.remoteAddress) as Context.Context<never>),
    owns: Embedding.owns(options.paths ?? Embedding.defaultPaths),
    dispose: () => runtime.dispose()
  }
}
