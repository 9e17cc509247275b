/**
 * The standalone server: the standard composition (`@mediagate/server`) over a task store
 * (SQLite by default, PostgreSQL or memory), the simulator and files on disk or in an
 * S3-compatible bucket, on one
 * node:http server. Tests build the same composition. The backends and the services live
 * in `@mediagate/server` (`Backends`, `Deployment`), so an embedding host imports the same
 * ones; this module adds the routes file and the HTTP server.
 */
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServer from "@effect/platform/HttpServer"
import type * as HttpServerError from "@effect/platform/HttpServerError"
import { NodeHttpServer } from "@effect/platform-node"
import { ClientErrors, FilesHandlers, MediagateHttp, Prometheus, RequestTimeouts, Routes } from "@mediagate/http"
import { Backends as ServerBackends, Deployment } from "@mediagate/server"
import { RoutesFile } from "@mediagate/upstream"
import { Context, Effect, Layer, Option } from "effect"
import { readFile } from "node:fs/promises"
import type { IncomingMessage, Server as NodeServer, ServerResponse } from "node:http"
import { createServer } from "node:http"
import type { ProviderConfig, ServerConfig } from "./Config.js"

/** Where tasks, accounts, credits and files live. */
export type Backends = ServerBackends.Backends
/** Models run on real providers: the routes of the routes file, the providers whose keys are set. */
export type Routing = Deployment.Routing

/** Reads and checks the routes file; fails with one line per problem, each naming its line in the file. */
export const loadRoutes = (file: string, providers: ProviderConfig) =>
  Effect.gen(function*() {
    const text = yield* Effect.tryPromise({
      try: () => readFile(file, "utf8"),
      catch: (error) => new RoutesFile.RoutesFileError(`MEDIAGATE_ROUTES: cannot read ${file}: ${(error as Error).message}`)
    })
    const names = RoutesFile.routableModels()
    const routes = yield* RoutesFile.parse(text, file, { providers: Deployment.configuredProviders(providers), models: new Set(names.keys()) })
    return RoutesFile.expandRoutes(routes, names)
  })

/**
 * The S3 MediaStore of MEDIAGATE_MEDIA_URL, with MEDIAGATE_MEDIA_RETENTION; none without a
 * bucket. The S3 SDK is loaded only then, so a server keeping files on disk never loads it.
 */
export const bucketMedia = (
  config: Pick<ServerConfig, "publicUrl" | "mediaBucket" | "mediaRetention">
): Effect.Effect<Option.Option<Backends["media"]>> =>
  Option.match(config.mediaBucket, {
    onNone: () => Effect.succeedNone,
    onSome: ({ bucket, client, prefix, serve }) =>
      Effect.map(Effect.promise(() => import("@mediagate/media/s3")), ({ S3MediaStore }) =>
        Option.some(S3MediaStore.layerWith({
          bucket,
          prefix,
          client,
          serve,
          baseUrl: `${config.publicUrl}${Routes.mediaPrefix}`,
          ...Option.match(config.mediaRetention, { onNone: () => ({}), onSome: (retention) => ({ retention }) })
        })))
  })

/**
 * The HTTP server on `host:port`: `http`, or a new one; Node's own errors answered in the
 * envelope, and node's deadlines for a request's headers (and the outer bound of the whole
 * request) set from `requestTimeouts` (`RequestTimeouts.applyTo`; the library's defaults without it).
 */
export const server = (
  config: Pick<ServerConfig, "host" | "port"> & Partial<Pick<ServerConfig, "requestTimeouts">>,
  http: NodeServer = createServer()
) =>
  NodeHttpServer.layer(() => {
    ClientErrors.install(http)
    holdEarlyRequests(http)
    return RequestTimeouts.applyTo(http, config.requestTimeouts)
  }, { port: config.port, host: config.host })

/**
 * The port listens before the services are built (migrations, the account, the engine), and
 * a request node:http accepts before the handler is attached would get no answer at all: a
 * health probe sent during the start would hang until its own timeout. Such requests wait
 * instead, and go to the handler when it is attached. Returns how many wait now.
 */
export const holdEarlyRequests = (http: NodeServer): (() => number) => {
  const waiting: Array<[IncomingMessage, ServerResponse]> = []
  const hold = (request: IncomingMessage, response: ServerResponse) => void waiting.push([request, response])
  const attached = (event: string | symbol, handler: (request: IncomingMessage, response: ServerResponse) => void) => {
    if (event !== "request" || handler === hold) return
    http.off("newListener", attached)
    http.off("request", hold)
    // After node has added the handler; each waiting request as if it came now.
    process.nextTick(() => {
      for (const [request, response] of waiting.splice(0)) handler.call(http, request, response)
    })
  }
  http.on("newListener", attached)
  http.on("request", hold)
  return () => waiting.length
}

/** The HTTP server `layer` serves on: `server`, still to bind or bound already. */
export type Listening = Layer.Layer<Layer.Layer.Success<ReturnType<typeof server>>, HttpServerError.ServeError>

/**
 * `server` bound now, for the life of the current scope, and the port it got: with port 0
 * the system chooses it, and the public URL the services are built with must name it.
 * NodeHttpServer listens when its layer is built and a node:http server listens only once,
 * so `layer` gets this built server, never a second `server` on the same `http`.
 */
export const bindNow = (config: Pick<ServerConfig, "host" | "port"> & Partial<Pick<ServerConfig, "requestTimeouts">>, http?: NodeServer) =>
  Effect.flatMap(Layer.build(server(config, http)), (context) => {
    const { address } = Context.get(context, HttpServer.HttpServer)
    // A host and a port always give a TCP address; a Unix socket here would be a bug.
    return address._tag === "TcpAddress"
      ? Effect.succeed({ port: address.port, listening: Layer.succeedContext(context) })
      : Effect.dieMessage(`the HTTP server listens on ${address.path}, not on a port`)
  })

/** What `layer` reads: the configuration, where the engine's settings may be left to the library. */
/** Settings the engine and the catalog take from the configuration; each has the library's default. */
type Tunables =
  | "lease"
  | "shutdownGrace"
  | "maxRunning"
  | "maxRunningPerAccount"
  | "maxRunningPerProvider"
  | "deadlines"
  | "webhookPrefix"
  | "moderation"
  | "rateLimit"
  | "heldRequests"
  | "authFailureLimit"
  | "startingCredits"
  | "mediaRetention"
  | "mediaBucket"
  | "metrics"
  | "requestTimeouts"
  | "adminKey"
export type LayerConfig = Omit<ServerConfig, Tunables | "routes" | "unrouted" | "providers" | "webhooks" | "logFormat" | "logLevel"> & Partial<Pick<ServerConfig, Tunables>> & {
  readonly routing?: Routing
  /** Whether each engine step runs in a span (`Engine.Options.stepSpans`): on when traces are exported. */
  readonly stepSpans?: boolean
}

/**
 * Everything: services and the server. `listening` is the HTTP server (`server` on the
 * node:http server the process closes first when it is told to stop, or `bindNow`'s).
 */
export const layer = (config: LayerConfig, backends: Backends, listening: Listening) =>
  // Without trace export, the platform's per-request span is not made at all (the URL parse
  // and attributes it costs would go to a tracer that is off).
  (config.stepSpans === true ? MediagateHttp.serve : HttpMiddleware.withTracerDisabledWhen(MediagateHttp.serve, () => true)).pipe(
    Layer.provide(Deployment.edgeLimits(config, backends.limits)),
    Layer.provide(Deployment.services({
      ...config,
      mediaRules: { mediaBaseUrl: `${config.publicUrl}${Routes.mediaPrefix}` },
      backends,
      engine: { ...Deployment.engineOptions(config), ...(config.stepSpans === true ? { stepSpans: true } : {}) }
    })),
    // The OpenAPI document names MEDIAGATE_PUBLIC_URL (or its default) in `servers`.
    Layer.provide(Layer.succeed(Routes.PublicUrl, Option.some(config.publicUrl))),
    Layer.provide(config.webhookPrefix === undefined ? Layer.empty : Layer.succeed(Routes.WebhookPrefix, config.webhookPrefix)),
    Layer.provide(config.metrics === true ? Layer.succeed(Prometheus.Enabled, true) : Layer.empty),
    // The body's deadline, which the handlers apply (the headers' is node's, set by `server`).
    Layer.provide(config.requestTimeouts === undefined ? Layer.empty : RequestTimeouts.layer(config.requestTimeouts)),
    Layer.provide(config.uploads === undefined ? Layer.empty : Layer.succeed(FilesHandlers.UploadRateLimit, config.uploads.rate)),
    Layer.provide(listening)
  )
