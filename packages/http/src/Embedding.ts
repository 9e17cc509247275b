/**
 * What a host server needs to hand requests to mediagate: which paths are mediagate's, and
 * the small differences between hosts. Express strips its mount path from `req.url` and its
 * body parsers read the body before mediagate sees it; Fastify parses bodies by content
 * type and answers on its own `reply`; runtimes on `fetch` (Hono, Next.js route handlers,
 * Bun, Deno) speak `Request` and `Response`. None of these frameworks is imported here:
 * the adapters are typed by the few members they use.
 */
import type * as Http from "node:http"
import { Readable } from "node:stream"

/**
 * The paths mediagate answers in a host, by default: a pattern ending in `/*` takes every
 * path under it, any other pattern exactly that path. The landing answer at `/` is left to
 * the host. `/metrics` answers only when the host turns metrics on (`Prometheus.Enabled`).
 */
export const defaultPaths: ReadonlyArray<string> = [
  "/api/v1/*",
  "/media/*",
  "/webhooks/*",
  "/docs",
  "/playground",
  "/console",
  "/openapi.json",
  "/healthz",
  "/readyz",
  "/metrics"
]

/** Whether a request path (without its query) is one of `paths`. */
export const owns = (paths: ReadonlyArray<string>) => {
  const exact = new Set(paths.filter((pattern) => !pattern.endsWith("/*")))
  const prefixes = paths.filter((pattern) => pattern.endsWith("/*")).map((pattern) => pattern.slice(0, -1))
  return (path: string): boolean => {
    const bare = path.split("?")[0] ?? ""
    return exact.has(bare) || prefixes.some((prefix) => bare.startsWith(prefix) || bare === prefix.slice(0, -1))
  }
}

/** The members a framework adds to Node's request that matter here. */
export interface HostRequest extends Http.IncomingMessage {
  /** Express: the URL before the mount path was taken off `url`. */
  readonly originalUrl?: string
  /** A body the host's parser already read (`express.json()`, `express.text()`, `express.raw()`). */
  readonly body?: unknown
  /** The exact bytes of a body the host read, where it keeps them (a common convention of raw-body plugins). */
  readonly rawBody?: unknown
}

const bodyMethods = new Set(["POST", "PUT", "PATCH", "DELETE"])

/** Why a body is missing, in the answer a client sees. */
export const consumedBodyMessage =
  "the request body was read by the host server before mediagate saw it (a body parser such as express.json() or " +
  "Fastify's content-type parsing ran first); hand mediagate's paths to it before the body parser, or leave the parsed body on request.body"

/**
 * The bytes of a body the host already read, as it left them: `rawBody` when it kept the
 * exact bytes; else `body`, a Buffer or string as it is, and anything else re-encoded as
 * JSON (what `express.json()` parsed). None when the host left no body.
 */
const hostBody = (request: HostRequest): Uint8Array | undefined => {
  const raw = request.rawBody ?? request.body
  if (raw === undefined) return undefined
  if (raw instanceof Uint8Array) return raw
  if (typeof raw === "string") return Buffer.from(raw, "utf8")
  return Buffer.from(JSON.stringify(raw), "utf8")
}

/**
 * The request as mediagate should see it: the full URL where the host mounted mediagate
 * under a path, and the body replayed from what the host's parser left when the host read
 * it first. `Consumed` when the host read the body and left nothing to replay.
 */
export const prepare = (request: HostRequest): Http.IncomingMessage | "Consumed" => {
  if (typeof request.originalUrl === "string" && request.originalUrl !== request.url) request.url = request.originalUrl
  // Nothing read it yet: mediagate reads the body itself, with its own limits.
  if (!request.readableEnded || !bodyMethods.has(request.method ?? "")) return request
  const bytes = request.headers["content-length"] === "0" ? new Uint8Array(0) : hostBody(request)
  if (bytes === undefined) return "Consumed"
  const replay = Readable.from([bytes], { objectMode: false })
  return Object.assign(replay, {
    url: request.url,
    method: request.method,
    headers: { ...request.headers, "content-length": String(bytes.length), "transfer-encoding": undefined },
    rawHeaders: request.rawHeaders,
    httpVersion: request.httpVersion,
    socket: request.socket,
    connection: request.socket
  }) as unknown as Http.IncomingMessage
}

/** Answers a request whose body the host read and left nothing of: 400 naming the likely cause. */
export const answerConsumed = (response: Http.ServerResponse) => {
  const body = JSON.stringify({ code: 400, msg: consumedBodyMessage })
  response.writeHead(400, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
  response.end(body)
}

/** An Express (4 or 5) middleware: `app.use(api.express)`. */
export type ExpressMiddleware = (request: Http.IncomingMessage, response: Http.ServerResponse, next: (error?: unknown) => void) => void

/** The members of a Fastify instance the plugin uses. */
export interface FastifyScope {
  removeAllContentTypeParsers(): void
  addContentTypeParser(contentType: string, parser: (request: unknown, payload: unknown, done: (error: null) => void) => void): void
  all(path: string, handler: (request: { readonly raw: Http.IncomingMessage }, reply: FastifyReply) => void): unknown
}

/** The members of a Fastify reply the plugin uses. */
export interface FastifyReply {
  readonly raw: Http.ServerResponse
  hijack(): unknown
}

/** A Fastify plugin: `app.register(api.fastify)`. */
export type FastifyPlugin = (instance: FastifyScope, options: unknown, done: (error?: Error) => void) => void

/** The adapters over a `node:http` listener. */
export const adapters = (
  listener: (request: Http.IncomingMessage, response: Http.ServerResponse) => void,
  paths: ReadonlyArray<string>
) => {
  const isOwned = owns(paths)
  const express: ExpressMiddleware = (request, response, next) => {
    const url = (request as HostRequest).originalUrl ?? request.url ?? "/"
    return isOwned(url) ? listener(request, response) : next()
  }
  // In its own (encapsulated) scope: bodies reach mediagate unread, whatever content type the
  // host's other routes parse, and Fastify answers nothing itself (`hijack`).
  const fastify: FastifyPlugin = (instance, _options, done) => {
    instance.removeAllContentTypeParsers()
    instance.addContentTypeParser("*", (_request, _payload, parsed) => parsed(null))
    for (const path of paths) {
      instance.all(path, (request, reply) => {
        reply.hijack()
        listener(request.raw, reply.raw)
      })
    }
    done()
  }
  return { owns: isOwned, express, fastify }
}
