/**
 * The standalone composition: memory store, simulator, engine and HTTP on one node:http
 * server. Tests build the same composition.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { Ids, ModelCatalog, SubmitPolicy, TaskService } from "@mediagate/core"
import { MediagateHttp, Routes } from "@mediagate/http"
import { Engine } from "@mediagate/scheduler"
import { MemoryAccounts, MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import { SimulatedModeration, Simulator } from "@mediagate/upstream"
import type { Redacted } from "effect"
import { Layer } from "effect"
import { createServer } from "node:http"
import type { ServerConfig } from "./Config.js"

/** The services of a mediagate deployment, without the HTTP server. */
export const services = (
  config: Pick<ServerConfig, "publicUrl" | "simulatorProfile" | "allowPrivateUrls">,
  accounts: ReadonlyArray<MemoryAccounts.AccountWithKey>,
  engine: Engine.Options = {}
) => {
  const media = MemoryMediaStore.layer({ baseUrl: `${config.publicUrl}${Routes.mediaPrefix}` })
  const upstream = Simulator.layer({ profile: config.simulatorProfile }).pipe(Layer.provide(media))
  const wakeup = Engine.layer(engine).pipe(Layer.provide(upstream))
  const tasks = TaskService.Default.pipe(
    Layer.provide([wakeup, SimulatedModeration.layer])
  )
  return Layer.mergeAll(
    tasks,
    media,
    MemoryAccounts.layer(accounts),
    Layer.succeed(SubmitPolicy, { ...SubmitPolicy.defaultValue(), allowPrivateUrls: config.allowPrivateUrls })
  ).pipe(
    Layer.provideMerge(ModelCatalog.layer),
    Layer.provideMerge(MemoryTaskStore.layer),
    Layer.provideMerge(Ids.layer)
  )
}

/** The HTTP server on `host:port` serving the API. */
export const server = (config: Pick<ServerConfig, "host" | "port">) =>
  NodeHttpServer.layer(createServer, { port: config.port, host: config.host })

/** Everything: services and the server. */
export const layer = (config: ServerConfig, apiKey: Redacted.Redacted<string>) =>
  MediagateHttp.serve.pipe(
    Layer.provide(services(config, [{ id: "acct_default", name: "default", apiKey }])),
    Layer.provide(server(config))
  )
