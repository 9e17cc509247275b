/**
 * What a person or a tool finds without a key: the landing answer at `/` and the human API
 * reference at `/docs`. The reference is Scalar's, with its bundle inlined in the page by
 * `@effect/platform`'s `HttpApiScalar.layer` (not its CDN variant), so it works with no
 * network beyond this server; Scalar's default web fonts are turned off for the same reason.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApiScalar from "@effect/platform/HttpApiScalar"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import { Api } from "@mediagate/core"
import { Context, Effect, Layer } from "effect"
import { apiPrefix, consolePath, docsPath, healthPath, landingPath, playgroundPath, publicOpenApiPath, readyPath } from "./Paths.js"

/** Version of `@mediagate/http` (test/health.test.ts checks it against the package's manifest). */
export const version = "0.1.0"

/**
 * The API definition as the OpenAPI document and the docs page describe it: with this version
 * in `info`. Not exported: its type names every group of the API, some of which a declaration
 * file outside core cannot name (TS2742 in `npm run build`); what leaves this module is the
 * document, and the page's layer.
 */
const documentedApi = Api.MediagateApi.annotate(OpenApi.Version, version)

/** The OpenAPI document of the API, without `servers` (the route adds them per request). */
export const openApiDocument: OpenApi.OpenAPISpec = OpenApi.fromApi(documentedApi)

/** The landing answer's body. */
export const landing = {
  name: "mediagate",
  version,
  links: {
    docs: docsPath,
    playground: playgroundPath,
    console: consolePath,
    openapi: publicOpenApiPath,
    api: apiPrefix,
    models: `${apiPrefix}models`,
    health: healthPath,
    ready: readyPath
  }
} as const

/** `GET /`: what this server is and where to go next. */
export const landingRoute: Layer.Layer<never> = HttpApiBuilder.Router.use((router) =>
  router.get(landingPath, Effect.succeed(HttpServerResponse.unsafeJson(landing)))
)

/** The API as `HttpApiScalar` reads it, without the handlers (the page only needs the definition). */
const definition = Layer.succeed(HttpApi.Api, {
  api: documentedApi as unknown as Context.Tag.Service<HttpApi.Api>["api"],
  context: Context.empty()
})

/**
 * Scalar's settings: no web fonts (they come from fonts.scalar.com), no developer toolbar
 * (shown on localhost by default; its Share and SDK menus lead to scalar.com).
 */
const scalar: HttpApiScalar.ScalarConfig & { readonly showToolbar: "never" } = {
  withDefaultFonts: false,
  defaultOpenAllTags: true,
  showToolbar: "never"
}

/**
 * `GET /docs`: the API reference, every asset inlined. Scalar's bundle is 3.4 MB of
 * JavaScript in one string: it is imported when this layer is built, so that a program that
 * serves no docs page (the admin CLI, the client CLI) does not load it (about a fifth of the
 * admin CLI's start).
 */
export const docsRoute: Layer.Layer<never> = Layer.unwrapEffect(
  Effect.promise(() => import("@effect/platform/HttpApiScalar")).pipe(
    Effect.map((HttpApiScalar) => HttpApiScalar.layer({ path: docsPath, scalar }))
  )
).pipe(Layer.provide(definition))

/** The landing answer and the docs page. */
export const layer: Layer.Layer<never> = Layer.mergeAll(landingRoute, docsRoute)
