/**
 * The standalone server: the standard composition (`@mediagate/server`) over a task store
 * (SQLite by default, PostgreSQL or memory), the simulator and files on disk, on one
 * node:http server. Tests build the same composition. The backends and the services live
 * in `@mediagate/server` (`Backends`, `Deployment`), so an embedding host imports the same
 * ones; this module adds the routes file and the HTTP server.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { ModelCatalog } from "@mediagate/core"
import { ClientErrors, MediagateHttp, Prometheus, Routes } from "@mediagate/http"
import { Backends as ServerBackends, Deployment } from "@mediagate/server"
import type { Router } from "@mediagate/upstream"
import { RoutesFile } from "@mediagate/upstream"
import { Effect, Either, Layer, Option } from "effect"
import { readFile } from "node:fs/promises"
import type { Server as NodeServer } from "node:http"
import { createServer } from "node:http"
import type { ProviderConfig, ServerConfig } from "./Config.js"

/** Where tasks, accounts, credits and files live. */
export type Backends = ServerBackends.Backends
/** An account of the memory backends, with the credits (micro-USD) it starts with. */
export type MemoryAccount = ServerBackends.MemoryAccount
/** Models run on real providers: the routes of the routes file, the providers whose keys are set. */
export type Routing = Deployment.Routing
/** A startup problem that is not a variable's (an unreadable or invalid file): one line. */
export type StartupError = Deployment.StartupError

// The backends and the services moved to @mediagate/server; the names stay here for the
// server's own modules, the tests and the benches.
export const memoryBackends = ServerBackends.memoryBackends
export const sqlBackends = ServerBackends.sqlBackends
export const services = Deployment.services
export const engineOptions = Deployment.engineOptions
export const configuredProviders = Deployment.configuredProviders
export const moderation = Deployment.moderation
export const outbound = Deployment.outbound
export const StartupError = Deployment.StartupError

/**
 * What each name a route may use stands for: the models the jobs run (the key the router
 * matches). A catalog id or a family stands for the models of its examples' jobs (with
 * their fallbacks); a job's model or `model/mode` stands for itself.
 */
export const routableModels = (): ReadonlyMap<string, ReadonlySet<string>> => {
  const names = new Map<string, Set<string>>()
  const add = (name: string, jobModel: string) => names.set(name, (names.get(name) ?? new Set()).add(jobModel))
  for (const spec of ModelCatalog.allModels) {
    for (const example of spec.examples) {
      const normalized = spec.normalize(example.input)
      if (Either.isLeft(normalized)) continue
      const { fallbackModel, mode, model } = normalized.right.job
      for (const jobModel of [model, ...(fallbackModel === null ? [] : [fallbackModel])]) {
        add(spec.id, jobModel)
        add(spec.family, jobModel)
        add(jobModel, jobModel)
      }
      add(`${model}/${mode}`, `${model}/${mode}`)
    }
  }
  return names
}

/**
 * The routes as the router matches them: a route named by catalog id or family serves each
 * model its jobs run, and a route that names a job's model itself wins over those.
 */
export const expandRoutes = (routes: ReadonlyArray<Router.Route>, names: ReadonlyMap<string, ReadonlySet<string>>) => {
  const expanded = new Map<string, Router.Route>()
  const exact = routes.filter((route) => names.get(route.model)?.size === 1 && names.get(route.model)!.has(route.model))
  for (const route of routes.filter((r) => !exact.includes(r))) {
    for (const model of names.get(route.model) ?? []) if (!expanded.has(model)) expanded.set(model, { ...route, model })
  }
  for (const route of exact) expanded.set(route.model, route)
  return [...expanded.values()]
}

/** Reads and checks the routes file; fails with one line per problem, each naming its line in the file. */
export const loadRoutes = (file: string, providers: ProviderConfig) =>
  Effect.gen(function*() {
    const text = yield* Effect.tryPromise({
      try: () => readFile(file, "utf8"),
      catch: (error) => new RoutesFile.RoutesFileError(`MEDIAGATE_ROUTES: cannot read ${file}: ${(error as Error).message}`)
    })
    const names = routableModels()
    const routes = yield* RoutesFile.parse(text, file, { providers: configuredProviders(providers), models: new Set(names.keys()) })
    return expandRoutes(routes, names)
  })

/** The HTTP server on `host:port`: `http`, or a new one; Node's own errors answered in the envelope. */
export const server = (config: Pick<ServerConfig, "host" | "port">, http: NodeServer = createServer()) =>
  NodeHttpServer.layer(() => {
    ClientErrors.install(http)
    return http
  }, { port: config.port, host: config.host })

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
  | "metrics"
export type LayerConfig = Omit<ServerConfig, Tunables | "routes" | "unrouted" | "providers" | "webhooks" | "logFormat" | "logLevel"> & Partial<Pick<ServerConfig, Tunables>> & {
  readonly routing?: Routing
  /** Whether each engine step runs in a span (`Engine.Options.stepSpans`): on when traces are exported. */
  readonly stepSpans?: boolean
}

/**
 * Everything: services and the server. `http` is the node:http server to listen with (the
 * process closes it first when it is told to stop).
 */
export const layer = (config: LayerConfig, backends: Backends, http?: NodeServer) =>
  MediagateHttp.serve.pipe(
    Layer.provide(Deployment.edgeLimits(config)),
    Layer.provide(services({ ...config, mediaRules: { mediaBaseUrl: `${config.publicUrl}${Routes.mediaPrefix}` } }, backends, {
      ...engineOptions(config),
      ...(config.stepSpans === true ? { stepSpans: true } : {})
    })),
    // The OpenAPI document names MEDIAGATE_PUBLIC_URL (or its default) in `servers`.
    Layer.provide(Layer.succeed(Routes.PublicUrl, Option.some(config.publicUrl))),
    Layer.provide(config.webhookPrefix === undefined ? Layer.empty : Layer.succeed(Routes.WebhookPrefix, config.webhookPrefix)),
    Layer.provide(config.metrics === true ? Layer.succeed(Prometheus.Enabled, true) : Layer.empty),
    Layer.provide(server(config, http))
  )
