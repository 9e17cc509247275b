/**
 * Compressed answers, and the static pages cached by the browser. An answer whose body is
 * in memory, of a textual type (JSON, HTML, text, JavaScript) and at least `minBytes` long is
 * sent with Brotli or gzip when the request's Accept-Encoding takes one (q-values honoured,
 * `negotiator`), with `Vary: Accept-Encoding` whether or not it was compressed. Streamed
 * answers are never touched: events streams (each event must reach the client as it is
 * written) and result files (ranges are byte offsets of the file as stored).
 *
 * The static pages (`/docs`, `/playground`, `/console`, `/openapi.json`) are the same bytes for every
 * request: each gets an ETag (a digest of its bytes), `Cache-Control: public,
 * max-age=86400`, 304 to an If-None-Match that names it, and is compressed once per
 * encoding, the compressed bytes kept with the page (the docs page is 3.3 MB: 0.8 MB
 * compressed, in about a quarter of a second, off the event loop).
 */
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect } from "effect"
import Negotiator from "negotiator"
import { createHash } from "node:crypto"
import { promisify } from "node:util"
import * as Zlib from "node:zlib"
import { consolePath, docsPath, playgroundPath, publicOpenApiPath } from "./Paths.js"

/** Bodies shorter than this are sent as they are: compressing them saves less than it costs. */
export const minBytes = 1024

/** The paths whose answers are the same bytes for every request (per public URL, for the document). */
export const staticPaths: ReadonlySet<string> = new Set([docsPath, playgroundPath, consolePath, publicOpenApiPath])

/** How long a browser or a CDN may keep a static page without asking again. */
export const staticCacheControl = "public, max-age=86400"

type Encoding = "br" | "gzip"

/** The encodings offered, best first: the one the client weighs highest wins, Brotli on a tie. */
const offered: Array<Encoding> = ["br", "gzip"]

const brotli = promisify(Zlib.brotliCompress)
const gzip = promisify(Zlib.gzip)

/**
 * Compresses on libuv's thread pool. Brotli at quality 6 for a static page (compressed once),
 * 4 for an answer made per request; gzip at its default level.
 */
const compress = (bytes: Uint8Array, encoding: Encoding, once: boolean): Promise<Uint8Array> =>
  encoding === "br"
    ? brotli(bytes, {
      params: { [Zlib.constants.BROTLI_PARAM_QUALITY]: once ? 6 : 4, [Zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length }
    })
    : gzip(bytes)

const textual = /^\s*(?:application\/(?:[\w.+-]+\+)?json|application\/(?:javascript|xml)|text\/(?!event-stream)[\w.+-]+)\s*(?:;|$)/i

/** A static page's bytes: their tag, and each encoding, made on first use and kept. */
interface Static {
  readonly etag: string
  readonly encoded: Map<Encoding, Promise<Uint8Array>>
}

/** Keyed by the body itself: a static page's answer is made once, so its bytes are the same object every time. */
const statics = new WeakMap<Uint8Array, Static>()

const staticOf = (bytes: Uint8Array): Static => {
  const known = statics.get(bytes)
  if (known !== undefined) return known
  const made: Static = { etag: `W/"${createHash("sha256").update(bytes).digest("base64url").slice(0, 27)}"`, encoded: new Map() }
  statics.set(bytes, made)
  return made
}

const encodedOnce = (page: Static, bytes: Uint8Array, encoding: Encoding): Promise<Uint8Array> => {
  const known = page.encoded.get(encoding)
  if (known !== undefined) return known
  const made = compress(bytes, encoding, true)
  page.encoded.set(encoding, made)
  return made
}

/** Whether an If-None-Match header names `etag`, compared weakly (RFC 9110 13.1.2). */
const namesEtag = (header: string | undefined, etag: string) => {
  const opaque = etag.replace(/^W\//, "")
  return header !== undefined && header.split(",").some((tag) => tag.trim() === "*" || tag.trim().replace(/^W\//, "") === opaque)
}

/** The encoding the request takes best of those offered, if any. */
const negotiated = (request: HttpServerRequest.HttpServerRequest): Encoding | undefined => {
  const header = request.headers["accept-encoding"]
  if (header === undefined) return undefined
  // negotiator 1's second argument (ours on a tie of q-values) is newer than its types.
  const negotiator = new Negotiator({ headers: { "accept-encoding": header } }) as unknown as {
    encoding(available: ReadonlyArray<string>, options: { readonly preferred: ReadonlyArray<string> }): string | undefined
  }
  const chosen = negotiator.encoding(offered, { preferred: offered })
  return chosen === "br" || chosen === "gzip" ? chosen : undefined
}

const withVary = (headers: Readonly<Record<string, string>>) => {
  const vary = headers["vary"]
  return vary === undefined ? "Accept-Encoding" : /\baccept-encoding\b/i.test(vary) ? vary : `${vary}, Accept-Encoding`
}

const encodedAs = (response: HttpServerResponse.HttpServerResponse, bytes: Uint8Array, encoding: Encoding, contentType: string) =>
  HttpServerResponse.setBody(response, HttpBody.uint8Array(bytes, contentType)).pipe(
    HttpServerResponse.setHeader("content-encoding", encoding)
  )

/**
 * `response` as the request should get it: compressed where it takes an encoding; for a
 * static page with its ETag and cache lifetime, or 304 when the client holds it already.
 */
export const negotiate = (
  request: HttpServerRequest.HttpServerRequest,
  response: HttpServerResponse.HttpServerResponse
): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  Effect.suspend(() => {
    const body = response.body
    if (body._tag !== "Uint8Array" || response.headers["content-encoding"] !== undefined || !textual.test(body.contentType)) {
      return Effect.succeed(response)
    }
    const path = request.url.split("?")[0] ?? ""
    const isStatic = response.status === 200 && (request.method === "GET" || request.method === "HEAD") && staticPaths.has(path)
    if (!isStatic && body.body.length < minBytes) return Effect.succeed(response)
    const varied = HttpServerResponse.setHeader(response, "vary", withVary(response.headers))
    const encoding = negotiated(request)
    if (!isStatic) {
      return encoding === undefined
        ? Effect.succeed(varied)
        : Effect.map(Effect.promise(() => compress(body.body, encoding, false)), (bytes) => encodedAs(varied, bytes, encoding, body.contentType))
    }
    const page = staticOf(body.body)
    const cached = HttpServerResponse.setHeaders(varied, { etag: page.etag, "cache-control": staticCacheControl })
    if (namesEtag(request.headers["if-none-match"], page.etag)) {
      return Effect.succeed(HttpServerResponse.empty({ status: 304, headers: cached.headers }))
    }
    return encoding === undefined || body.body.length < minBytes
      ? Effect.succeed(cached)
      : Effect.map(Effect.promise(() => encodedOnce(page, body.body, encoding)), (bytes) => encodedAs(cached, bytes, encoding, body.contentType))
  })
