/**
 * The mediagate HTTP app, ready to serve on its own server or inside a host's.
 */
import type { HttpApi, HttpApp } from "@effect/platform"
import { HttpApiBuilder, HttpRouter, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import type { Accounts, MediaStore, ModelCatalog, TaskService } from "@mediagate/core"
import { Api } from "@mediagate/core"
import { Effect, Layer, ManagedRuntime } from "effect"
import type * as Http from "node:http"
import * as Auth from "./Auth.js"
import * as Envelope from "./Envelope.js"
import * as Handlers from "./Handlers.js"
import * as Routes from "./Routes.js"

/** What the HTTP layer needs from the host's composition. */
export type Requirements = TaskService | Accounts.Accounts | MediaStore.MediaStore | ModelCatalog.ModelCatalog

/** The API with its handlers, auth and extra routes. */
export const layer: Layer.Layer<HttpApi.Api, never, Requirements> = HttpApiBuilder.api(Api.MediagateApi).pipe(
  Layer.provide([Handlers.layer, Handlers.catalogLayer]),
  Layer.provide(Auth.layer),
  Layer.merge(Routes.layer)
)

/** The HttpApp of the API, for hosts that route requests to it themselves. */
export const httpApp: Effect.Effect<
  HttpApp.Default<never, Accounts.Accounts | HttpRouter.HttpRouter.DefaultServices>,
  never,
  HttpApi.Api | HttpApiBuilder.Router | HttpApiBuilder.Middleware
> = Effect.map(HttpApiBuilder.httpApp, Envelope.middleware)

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
