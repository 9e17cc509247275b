/**
 * The services of a deployment over backends the host chose (`Backends`): the standard
 * composition (`Mediagate.services`) with the library's concrete choices around it: the
 * simulator, or real providers behind the router; moderation; callbacks to public addresses
 * only; and the spec's media rules. The standalone server is this plus an HTTP server; an
 * embedding host serves it wherever it likes.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import type { MediaError, MediaStore, Outbound, SharedLimits, StoreError, Uploads } from "@mediagate/core"
import { AdminKeys, Files, Ids, ModelCatalog, Moderation, ModerationRules, Upstream, UsageRecords } from "@mediagate/core"
import { AuthFailures, HeldRequests, RateLimit } from "@mediagate/http"
import {
  MediaProbe as NodeMediaProbe,
  MediaUpstream,
  NodeOutbound,
  NodeResolver,
  SafeFetch as NodeSafeFetch,
  Transcoder as NodeTranscoder
} from "@mediagate/media"
import type { Deliverer, Engine } from "@mediagate/scheduler"
import { Fal, OpenAiImages, OpenAiModeration, Relay, Replicate, Router, SimulatedModeration, Simulator } from "@mediagate/upstream"
import type { Duration, Redacted } from "effect"
import { Data, Effect, Either, Layer, Option } from "effect"
import { readFile } from "node:fs/promises"
import type { Backends } from "./Backends.js"
import * as Mediagate from "./Mediagate.js"

/** The pre-submission moderator, and what happens when its backend is down. */
export interface ModerationConfig {
  readonly moderator:
    /** Local word and pattern rules: the built-in list, with the operator's rules file if given. */
    | { readonly _tag: "local"; readonly rulesFile: Option.Option<string> }
    /** An OpenAI-compatible moderation API. */
    | { readonly _tag: "openai"; readonly baseUrl: Option.Option<string>; readonly key: string; readonly model: Option.Option<string> }
    /** No moderation (only the simulator's marker). */
    | { readonly _tag: "none" }
  /** When the backend cannot answer: let the prompt through (true) or refuse the submit with 503 (false, the default). */
  readonly failOpen: boolean
}

/** Provider credentials and addresses. */
export interface ProviderConfig {
  readonly fal: Option.Option<{ readonly key: string; readonly baseUrl: Option.Option<string>; readonly jwksUrl: Option.Option<string> }>
  readonly replicate: Option.Option<{
    readonly token: string
    readonly baseUrl: Option.Option<string>
    readonly wait: Option.Option<number>
    /** The events Replicate sends webhooks for (`Replicate.Options.webhookEvents`); none: `completed` only. */
    readonly webhookEvents?: Option.Option<ReadonlyArray<Replicate.WebhookEvent>>
    readonly webhookSecret: Option.Option<string>
  }>
  readonly openai: Option.Option<{ readonly key: string; readonly baseUrl: Option.Option<string> }>
  readonly relay: Option.Option<{ readonly baseUrl: string; readonly key: string; readonly webhookSecret: Option.Option<string> }>
}

/** Models run on real providers: the routes, the providers whose keys are set. */
export interface Routing {
  readonly routes: ReadonlyArray<Router.Route>
  /** What runs the models no route names: the simulator, or nothing (their tasks fail). */
  readonly unrouted: "simulator" | "fail"
  readonly providers: ProviderConfig
  /** Where providers send webhooks (`<public URL>/webhooks`); without it jobs are only polled. */
  readonly webhookBaseUrl?: string
}

/** The settings of `services` that come from the configuration. */
export interface Config {
  readonly simulatorProfile: Simulator.Profile
  /** Accept localhost and private addresses in callBackUrl and media URLs (development and tests only). */
  readonly allowPrivateUrls: boolean
  /** Deadlines by model family, replacing the models' defaults. */
  readonly deadlines?: Readonly<Record<string, Duration.DurationInput>>
  /** The moderator; default: the built-in local rules, failing closed. */
  readonly moderation?: ModerationConfig
  /** Where the simulator counts its files, jobs and cancels (tests look at it). */
  readonly simulatorStats?: Simulator.Stats
  /** Real providers; without it every model runs on the simulator. */
  readonly routing?: Routing
  /**
   * The spec's media rules around the upstream (`MediaUpstream`): input media fetched and
   * checked, WebP input transcoded, alpha-image-2 and beta-imagine results hosted here.
   * The standalone server always has them; without this, media URLs pass as given. Media URLs
   * under `mediaBaseUrl` are files of this deployment: submit checks them in its MediaStore
   * and the rules read them from it, whatever their host.
   */
  readonly mediaRules?: { readonly mediaBaseUrl: string }
}

/** The engine's tunables; each has the library's default. */
export interface EngineConfig {
  readonly lease?: Duration.Duration
  readonly shutdownGrace?: Duration.Duration
  readonly maxRunning?: number
  readonly maxRunningPerAccount?: number
  readonly maxRunningPerProvider?: Readonly<Record<string, number>>
}

/** The engine's settings from the configuration (the library's defaults where not given). */
export const engineOptions = (config: EngineConfig): Engine.Options => ({
  // A claim and a running call's heartbeat hold for the same time: a dead node's tasks wait that long.
  ...(config.lease === undefined ? {} : { leaseDuration: config.lease, heartbeatWindow: config.lease }),
  ...(config.shutdownGrace === undefined ? {} : { shutdownGrace: config.shutdownGrace }),
  ...(config.maxRunning === undefined ? {} : { maxRunning: config.maxRunning }),
  ...(config.maxRunningPerAccount === undefined ? {} : { maxRunningPerAccount: config.maxRunningPerAccount }),
  ...(config.maxRunningPerProvider === undefined ? {} : { maxRunningPerProvider: config.maxRunningPerProvider })
})

/** The limits of the HTTP edge; each left out has the library's default (no rate limit). */
export interface EdgeConfig {
  /** Requests a second per key and the burst (and the wait for the shared buckets); none: no server-wide rate limit (scoped keys' own rates still hold, `RateLimit.layerOwnOnly`). */
  readonly rateLimit?: Option.Option<RateLimit.SharedOptions>
  /** Requests held open at once (events streams, `?wait=`), per key and in total. */
  readonly heldRequests?: HeldRequests.Limits
  /** Failed authentications a minute per client address; none: no limit. */
  readonly authFailureLimit?: Option.Option<number>
}

/**
 * The HTTP edge's limits as layers for `MediagateHttp.serve` (or the requirements of
 * `makeNodeHandler`): the rate limit, the caps on held requests, the limit on failed
 * authentications per address. With `shared` (the backends' `limits`, on PostgreSQL) the
 * rate limit and the caps on held requests hold for every node on the database; without
 * it, in this process. The limit on failed authentications stays per process either way:
 * it answers guessing from one address, which one node's count already stops.
 */
export const edgeLimits = (
  config: EdgeConfig,
  shared?: Layer.Layer<SharedLimits.SharedLimits, StoreError>
): Layer.Layer<never, StoreError> => {
  const rateLimit = config.rateLimit ?? Option.none()
  const kept: Layer.Layer<never, StoreError> = shared === undefined
    ? Option.match(rateLimit, { onNone: () => RateLimit.layerOwnOnly, onSome: RateLimit.layer })
    : Layer.mergeAll(
      Option.match(rateLimit, { onNone: () => RateLimit.layerSharedOwnOnly, onSome: RateLimit.layerShared }),
      HeldRequests.layerShared
    ).pipe(Layer.provide(shared))
  return Layer.mergeAll(
    kept,
    config.heldRequests === undefined ? Layer.empty : HeldRequests.layer(config.heldRequests),
    config.authFailureLimit === undefined
      ? Layer.empty
      : AuthFailures.layer(Option.map(config.authFailureLimit, (failures) => ({ failures, window: "1 minute" })))
  )
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
      const { baseUrl, token, wait, webhookEvents = Option.none(), webhookSecret } = providers.replicate.value
      // With the deployment's MediaStore: `data:` outputs (under `Prefer: wait`) are hosted, never returned as URLs.
      found.push(yield* Replicate.makeWithStore({
        token,
        ...given("baseUrl", baseUrl),
        ...given("wait", wait),
        ...given("webhookEvents", webhookEvents),
        ...given("webhookSecret", webhookSecret)
      }))
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

/** The deployment's upstream: the simulator, or the router over the configured providers (the simulator for unrouted models when asked). */
const upstream = (
  config: Pick<Config, "simulatorProfile" | "simulatorStats">,
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

/** What `services` provides: the standard composition's services (the admin API's included) and the backends under them. */
export type Services =
  | Layer.Layer.Success<ReturnType<typeof Mediagate.servicesWithAdmin>>
  | Files.Files
  | Uploads.Uploads
  | Mediagate.Requirements
  | Mediagate.AdminRequirements

/** What `services` takes: the settings, the backends, and the engine's and the deliverer's tunables. */
export interface Options extends Omit<Config, "allowPrivateUrls"> {
  /** Accept localhost and private addresses in callBackUrl and media URLs (development and tests only); default false. */
  readonly allowPrivateUrls?: boolean
  /** Where tasks, accounts, credits and files live (`Backends.memoryBackends`, `SqlBackends.make` of `@mediagate/server/sql`). */
  readonly backends: Backends
  /** The engine's settings (`engineOptions(config)` from the configuration); default: the library's. */
  readonly engine?: Engine.Options
  /** The callback deliverer's settings; default: the library's. */
  readonly deliverer?: Deliverer.Options
  /**
   * An admin key given as configuration (`MEDIAGATE_ADMIN_KEY`), beside the stored ones
   * (`AdminKeys.withGiven`): it opens the admin API and the console.
   */
  readonly adminKey?: Option.Option<Redacted.Redacted<string>>
  /**
   * Uploads (`POST /api/v1/files`, metadata in the backends' `uploads`): the largest file and
   * how long one lives; default `Files.defaults` (50 MB, 24 hours). The sweep of expired
   * uploads runs every 5 minutes.
   */
  readonly uploads?: Files.Settings
}

/** The services of a deployment, without the HTTP server: the standard composition over these backends. */
export const services = (
  options: Options
): Layer.Layer<Services, StoreError | MediaError | StartupError | Layer.Layer.Error<ReturnType<typeof Mediagate.servicesWithAdmin>>> => {
  const { backends } = options
  const allowPrivateUrls = options.allowPrivateUrls ?? false
  const inner = upstream(options, options.routing).pipe(Layer.provide(backends.media))
  const concrete = Layer.mergeAll(
    backends.store,
    backends.accounts,
    backends.ledger,
    backends.media,
    options.mediaRules === undefined
      ? inner
      : mediaRules(options.mediaRules, allowPrivateUrls).pipe(Layer.provide(inner), Layer.provide(backends.media)),
    moderation(options.moderation),
    outbound({ allowPrivateUrls }),
    Option.match(options.adminKey ?? Option.none(), {
      onNone: () => backends.adminKeys,
      onSome: (given) => AdminKeys.layerWithGiven(given).pipe(Layer.provide(backends.adminKeys))
    }),
    backends.audit,
    backends.uploads
  ).pipe(Layer.provide(Ids.layer))
  const relay = backends.relay === undefined ? {} : { relay: backends.relay }
  const keys = backends.idempotencyKeys === undefined ? {} : { idempotencyKeys: backends.idempotencyKeys }
  // Without the backends' own usage reads: reads over these backends, uploads included (the same
  // layers as above, memoised by reference).
  const usage = backends.usage ?? UsageRecords.layer.pipe(Layer.provide([backends.store, backends.ledger, backends.accounts, backends.uploads]))
  const deadlines = options.deadlines === undefined ? {} : { deadlines: options.deadlines }
  const composed = Mediagate.servicesWithAdmin({
    engine: options.engine ?? {},
    deliverer: options.deliverer ?? {},
    allowPrivateUrls,
    ...(options.mediaRules === undefined ? {} : { mediaBaseUrl: options.mediaRules.mediaBaseUrl }),
    ...relay,
    ...keys,
    usage,
    ...deadlines
  }).pipe(Layer.provideMerge(concrete))
  // Uploads: the use case over the backends' uploads and media store (one instance, shared by
  // reference with its sweep), its files probed where they are stored, never fetched.
  const files = Files.layer.pipe(
    Layer.provide(Layer.succeed(Files.FilesSettings, options.uploads ?? Files.defaults)),
    Layer.provide(NodeMediaProbe.layer.pipe(Layer.provide(NodeSafeFetch.layer({ allowPrivate: allowPrivateUrls })), Layer.provide(NodeResolver.layer)))
  )
  return Layer.merge(files, Files.sweepLayer().pipe(Layer.provide(files))).pipe(Layer.provideMerge(composed))
}

/**
 * Fetching, probing and transcoding for `MediaUpstream`, every request through SafeFetch's
 * address rules; the catalog tells it which rules a job's model has.
 */
const mediaRules = (options: MediaUpstream.Options, allowPrivate: boolean) =>
  MediaUpstream.layer(options).pipe(
    Layer.provide(ModelCatalog.layer),
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
export const outbound = (config: { readonly allowPrivateUrls: boolean }): Layer.Layer<Outbound.Outbound> =>
  NodeOutbound.layer({ allowPrivate: config.allowPrivateUrls }).pipe(Layer.provide(NodeResolver.layer))
