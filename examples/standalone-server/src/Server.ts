/**
 * The standalone server: the standard composition (`@mediagate/server`) over a task store
 * (SQLite by default, PostgreSQL or memory), the simulator and files on disk, on one
 * node:http server. Tests build the same composition.
 */
import { NodeHttpServer } from "@effect/platform-node"
import type { Accounts, Ledger, MediaStore, Outbound, StoreError, TaskStore } from "@mediagate/core"
import { Ids } from "@mediagate/core"
import { MediagateHttp, RateLimit, Routes } from "@mediagate/http"
import {
  FileMediaStore,
  MediaProbe as NodeMediaProbe,
  MediaUpstream,
  NodeOutbound,
  NodeResolver,
  SafeFetch as NodeSafeFetch,
  Transcoder as NodeTranscoder
} from "@mediagate/media"
import type { Deliverer, Engine } from "@mediagate/scheduler"
import { Mediagate } from "@mediagate/server"
import { MemoryAccounts, MemoryLedger, MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, PgNotify, SqlAccounts, SqlLedger, SqlTaskStore } from "@mediagate/store-sql"
import { Fal, OpenAiImages, OpenAiModeration, Relay, Replicate, Router, RoutesFile, SimulatedModeration, Simulator } from "@mediagate/upstream"
import type { MediaError } from "@mediagate/core"
import { ModelCatalog, Moderation, ModerationRules, Upstream } from "@mediagate/core"
import { FetchHttpClient } from "@effect/platform"
import { Data, Effect, Either, Layer, Option } from "effect"
import { readFile } from "node:fs/promises"
import type { Server as NodeServer } from "node:http"
import { createServer } from "node:http"
import type { ModerationConfig, ProviderConfig, ServerConfig } from "./Config.js"

/** Where tasks, accounts, credits and files live. */
export interface Backends {
  readonly store: Layer.Layer<TaskStore.TaskStore, StoreError>
  readonly accounts: Layer.Layer<Accounts.Accounts, StoreError>
  readonly ledger: Layer.Layer<Ledger.Ledger, StoreError>
  readonly media: Layer.Layer<MediaStore.MediaStore, MediaError, Ids.Ids>
  /** Wake-ups to and from the other nodes on the same database (PostgreSQL only). */
  readonly relay?: Mediagate.Options["relay"]
}

/** An account of the memory backends, with the credits (micro-USD) it starts with. */
export interface MemoryAccount extends MemoryAccounts.AccountWithKey {
  readonly credits?: number
}

/** Everything in memory, with the given accounts and their starting credits. */
export const memoryBackends = (
  config: Pick<ServerConfig, "publicUrl">,
  accounts: ReadonlyArray<MemoryAccount>
): Backends => ({
  store: MemoryTaskStore.layer,
  accounts: MemoryAccounts.layer(accounts),
  ledger: MemoryLedger.layerWithCredits(
    accounts.flatMap((account) => (account.credits === undefined || account.credits <= 0 ? [] : [{ accountId: account.id, amount: account.credits }]))
  ),
  media: MemoryMediaStore.layer({ baseUrl: `${config.publicUrl}${Routes.mediaPrefix}` })
})

/**
 * Tasks and accounts in the SQL database of `databaseUrl`; files under `mediaDir`. On
 * PostgreSQL, several servers may share the database: they wake each other with
 * LISTEN/NOTIFY.
 */
export const sqlBackends = (config: Pick<ServerConfig, "publicUrl" | "databaseUrl" | "mediaDir"> & Partial<Pick<ServerConfig, "mediaRetention">>) => {
  const parsed = Database.parseUrl(config.databaseUrl)
  // Two clients: on SQLite the task store keeps its connection to itself; accounts and the
  // ledger share the other (one layer, memoised by reference).
  const shared = Database.layerFromUrl(config.databaseUrl)
  return {
    store: SqlTaskStore.layer.pipe(Layer.provide(Database.layerFromUrl(config.databaseUrl))),
    accounts: SqlAccounts.layer().pipe(Layer.provide(shared)),
    ledger: SqlLedger.layer().pipe(Layer.provide(shared)),
    media: FileMediaStore.layerWith({
      directory: config.mediaDir,
      baseUrl: `${config.publicUrl}${Routes.mediaPrefix}`,
      ...Option.match(config.mediaRetention ?? Option.none(), { onNone: () => ({}), onSome: (retention) => ({ retention }) })
    }),
    ...(Either.isRight(parsed) && parsed.right._tag === "Postgres" ? { relay: PgNotify.make({ url: parsed.right.url }) } : {})
  }
}

/** The engine's settings from the configuration (the library's defaults where not given). */
export const engineOptions = (
  config: Partial<Pick<ServerConfig, "lease" | "shutdownGrace" | "maxRunning" | "maxRunningPerAccount" | "maxRunningPerProvider">>
): Engine.Options => ({
  // A claim and a running call's heartbeat hold for the same time: a dead node's tasks wait that long.
  ...(config.lease === undefined ? {} : { leaseDuration: config.lease, heartbeatWindow: config.lease }),
  ...(config.shutdownGrace === undefined ? {} : { shutdownGrace: config.shutdownGrace }),
  ...(config.maxRunning === undefined ? {} : { maxRunning: config.maxRunning }),
  ...(config.maxRunningPerAccount === undefined ? {} : { maxRunningPerAccount: config.maxRunningPerAccount }),
  ...(config.maxRunningPerProvider === undefined ? {} : { maxRunningPerProvider: config.maxRunningPerProvider })
})

/** Models run on real providers: the routes of the routes file, the providers whose keys are set. */
export interface Routing {
  readonly routes: ReadonlyArray<Router.Route>
  readonly unrouted: ServerConfig["unrouted"]
  readonly providers: ProviderConfig
  /** Where providers send webhooks (`<public URL>/webhooks`); without it jobs are only polled. */
  readonly webhookBaseUrl?: string
}

/** The names of the providers whose keys are set. */
export const configuredProviders = (providers: ProviderConfig): ReadonlySet<string> =>
  new Set(Object.entries(providers).filter(([, value]) => Option.isSome(value)).map(([name]) => name))

/** The adapters of the providers whose keys are set. */
const adapters = (providers: ProviderConfig) =>
  Effect.gen(function*() {
    const found: Array<Router.Provider> = []
    /** `{ [name]: value }` when set, `{}` otherwise. */
    const given = <K extends string, A>(name: K, value: Option.Option<A>) =>
      Option.match(value, { onNone: () => ({}), onSome: (a) => ({ [name]: a }) }) as { readonly [P in K]?: A }
    if (Option.isSome(providers.fal)) {
      const { baseUrl, jwksUrl, key } = providers.fal.value
      found.push(Fal.make({ key, ...given("baseUrl", baseUrl), ...given("jwksUrl", jwksUrl) }))
    }
    if (Option.isSome(providers.replicate)) {
      const { baseUrl, token, wait, webhookSecret } = providers.replicate.value
      found.push(Replicate.make({ token, ...given("baseUrl", baseUrl), ...given("wait", wait), ...given("webhookSecret", webhookSecret) }))
    }
    if (Option.isSome(providers.openai)) {
      found.push(yield* OpenAiImages.make({ key: providers.openai.value.key, ...given("baseUrl", providers.openai.value.baseUrl) }))
    }
    if (Option.isSome(providers.relay)) {
      const { baseUrl, key, webhookSecret } = providers.relay.value
      found.push(Relay.make({ baseUrl, key, ...given("webhookSecret", webhookSecret) }))
    }
    return found
  })

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

/** The deployment's upstream: the simulator, or the router over the configured providers (the simulator for unrouted models when asked). */
const upstream = (
  config: Pick<ServerConfig, "simulatorProfile"> & { readonly simulatorStats?: Simulator.Stats },
  routing: Routing | undefined
): Layer.Layer<Upstream.Upstream, never, MediaStore.MediaStore | Ids.Ids> => {
  const simulator = Simulator.layer({ profile: config.simulatorProfile, ...(config.simulatorStats === undefined ? {} : { stats: config.simulatorStats }) })
  if (routing === undefined) return simulator
  return Layer.effect(
    Upstream.Upstream,
    Effect.gen(function*() {
      const unrouted = yield* Upstream.Upstream
      return yield* Router.make({
        routes: routing.routes,
        providers: yield* adapters(routing.providers),
        ...(routing.unrouted === "simulator" ? { unrouted, unroutedName: "simulator" } : {}),
        ...(routing.webhookBaseUrl === undefined ? {} : { webhooks: { baseUrl: routing.webhookBaseUrl } })
      })
    })
  ).pipe(Layer.provide(simulator), Layer.provide(FetchHttpClient.layer))
}

/** The services of a deployment, without the HTTP server: the standard composition over these backends. */
export const services = (
  config: Pick<ServerConfig, "simulatorProfile" | "allowPrivateUrls"> & Partial<Pick<ServerConfig, "deadlines" | "moderation">> & {
    /** Where the simulator counts its files, jobs and cancels (tests look at it). */
    readonly simulatorStats?: Simulator.Stats
    /** Real providers; without it every model runs on the simulator. */
    readonly routing?: Routing
    /**
     * The spec's media rules around the upstream (`MediaUpstream`): input media fetched and
     * checked, WebP input transcoded, alpha-image-2 and beta-imagine results hosted here.
     * The standalone server always has them; without this, media URLs pass as given.
     */
    readonly mediaRules?: { readonly mediaBaseUrl: string }
  },
  backends: Backends,
  engine: Engine.Options = {},
  deliverer: Deliverer.Options = {}
) => {
  const inner = upstream(config, config.routing).pipe(Layer.provide(backends.media))
  const concrete = Layer.mergeAll(
    backends.store,
    backends.accounts,
    backends.ledger,
    backends.media,
    config.mediaRules === undefined
      ? inner
      : mediaRules(config.mediaRules, config.allowPrivateUrls).pipe(Layer.provide(inner), Layer.provide(backends.media)),
    moderation(config.moderation),
    outbound(config)
  ).pipe(Layer.provide(Ids.layer))
  const relay = backends.relay === undefined ? {} : { relay: backends.relay }
  const deadlines = config.deadlines === undefined ? {} : { deadlines: config.deadlines }
  return Mediagate.services({ engine, deliverer, allowPrivateUrls: config.allowPrivateUrls, ...relay, ...deadlines }).pipe(
    Layer.provideMerge(concrete)
  )
}

/** Fetching, probing and transcoding for `MediaUpstream`, every request through SafeFetch's address rules. */
const mediaRules = (options: MediaUpstream.Options, allowPrivate: boolean) =>
  MediaUpstream.layer(options).pipe(
    Layer.provide(Layer.mergeAll(NodeMediaProbe.layer, NodeTranscoder.layer()).pipe(
      Layer.provideMerge(NodeSafeFetch.layer({ allowPrivate })),
      Layer.provide(NodeResolver.layer)
    ))
  )

/** A startup problem that is not a variable's (an unreadable or invalid file): one line. */
export class StartupError extends Data.TaggedError("StartupError")<{ readonly message: string }> {}

/** The library's moderation when the configuration names none: the built-in local rules, failing closed. */
const defaultModeration: ModerationConfig = { moderator: { _tag: "local", rulesFile: Option.none() }, failOpen: false }

/**
 * The deployment's moderation: the simulator's marker first (demos and tests), then the
 * configured moderator; a backend that cannot answer refuses the submit (503) or, failing
 * open, lets the prompt through; both are counted.
 */
export const moderation = (config: ModerationConfig = defaultModeration): Layer.Layer<Moderation.Moderation, StartupError> => {
  const { moderator } = config
  const chosen: Layer.Layer<Moderation.Moderation, StartupError> = moderator._tag === "none"
    ? Moderation.layerAllowAll
    : moderator._tag === "openai"
    ? OpenAiModeration.layer({
      key: moderator.key,
      ...Option.match(moderator.baseUrl, { onNone: () => ({}), onSome: (baseUrl) => ({ baseUrl }) }),
      ...Option.match(moderator.model, { onNone: () => ({}), onSome: (model) => ({ model }) })
    }).pipe(Layer.provide(FetchHttpClient.layer))
    : Layer.effect(
      Moderation.Moderation,
      Effect.gen(function*() {
        const rules = yield* Option.match(moderator.rulesFile, {
          onNone: () => Effect.succeed(ModerationRules.builtIn),
          onSome: (file) =>
            Effect.tryPromise({
              try: () => readFile(file, "utf8"),
              catch: (error) => new StartupError({ message: `MEDIAGATE_MODERATION_RULES: cannot read ${file}: ${(error as Error).message}` })
            }).pipe(
              Effect.flatMap((text) =>
                Either.match(ModerationRules.parseRulesFile(text), {
                  onLeft: (problem) => Effect.fail(new StartupError({ message: `MEDIAGATE_MODERATION_RULES: ${file}: ${problem}` })),
                  onRight: Effect.succeed
                })
              )
            )
        })
        return yield* Either.match(ModerationRules.compile(rules), {
          onLeft: (problem) => Effect.fail(new StartupError({ message: `moderation rules: ${problem}` })),
          onRight: (compiled) => Effect.succeed(ModerationRules.make(compiled))
        })
      })
    )
  return Layer.effect(
    Moderation.Moderation,
    Effect.map(Moderation.Moderation, (inner) => Moderation.counted(Moderation.all([SimulatedModeration.moderator, inner]), { failOpen: config.failOpen }))
  ).pipe(Layer.provide(chosen))
}

/** Requests to third parties (callbacks): public addresses only unless private ones are allowed. */
export const outbound = (config: Pick<ServerConfig, "allowPrivateUrls">): Layer.Layer<Outbound.Outbound> =>
  NodeOutbound.layer({ allowPrivate: config.allowPrivateUrls }).pipe(Layer.provide(NodeResolver.layer))

/** The HTTP server on `host:port`: `http`, or a new one. */
export const server = (config: Pick<ServerConfig, "host" | "port">, http: NodeServer = createServer()) =>
  NodeHttpServer.layer(() => http, { port: config.port, host: config.host })

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
  | "startingCredits"
  | "mediaRetention"
export type LayerConfig = Omit<ServerConfig, Tunables | "routes" | "unrouted" | "providers" | "webhooks"> & Partial<Pick<ServerConfig, Tunables>> & {
  readonly routing?: Routing
}

/**
 * Everything: services and the server. `http` is the node:http server to listen with (the
 * process closes it first when it is told to stop).
 */
export const layer = (config: LayerConfig, backends: Backends, http?: NodeServer) =>
  MediagateHttp.serve.pipe(
    Layer.provide(Option.match(config.rateLimit ?? Option.none(), { onNone: () => Layer.empty, onSome: RateLimit.layer })),
    Layer.provide(services({ ...config, mediaRules: { mediaBaseUrl: `${config.publicUrl}${Routes.mediaPrefix}` } }, backends, engineOptions(config))),
    // The OpenAPI document names MEDIAGATE_PUBLIC_URL (or its default) in `servers`.
    Layer.provide(Layer.succeed(Routes.PublicUrl, Option.some(config.publicUrl))),
    Layer.provide(config.webhookPrefix === undefined ? Layer.empty : Layer.succeed(Routes.WebhookPrefix, config.webhookPrefix)),
    Layer.provide(server(config, http))
  )
