/**
 * The standalone server: the standard composition (`@mediagate/server`) over a task store
 * (SQLite by default, PostgreSQL or memory), the simulator and files on disk, on one
 * node:http server. Tests build the same composition.
 */
import { NodeHttpServer } from "@effect/platform-node"
import type { Accounts, MediaStore, Outbound, StoreError, TaskStore } from "@mediagate/core"
import { Ids } from "@mediagate/core"
import { MediagateHttp, Routes } from "@mediagate/http"
import { FileMediaStore, NodeOutbound, NodeResolver } from "@mediagate/media"
import type { Deliverer, Engine } from "@mediagate/scheduler"
import { Mediagate } from "@mediagate/server"
import { MemoryAccounts, MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, PgNotify, SqlAccounts, SqlTaskStore } from "@mediagate/store-sql"
import { SimulatedModeration, Simulator } from "@mediagate/upstream"
import type { MediaError } from "@mediagate/core"
import { Either, Layer, Option } from "effect"
import type { Server as NodeServer } from "node:http"
import { createServer } from "node:http"
import type { ServerConfig } from "./Config.js"

/** Where tasks, accounts and files live. */
export interface Backends {
  readonly store: Layer.Layer<TaskStore.TaskStore, StoreError>
  readonly accounts: Layer.Layer<Accounts.Accounts, StoreError>
  readonly media: Layer.Layer<MediaStore.MediaStore, MediaError, Ids.Ids>
  /** Wake-ups to and from the other nodes on the same database (PostgreSQL only). */
  readonly relay?: Mediagate.Options["relay"]
}

/** Everything in memory, with the given accounts. */
export const memoryBackends = (
  config: Pick<ServerConfig, "publicUrl">,
  accounts: ReadonlyArray<MemoryAccounts.AccountWithKey>
): Backends => ({
  store: MemoryTaskStore.layer,
  accounts: MemoryAccounts.layer(accounts),
  media: MemoryMediaStore.layer({ baseUrl: `${config.publicUrl}${Routes.mediaPrefix}` })
})

/**
 * Tasks and accounts in the SQL database of `databaseUrl`; files under `mediaDir`. On
 * PostgreSQL, several servers may share the database: they wake each other with
 * LISTEN/NOTIFY.
 */
export const sqlBackends = (config: Pick<ServerConfig, "publicUrl" | "databaseUrl" | "mediaDir">) => {
  const parsed = Database.parseUrl(config.databaseUrl)
  // Two clients: on SQLite the task store keeps its connection to itself.
  return {
    store: SqlTaskStore.layer.pipe(Layer.provide(Database.layerFromUrl(config.databaseUrl))),
    accounts: SqlAccounts.layer().pipe(Layer.provide(Database.layerFromUrl(config.databaseUrl))),
    media: FileMediaStore.layer({ directory: config.mediaDir, baseUrl: `${config.publicUrl}${Routes.mediaPrefix}` }),
    ...(Either.isRight(parsed) && parsed.right._tag === "Postgres" ? { relay: PgNotify.make({ url: parsed.right.url }) } : {})
  }
}

/** The engine's settings from the configuration (the library's defaults where not given). */
export const engineOptions = (
  config: Partial<Pick<ServerConfig, "lease" | "shutdownGrace" | "maxRunning" | "maxRunningPerAccount">>
): Engine.Options => ({
  // A claim and a running call's heartbeat hold for the same time: a dead node's tasks wait that long.
  ...(config.lease === undefined ? {} : { leaseDuration: config.lease, heartbeatWindow: config.lease }),
  ...(config.shutdownGrace === undefined ? {} : { shutdownGrace: config.shutdownGrace }),
  ...(config.maxRunning === undefined ? {} : { maxRunning: config.maxRunning }),
  ...(config.maxRunningPerAccount === undefined ? {} : { maxRunningPerAccount: config.maxRunningPerAccount })
})

/** The services of a deployment, without the HTTP server: the standard composition over these backends. */
export const services = (
  config: Pick<ServerConfig, "simulatorProfile" | "allowPrivateUrls"> & Partial<Pick<ServerConfig, "deadlines">> & {
    /** Where the simulator counts its files, jobs and cancels (tests look at it). */
    readonly simulatorStats?: Simulator.Stats
  },
  backends: Backends,
  engine: Engine.Options = {},
  deliverer: Deliverer.Options = {}
) => {
  const concrete = Layer.mergeAll(
    backends.store,
    backends.accounts,
    backends.media,
    Simulator.layer({ profile: config.simulatorProfile, ...(config.simulatorStats === undefined ? {} : { stats: config.simulatorStats }) }).pipe(
      Layer.provide(backends.media)
    ),
    SimulatedModeration.layer,
    outbound(config)
  ).pipe(Layer.provide(Ids.layer))
  const relay = backends.relay === undefined ? {} : { relay: backends.relay }
  const deadlines = config.deadlines === undefined ? {} : { deadlines: config.deadlines }
  return Mediagate.services({ engine, deliverer, allowPrivateUrls: config.allowPrivateUrls, ...relay, ...deadlines }).pipe(
    Layer.provideMerge(concrete)
  )
}

/** Requests to third parties (callbacks): public addresses only unless private ones are allowed. */
export const outbound = (config: Pick<ServerConfig, "allowPrivateUrls">): Layer.Layer<Outbound.Outbound> =>
  NodeOutbound.layer({ allowPrivate: config.allowPrivateUrls }).pipe(Layer.provide(NodeResolver.layer))

/** The HTTP server on `host:port`: `http`, or a new one. */
export const server = (config: Pick<ServerConfig, "host" | "port">, http: NodeServer = createServer()) =>
  NodeHttpServer.layer(() => http, { port: config.port, host: config.host })

/** What `layer` reads: the configuration, where the engine's settings may be left to the library. */
/** Settings the engine and the catalog take from the configuration; each has the library's default. */
type Tunables = "lease" | "shutdownGrace" | "maxRunning" | "maxRunningPerAccount" | "deadlines"
export type LayerConfig = Omit<ServerConfig, Tunables> & Partial<Pick<ServerConfig, Tunables>>

/**
 * Everything: services and the server. `http` is the node:http server to listen with (the
 * process closes it first when it is told to stop).
 */
export const layer = (config: LayerConfig, backends: Backends, http?: NodeServer) =>
  MediagateHttp.serve.pipe(
    Layer.provide(services(config, backends, engineOptions(config))),
    // The OpenAPI document names MEDIAGATE_PUBLIC_URL (or its default) in `servers`.
    Layer.provide(Layer.succeed(Routes.PublicUrl, Option.some(config.publicUrl))),
    Layer.provide(server(config, http))
  )
