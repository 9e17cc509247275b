/**
 * Routes beside the API endpoints: the OpenAPI document (and its public copy), the hosted
 * result files, provider webhooks, the 405 for the one wrong method the router would
 * otherwise take for a task id, and the public landing answer, docs page and health checks.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Accounts, AdminKeys, Files, MediaStore, TaskService } from "@mediagate/core"
import { Context, Effect, Layer, Option, Stream } from "effect"
import { authenticate } from "./Auth.js"
import { envelope, methodNotAllowed, notFound, requestPath } from "./EnvelopeMiddleware.js"
import * as Docs from "./Docs.js"
import * as Console from "./Console.js"
import * as Playground from "./Playground.js"
import * as Health from "./Health.js"
import * as Prometheus from "./Prometheus.js"
import * as RequestTimeouts from "./RequestTimeouts.js"
import { allowedMethods, mediaPrefix, openApiPath, publicOpenApiPath, webhookPrefix } from "./Paths.js"

export { docsPath, healthPath, landingPath, mediaPrefix, openApiPath, playgroundPath, publicOpenApiPath, readyPath, webhookPrefix } from "./Paths.js"

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
const document = Docs.openApiDocument

/**
 * The answers of the document by base URL, made once each: the same bytes every time, so
 * that `Compression` compresses each once and its ETag holds. At most `maxDocuments` are
 * kept (origins come from the Host header, which the client chooses); past that the oldest goes.
 */
const documents = new Map<string, HttpServerResponse.HttpServerResponse>()
const maxDocuments = 16

const documentFor = (url: string): HttpServerResponse.HttpServerResponse => {
  const known = documents.get(url)
  if (known !== undefined) return known
  const made = HttpServerResponse.unsafeJson({ ...document, servers: [{ url }] })
  if (documents.size >= maxDocuments) documents.delete(documents.keys().next().value!)
  documents.set(url, made)
  return made
}

/** The OpenAPI document with `servers` naming the public URL, else the request's origin. */
const servedDocument = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const url = Option.getOrElse(yield* PublicUrl, () => requestOrigin(request))
  return documentFor(url)
})

/**
 * The OpenAPI document of the API: under /api/v1/, where it asks for the key like every path
 * there, and its public copy at `/openapi.json` for code generators and docs viewers.
 */
export const openApi = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const keys = yield* Effect.context<Accounts.Accounts | AdminKeys.AdminKeys>()
    yield* router.get(openApiPath, Effect.zipRight(authenticate, servedDocument).pipe(Effect.provide(keys)))
    yield* router.get(publicOpenApiPath, servedDocument)
  })
)

/**
 * GET on the submit and estimate paths would reach the query endpoint as the task "submit"
 * (or "estimate"): a route of their own answers 405 instead (401 first without a key, as
 * everywhere under /api/v1/).
 */
export const submitMethods = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const keys = yield* Effect.context<Accounts.Accounts | AdminKeys.AdminKeys>()
    const refused = Effect.gen(function*() {
      yield* authenticate
      const request = yield* HttpServerRequest.HttpServerRequest
      return methodNotAllowed(request.method, allowedMethods(requestPath(request)))
    }).pipe(Effect.provide(keys))
    yield* router.get("/api/v1/task/submit", refused)
    yield* router.get("/api/v1/task/estimate", refused)
  })
)

/** The part of a file a request asks for. */
type Wanted =
  | { readonly _tag: "Whole" }
  | { readonly _tag: "Part"; readonly range: MediaStore.ByteRange }
  | { readonly _tag: "Unsatisfiable" }

const whole: Wanted = { _tag: "Whole" }

/**
 * What a Range header asks of a file of `size` bytes (RFC 9110 14.2): `bytes=a-b`, `bytes=a-`
 * or `bytes=-n`. A header that is not one such range is ignored, as the RFC allows; that
 * includes several ranges at once, answered with the whole file (200) rather than a
 * multipart body, which players do not need.
 */
const wantedPart = (header: string | undefined, size: number): Wanted => {
  const match = header === undefined ? null : /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header)
  if (match === null) return whole
  const [, first = "", last = ""] = match
  if (first === "") {
    if (last === "") return whole
    const length = Number(last)
    return length === 0 || size === 0
      ? { _tag: "Unsatisfiable" }
      : { _tag: "Part", range: { start: Math.max(0, size - length), end: size - 1 } }
  }
  const start = Number(first)
  if (last !== "" && Number(last) < start) return whole
  if (start >= size) return { _tag: "Unsatisfiable" }
  return { _tag: "Part", range: { start, end: last === "" ? size - 1 : Math.min(Number(last), size - 1) } }
}

/** Whether an If-None-Match header names `etag` (weak comparison, as RFC 9110 13.1.2 asks). */
const namesEtag = (header: string | undefined, etag: string) =>
  header !== undefined && header.split(",").some((tag) => tag.trim() === "*" || tag.trim().replace(/^W\//, "") === etag)

/** The message of a media file whose store could not be read. */
export const mediaUnavailable = "media storage is unavailable; try again later"

/**
 * Result files from the MediaStore, public like a CDN: their keys are unguessable, and named
 * by content, so an answer never goes stale and is cached for a year. GET and HEAD (the
 * router answers HEAD with the GET route, without the body); byte ranges for players.
 * A failing store is logged with the key and answers 503 with Retry-After; the client never
 * sees why. An upload past its expiry and the deadlines of the tasks that use it
 * (`Files.expiredMedia`, where the composition has uploads) is 404, whether or not the sweep
 * has deleted its file yet.
 */
export const media = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    const store = yield* MediaStore.MediaStore
    const files = yield* Effect.serviceOption(Files.Files)
    yield* router.get(
      `${mediaPrefix}/:key`,
      Effect.gen(function*() {
        const { key = "" } = yield* HttpRouter.params
        const request = yield* HttpServerRequest.HttpServerRequest
        const found = yield* store.stat(key)
        if (Option.isNone(found)) return notFound(`${mediaPrefix}/${key}`)
        if (Option.isSome(files) && (yield* files.value.expiredMedia(key))) return notFound(`${mediaPrefix}/${key}`)
        const { contentType, hash, size } = found.value
        const etag = `"${hash}"`
        const headers = { etag, "cache-control": "public, max-age=31536000, immutable", "accept-ranges": "bytes" }
        if (namesEtag(request.headers["if-none-match"], etag)) return HttpServerResponse.empty({ status: 304, headers })
        if (store.redirect !== undefined) {
          // The store serves the bytes (and the ranges) itself at an address that expires: the
          // redirect is cached for less than that, the file's own answer for a year as ever.
          const target = yield* store.redirect(key)
          return HttpServerResponse.empty({
            status: 302,
            headers: { location: target.url, "cache-control": `public, max-age=${target.maxAge}` }
          })
        }
        // If-Range names the version a client holds a part of: with a date or another tag, the whole file (RFC 9110 13.1.5).
        const ifRange = request.headers["if-range"]
        const wanted = ifRange === undefined || ifRange.trim() === etag ? wantedPart(request.headers["range"], size) : whole
        if (wanted._tag === "Unsatisfiable") {
          return envelope(416, "range not satisfiable", undefined, { "content-range": `bytes */${size}`, "accept-ranges": "bytes" })
        }
        const range = wanted._tag === "Part" ? wanted.range : undefined
        const body = store.stream(key, range).pipe(
          // The headers are sent by then: the client sees a cut answer, the log says why.
          Stream.tapError((error) => Effect.logWarning("mediagate: a media file failed while being sent", error).pipe(Effect.annotateLogs({ key })))
        )
        return HttpServerResponse.stream(body, {
          status: range === undefined ? 200 : 206,
          contentType,
          headers: {
            ...headers,
            "content-length": String(range === undefined ? size : range.end - range.start + 1),
            ...(range === undefined ? {} : { "content-range": `bytes ${range.start}-${range.end}/${size}` })
          }
        })
      }).pipe(
        Effect.catchTag("MediaError", (error) =>
          Effect.gen(function*() {
            const { key = "" } = yield* HttpRouter.params
            yield* Effect.logWarning("mediagate: the media store failed; answered 503", error).pipe(Effect.annotateLogs({ key }))
            // Most likely the bucket or the disk is away for a while: a client, a player or a
            // CDN in front tries again (503 is not cached), and the answer never says why.
            return envelope(503, mediaUnavailable, undefined, { "retry-after": "5" })
          }))
      )
    )
  })
)

/**
 * Provider webhooks (`<WebhookPrefix>/{provider}/{token}`, outside /api/v1/: providers have no key
 * of ours). The upstream checks the provider's signature; a genuine one wakes the task,
 * which is then polled at once. 401 for a signature that does not check out (or a provider
 * that sends none), 408 for a body that does not arrive within its deadline
 * (`RequestTimeouts`), 200 otherwise, in the envelope.
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
        const body = new Uint8Array(yield* RequestTimeouts.readRequestBody(request, request.arrayBuffer, RequestTimeouts.bodyTooSlow))
        const accepted = yield* tasks.receiveWebhook({ provider, token, headers: request.headers, body })
        return accepted ? envelope(0, "ok") : envelope(401, "the webhook's signature is not valid")
      })
    )
  })
)

/** The extra routes, with the public ones: landing answer, docs page, playground, liveness and readiness, and metrics when enabled. */
export const layer: Layer.Layer<never, never, Accounts.Accounts | AdminKeys.AdminKeys | MediaStore.MediaStore | TaskService> = Layer.mergeAll(
  openApi,
  submitMethods,
  media,
  webhooks,
  Docs.layer,
  Playground.route,
  Console.route,
  Health.routes,
  Prometheus.routes
)
