/**
 * The standard mediagate composition. A host chooses the concrete backends (task store,
 * accounts, credits ledger, media store, upstream, moderation, outbound HTTP) and gets
 * everything else: submit and query, the engine woken by every submit, the callback
 * deliverer, credits reserved, charged and released with the settlement sweep behind them,
 * the model catalog and the HTTP API. The standalone server and the embedding example are both
 * built on it. This module depends on core, http and scheduler only; the ready-made
 * backends and the library's concrete choices are in `Backends` and `Deployment`.
 */
import type * as HttpRouter from "@effect/platform/HttpRouter"
import type * as HttpServer from "@effect/platform/HttpServer"
import type { AdminKeys, AdminService, AuditLog, Ledger, MediaStore, Moderation, Outbound, StoreError, TaskStore, UsageStore } from "@mediagate/core"
import {
  Accounts,
  AdminOperations,
  Deadlines,
  IdempotencyKeys,
  Ids,
  Insights,
  ModelCatalog,
  SubmitPolicy,
  TaskChanges,
  TaskEvents,
  TaskService,
  TaskWrites,
  Upstream,
  UsageRecords
} from "@mediagate/core"
import { Health, MediagateHttp } from "@mediagate/http"
import { Deliverer, Engine, Settlements } from "@mediagate/scheduler"
import type { Scope } from "effect"
import { Context, Duration, Effect, Layer } from "effect"

/**
 * What a host provides: the services the standard composition needs and does not make
 * itself (for ready-made layers of these, see `Backends` and `Deployment`).
 */
export type Requirements =
  | TaskStore.TaskStore
  | Accounts.Accounts
  | Ledger.Ledger
  | MediaStore.MediaStore
  | Upstream.Upstream
  | Moderation.Moderation
  | Outbound.Outbound

/**
 * What the admin API (and the console) needs besides: the accounts' admin side, the admin
 * keys and the audit log (`Backends`' `accounts`, `adminKeys` and `audit`). A host with no
 * admin key answers 401 on every admin path.
 */
export type AdminRequirements = Accounts.AccountAdmin | AdminKeys.AdminKeys | AuditLog.AuditLog

/**
 * Carries wake-ups between the nodes on one store (`PgNotify.make` on PostgreSQL): `relay`
 * wraps a local wake-up so that it also wakes the other nodes, and theirs wake this one;
 * `changes`, when given, carries the changes of tasks to the waiters on other nodes
 * (`TaskChanges.makeRelayed`).
 */
export interface Relay {
  readonly relay: (
    topic: "tasks" | "callbacks",
    local: Effect.Effect<void>
  ) => Effect.Effect<Effect.Effect<void>, never, Scope.Scope>
  readonly changes?: TaskChanges.Relay
}

class RelayService extends Context.Tag("@mediagate/server/Relay")<RelayService, Relay>() {}

/** Settings of the composition; every one has a default. */
export interface Options {
  readonly engine?: Engine.Options
  readonly deliverer?: Deliverer.Options
  /** The settlement sweep's interval and grace (default every 5 minutes, reservations older than 10). */
  readonly settlements?: Settlements.Options
  /** Accept localhost and private addresses in callBackUrl and media URLs (development and tests only). */
  readonly allowPrivateUrls?: boolean
  /**
   * This deployment's media base (`<public URL>/media`): media URLs under it name files of the
   * MediaStore (uploads, results), judged and read by the store, not by their host (`SubmitPolicy`).
   */
  readonly mediaBaseUrl?: string
  /** Ids for task ids and tokens; default `Ids.layer` (Web Crypto). Tests pass `Ids.layerTest`. */
  readonly ids?: Layer.Layer<Ids.Ids>
  /** The account cache in front of the host's Accounts (default: 5 s, 10,000 keys); false for none. */
  readonly accountCache?: Accounts.CacheOptions | false
  /** Deadlines by model family (`{ motion: "4 hours" }`), replacing the models' defaults (docs/models.md). */
  readonly deadlines?: Readonly<Record<string, Duration.DurationInput>>
  /**
   * Wakes the other nodes on the same store when a task is submitted, a callback is owed or
   * a task's status changes (`PgNotify.make({ url })` on PostgreSQL). Without it other
   * nodes find the work at their next periodic scan, and their waiters the change at their
   * next re-read.
   */
  readonly relay?: Effect.Effect<Relay, never, Scope.Scope>
  /**
   * Where submit's Idempotency-Keys live (`SqlIdempotencyKeys.layer` on the task store's
   * database). Default: in memory, so keys answer for 24 hours only while the process lives.
   */
  readonly idempotencyKeys?: Layer.Layer<IdempotencyKeys.IdempotencyKeys, StoreError>
  /**
   * The aggregate reads of usage reports and the operator's insights (`SqlUsage.layer` on the
   * task store's database). Default: reads over the task store, ledger and accounts
   * (`UsageRecords.layerWithoutUploads`: this composition takes no uploads), which read every
   * task and entry on each report: fine in memory.
   */
  readonly usage?: Layer.Layer<UsageStore.UsageStore, StoreError>
}

/** `inner`'s wake-up of `tag`, also relayed to the other nodes as `topic` when a relay is given. */
const relayed = <I extends TaskEvents.TaskWakeup | TaskEvents.CallbackWakeup, S extends { readonly wake: Effect.Effect<void> }, E, R>(
  tag: Context.Tag<I, S>,
  topic: "tasks" | "callbacks",
  inner: Layer.Layer<I, E, R>,
  relay: Layer.Layer<RelayService> | undefined
): Layer.Layer<I, E, R> =>
  relay === undefined ? inner : Layer.scoped(
    tag,
    Effect.gen(function*() {
      const local = yield* tag
      const wake = yield* (yield* RelayService).relay(topic, local.wake)
      return { ...local, wake } as S
    })
  ).pipe(Layer.provide(inner), Layer.provide(relay))

/** TaskChanges told to and by the other nodes through the relay's `changes`, when it has them. */
const relayedChanges = (relay: Layer.Layer<RelayService>): Layer.Layer<TaskChanges.TaskChanges, never, TaskStore.TaskStore> =>
  Layer.scoped(
    TaskChanges.TaskChanges,
    Effect.flatMap(RelayService, ({ changes }) => (changes === undefined ? TaskChanges.make : TaskChanges.makeRelayed(changes)))
  ).pipe(Layer.provide(relay))

/** The services of a deployment, without the HTTP server, with the engine and the deliverer running. */
export const services = (
  options: Options = {}
): Layer.Layer<TaskService | ModelCatalog.ModelCatalog | SubmitPolicy | Ids.Ids | Accounts.Accounts | Health.EngineStatus, StoreError, Requirements> => {
  // One deliverer, one write path and one engine (layers are memoised by reference): the
  // deliverer's wake-up reaches the write path, which the engine and the use cases share, so
  // an owed callback is sent at once; the engine's wake-up reaches submit, so an accepted task
  // starts at once. With a relay, both wake-ups also reach the other nodes (one relay, shared
  // by reference).
  const relay = options.relay === undefined ? undefined : Layer.scoped(RelayService, options.relay)
  const deliverer = relayed(TaskEvents.CallbackWakeup, "callbacks", Deliverer.layer(options.deliverer), relay)
  // One TaskChanges: the engine's writes wake the requests that wait on their tasks, and
  // with a relay, the other nodes' changes of status wake them too.
  const changes = relay === undefined ? TaskChanges.layer : relayedChanges(relay)
  const writes = TaskWrites.layer.pipe(Layer.provide(deliverer), Layer.provide(changes))
  const engine = relayed(TaskEvents.TaskWakeup, "tasks", Engine.layer(options.engine).pipe(Layer.provide(writes)), relay)
  const tasks = TaskService.Default.pipe(
    Layer.provide(engine),
    Layer.provide(writes),
    Layer.provide(deliverer),
    Layer.provide(changes),
    Layer.provide(options.idempotencyKeys ?? IdempotencyKeys.layerMemory)
  )
  const deadlines = new Map(Object.entries(options.deadlines ?? {}).map(([family, after]) => [family, Duration.decode(after)]))
  // Readiness (`/readyz`) asks the same engine whether its loop runs.
  const engineStatus = Layer.effect(
    Health.EngineStatus,
    Effect.map(TaskEvents.TaskWakeup, (wakeup) => ({ running: wakeup.running ?? Effect.succeed(true) }))
  ).pipe(Layer.provide(engine))
  return Layer.mergeAll(
    tasks.pipe(Layer.provide(Layer.succeed(Deadlines, deadlines))),
    engineStatus,
    Settlements.layer(options.settlements),
    Layer.succeed(SubmitPolicy, {
      ...SubmitPolicy.defaultValue(),
      allowPrivateUrls: options.allowPrivateUrls ?? false,
      mediaBaseUrl: options.mediaBaseUrl
    })
  ).pipe(
    Layer.provideMerge(ModelCatalog.layer),
    Layer.provideMerge(options.ids ?? Ids.layer),
    // Every request and callback looks its account up: a short-lived cache in front of the
    // host's Accounts, for the use cases, the deliverer and the HTTP API alike.
    Layer.provideMerge(options.accountCache === false ? Layer.effectContext(Effect.context<Accounts.Accounts>()) : Accounts.layerCached(options.accountCache))
  )
}

/**
 * `services` and the operator's service (`AdminService`, over the same use cases and the
 * admin requirements): what the HTTP API needs, admin API included.
 */
export const servicesWithAdmin = (
  options: Options = {}
): Layer.Layer<
  | Layer.Layer.Success<ReturnType<typeof services>>
  | AdminService.AdminService
  | UsageStore.UsageStore
  | Insights.ProviderTargets
  | Insights.RunningLimits,
  StoreError,
  Requirements | AdminRequirements
> =>
  Layer.mergeAll(
    Layer.provideMerge(AdminOperations.layer, services(options)),
    // Usage reports and the operator's insights: the host's aggregate reads (`SqlUsage`), or
    // reads over the task store, ledger and accounts; the upstream's targets, the engine's limits.
    options.usage ?? UsageRecords.layerWithoutUploads,
    Layer.effect(Insights.ProviderTargets, Effect.map(Upstream.Upstream, (upstream) => upstream.targets)),
    Layer.succeed(Insights.RunningLimits, Engine.runningLimits(options.engine ?? {}))
  )

/** The whole API served on the HttpServer in context. */
export const layer = (
  options: Options = {}
): Layer.Layer<never, StoreError, Requirements | AdminRequirements | HttpServer.HttpServer | HttpRouter.HttpRouter.DefaultServices> =>
  MediagateHttp.serve.pipe(Layer.provide(servicesWithAdmin(options)))

/**
 * A `node:http` request listener for an existing server, with its Express and Fastify
 * adapters, the engine and the deliverer running until `dispose` (`MediagateHttp.NodeHandler`).
 * Given the host's `server`, requests Node itself refuses (oversized headers, malformed
 * request lines) are answered in the envelope too.
 */
export const makeNodeHandler = <E>(
  requirements: Layer.Layer<Requirements | AdminRequirements, E>,
  options: Options & MediagateHttp.NodeHandlerOptions = {}
) => MediagateHttp.makeNodeHandler(servicesWithAdmin(options).pipe(Layer.provideMerge(requirements)), options)

/** A web-standard handler (`Request` in, `Response` out) over the standard composition (`MediagateHttp.WebHandler`). */
export const makeWebHandler = <E>(
  requirements: Layer.Layer<Requirements | AdminRequirements, E>,
  options: Options & MediagateHttp.HandlerOptions = {}
) => MediagateHttp.makeWebHandler(servicesWithAdmin(options).pipe(Layer.provideMerge(requirements)), options)
