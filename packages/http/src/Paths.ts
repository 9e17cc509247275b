/**
 * Every path the server answers and the methods each takes, from the API definition plus
 * the extra routes, so a wrong method on a known path is 405 with `Allow` rather than 404.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import { Api } from "@mediagate/core"

/** Prefix every API path lives under. */
export const apiPrefix = "/api/v1/"

/** Path of the OpenAPI document. */
export const openApiPath = "/api/v1/openapi.json"

/** Public copy of the OpenAPI document, outside /api/v1/ so code generators and viewers need no key. */
export const publicOpenApiPath = "/openapi.json"

/** The human API reference (no key). */
export const docsPath = "/docs"

/** The playground: a form per model that submits, follows and shows a task with a pasted key (no key to load it). */
export const playgroundPath = "/playground"

/** The operator's console: a page on the admin API, signed in with an admin key (no key to load it). */
export const consolePath = "/console"

/** The landing answer: name, version and links (no key). */
export const landingPath = "/"

/** Liveness: 200 while the process serves (no key). */
export const healthPath = "/healthz"

/** Readiness: 200 when the store, its migrations and the engine are ready, 503 otherwise (no key). */
export const readyPath = "/readyz"

/** Prometheus metrics, when the host turns them on (`Prometheus.Enabled`; no key). */
export const metricsPath = "/metrics"

/** Path prefix result files are served under. */
export const mediaPrefix = "/media"

/** Default path prefix provider webhooks arrive under: `/webhooks/{provider}/{token}` (`Routes.WebhookPrefix`). */
export const webhookPrefix = "/webhooks"

interface KnownPath {
  readonly pattern: RegExp
  readonly static: boolean
  readonly method: string
}

const known = (path: string, method: string): KnownPath => ({
  pattern: new RegExp(`^${path.split("/").map((part) => (part.startsWith(":") ? "[^/]+" : part.replace(/[.]/g, "\\."))).join("/")}$`),
  static: !path.includes(":"),
  method
})

const knownPaths: ReadonlyArray<KnownPath> = (() => {
  const paths: Array<KnownPath> = [
    ...[openApiPath, publicOpenApiPath, docsPath, playgroundPath, consolePath, landingPath, healthPath, readyPath].map((path) => known(path, "GET")),
    known(`${mediaPrefix}/:key`, "GET")
  ]
  HttpApi.reflect(Api.MediagateApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => void paths.push(known(endpoint.path, endpoint.method))
  })
  return paths
})()

/**
 * The methods `path` takes, or none when no route has that path. A fixed path wins over a
 * pattern (`/api/v1/task/submit` is not the task `submit`).
 */
export const allowedMethods = (path: string): ReadonlyArray<string> => {
  const matching = knownPaths.filter((route) => route.pattern.test(path))
  const fixed = matching.filter((route) => route.static)
  return [...new Set((fixed.length > 0 ? fixed : matching).map((route) => route.method))].sort()
}

/** Whether `path` is under /api/v1/, where every answer needs the key. */
export const isApiPath = (path: string): boolean => path.startsWith(apiPrefix) || path === apiPrefix.slice(0, -1)

/** Prefix of the admin API's paths, which only an admin key opens (`AdminAuthentication`). */
export const adminPrefix = "/api/v1/admin/"

/** Whether `path` is under /api/v1/admin/, where every answer needs an admin key. */
export const isAdminPath = (path: string): boolean => path.startsWith(adminPrefix) || path === adminPrefix.slice(0, -1)

/**
 * The message of a 404: it names the path it saw, so a host that mounted mediagate under a
 * prefix it strips (Express's `app.use(path, ...)`) sees which path arrived. Cut to 200 characters.
 */
export const notFoundMessage = (path: string): string => `not found: ${path.length > 200 ? `${path.slice(0, 200)}...` : path}`
