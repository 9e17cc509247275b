/**
 * Routes beside the API endpoints: the OpenAPI document, the hosted result files, and the
 * 405 for the one wrong method the router would otherwise take for a task id.
 */
import { HttpApiBuilder, HttpRouter, HttpServerRequest, HttpServerResponse, OpenApi } from "@effect/platform"
import { Accounts, Api, MediaStore, TaskService } from "@mediagate/core"
import { Context, Effect, Layer, Option } from "effect"
import { authenticate } from "./Auth.js"
import { envelope, methodNotAllowed, requestPath } from "./Envelope.js"
import { allowedMethods, mediaPrefix, openApiPath, webhookPrefix } from "./Paths.js"

export { mediaPrefix, openApiPath, webhookPrefix } from "./Paths.js"

/** The base URL the OpenAPI document names in `servers`; by default the request's own origin. */
export class PublicUrl extends Context.Reference<PublicUrl>()("@mediagate/http/PublicUrl", {
  defaultValue: (): Option.Option<string> => Option.none()
}) {}

/** Where provider webhooks arrive: `<prefix>/{provider}/{token}`; default `/webhooks`. */
export class WebhookPrefix extends Context.Reference<WebhookPrefix>()("@mediagate/http/WebhookPrefix", {
  defaultValue: (): string => webhookPrefix
}) {}

/** The origin a request was sent to, as its Host (and a proxy's X-Forwarded-Proto) name it. */
const requestOrigin = (request: HttpServerRequest.HttpServerRequest): string => {
  const host = request.headers["host"]
  const proto = request.headers["x-forwarded-proto"]?.split(",")[0]?.trim()
  return host === undefined ? "/" : `${proto === "https" ? "https" : "http"}://${host}`
}

/** The OpenAPI document, without `servers`, which the route adds per request. */
const document = OpenApi.fromApi(Api.MediagateApi)

/** The OpenAPI document of the API (under /api/v1/, so it asks for the key like every path there). */
export const openApi = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts.Accounts
    yield* router.get(
      openApiPath,
      Effect.gen(function*() {
        yield* authenticate
        const request = yield* HttpServerRequest.HttpServerRequest
        const url = Option.getOrElse(yield* PublicUrl, () => requestOrigin(request))
        return yield* HttpServerResponse.json({ ...document, servers: [{ url }] })
      }).pipe(Effect.provideService(Accounts.Accounts, accounts))
    )
  })
)

/**
 * GET on the submit path would reach the query endpoint as the task "submit": a route of
 * its own answers 405 instead (401 first without a key, as everywhere under /api/v1/).
 */
export const submitMethods = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts.Accounts
    yield* router.get(
      "/api/v1/task/submit",
      Effect.gen(function*() {
        yield* authenticate
        const request = yield* HttpServerRequest.HttpServerRequest
        return methodNotAllowed(request.method, allowedMethods(requestPath(request)))
      }).pipe(Effect.provideService(Accounts.Accounts, accounts))
    )
  })
)

/** Result files from the MediaStore, public like a CDN: their keys are unguessable. */
export const media = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const store = yield* MediaStore.MediaStore
    yield* router.get(
      `${mediaPrefix}/:key`,
      Effect.gen(function*() {
        const { key } = yield* HttpRouter.params
        const file = key === undefined ? Option.none() : yield* store.get(key).pipe(Effect.orDie)
        return Option.match(file, {
          onNone: () => envelope(404, "not found"),
          onSome: (found) =>
            HttpServerResponse.uint8Array(found.bytes, {
              contentType: found.contentType,
              headers: { "cache-control": "public, max-age=31536000, immutable" }
            })
        })
      })
    )
  })
)

/**
 * Provider webhooks (`<WebhookPrefix>/{provider}/{token}`, outside /api/v1/: providers have no key
 * of ours). The upstream checks the provider's signature; a genuine one wakes the task,
 * which is then polled at once. 401 for a signature that does not check out (or a provider
 * that sends none), 200 otherwise, in the envelope.
 */
export const webhooks = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const tasks = yield* TaskService
    const prefix = (yield* WebhookPrefix).replace(/\/+$/, "") as `/${string}`
    yield* router.post(
      `${prefix}/:provider/:token`,
      Effect.gen(function*() {
        const { provider = "", token = "" } = yield* HttpRouter.params
        const request = yield* HttpServerRequest.HttpServerRequest
        const body = new Uint8Array(yield* request.arrayBuffer)
        const accepted = yield* tasks.receiveWebhook({ provider, token, headers: request.headers, body })
        return accepted ? envelope(0, "ok") : envelope(401, "the webhook's signature is not valid")
      })
    )
  })
)

/** The extra routes. */
export const layer: Layer.Layer<never, never, Accounts.Accounts | MediaStore.MediaStore | TaskService> = Layer.mergeAll(
  openApi,
  submitMethods,
  media,
  webhooks
)
