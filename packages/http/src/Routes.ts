/**
 * Routes beside the API endpoints: the OpenAPI document and the hosted result files.
 */
import { HttpApiBuilder, HttpRouter, HttpServerRequest, HttpServerResponse, OpenApi } from "@effect/platform"
import { Accounts, Api, MediaStore } from "@mediagate/core"
import { Effect, Layer, Option } from "effect"
import { authenticateRequest } from "./Auth.js"
import { envelope } from "./Envelope.js"

/** Path of the OpenAPI document. */
export const openApiPath = "/api/v1/openapi.json"

/** Path prefix result files are served under. */
export const mediaPrefix = "/media"

/** The OpenAPI document of the API (under /api/v1/, so it asks for the key like every path there). */
export const openApi = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts.Accounts
    const document = OpenApi.fromApi(Api.MediagateApi)
    yield* router.get(
      openApiPath,
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const account = yield* authenticateRequest(request).pipe(Effect.provideService(Accounts.Accounts, accounts))
        return Option.isNone(account) ? envelope(401, "unauthorized") : yield* HttpServerResponse.json(document)
      })
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

/** Both extra routes. */
export const layer: Layer.Layer<never, never, Accounts.Accounts | MediaStore.MediaStore> = Layer.mergeAll(
  openApi,
  media
)
