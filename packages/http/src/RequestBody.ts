/**
 * A request's body, read whole (a JSON body: at most 1 MiB kept). The bytes are taken from
 * what the request came as: node:http's `IncomingMessage` (the standalone server, an
 * embedding in node:http, Express or Fastify) or a web `Request` (an embedding on `fetch`),
 * each by its own events in one asynchronous step. Effect's `Stream` over the same body did
 * the same work in about a thousand runtime steps a request, most of a submit's cost in the
 * pipeline (issue 37, docs/benchmarks.md "Issue 37: request bodies, spans and loop waits"). A request of any other
 * origin is read through its `stream`.
 *
 * Past `keepBytes` the bytes are counted and dropped, so that the client can be answered
 * (413) once it has sent its body; past `drainBytes` the reading stops and the request is
 * destroyed, which resets the connection.
 */
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Stream } from "effect"
import type { Readable } from "node:stream"

/** How much of a body is kept, and how much is read at most. */
export interface Limits {
  readonly keepBytes: number
  readonly drainBytes: number
}

/** A body read: its size, and its bytes when it is at most `keepBytes` long. */
export interface Body {
  readonly size: number
  readonly bytes: Uint8Array
}

/** The body could not be read: the client went away, or its stream failed. */
export class Unreadable {
  readonly _tag = "Unreadable"
}

/** The chunks kept and the bytes counted so far. */
class Collected {
  size = 0
  readonly kept: Array<Uint8Array> = []
  constructor(readonly limits: Limits) {}
  /** Takes a chunk; false once past `drainBytes` (read no further). */
  add(chunk: Uint8Array): boolean {
    this.size += chunk.length
    if (this.size <= this.limits.keepBytes) this.kept.push(chunk)
    return this.size <= this.limits.drainBytes
  }
  body(): Body {
    if (this.size > this.limits.keepBytes) return { size: this.size, bytes: new Uint8Array(0) }
    const bytes = this.kept.length === 1 ? this.kept[0]! : new Uint8Array(this.size)
    if (this.kept.length !== 1) this.kept.reduce((offset, chunk) => (bytes.set(chunk, offset), offset + chunk.length), 0)
    return { size: this.size, bytes }
  }
}

const isReadable = (source: unknown): source is Readable =>
  typeof source === "object" && source !== null && typeof (source as Readable).on === "function" &&
  typeof (source as Readable).readableEnded === "boolean"

/** node:http's request, by its `data`, `end` and `close` events. */
const fromReadable = (source: Readable, limits: Limits) =>
  Effect.async<Body, Unreadable>((resume) => {
    const collected = new Collected(limits)
    if (source.readableEnded) return resume(Effect.succeed(collected.body()))
    let settled = false
    const settle = (outcome: Effect.Effect<Body, Unreadable>) => {
      if (settled) return
      settled = true
      source.off("data", onData).off("end", onEnd).off("error", onFailure).off("close", onFailure)
      resume(outcome)
    }
    const onData = (chunk: Uint8Array) => {
      if (collected.add(chunk)) return
      settle(Effect.succeed(collected.body()))
      source.destroy()
    }
    const onEnd = () => settle(Effect.succeed(collected.body()))
    // `close` before `end`: the client went away with the body unsent.
    const onFailure = () => settle(Effect.fail(new Unreadable()))
    source.on("data", onData).on("end", onEnd).on("error", onFailure).on("close", onFailure)
  })

/** A web `Request`'s body, by its reader. */
const fromWeb = (source: Request, limits: Limits) =>
  Effect.async<Body, Unreadable>((resume) => {
    const collected = new Collected(limits)
    const body = source.body
    if (body === null) return resume(Effect.succeed(collected.body()))
    const reader = body.getReader()
    const next = (): Promise<Body> =>
      reader.read().then(({ done, value }) => {
        if (done) return collected.body()
        if (collected.add(value)) return next()
        return reader.cancel().then(() => collected.body(), () => collected.body())
      })
    next().then((read) => resume(Effect.succeed(read)), () => resume(Effect.fail(new Unreadable())))
  })

/** Any other request, through its `stream`. */
const fromStream = (request: HttpServerRequest.HttpServerRequest, limits: Limits) =>
  Effect.suspend(() => {
    const collected = new Collected(limits)
    let more = true
    return request.stream.pipe(
      Stream.takeWhile(() => more),
      Stream.runForEach((chunk) => Effect.sync(() => void (more = collected.add(chunk)))),
      Effect.mapError(() => new Unreadable()),
      Effect.map(() => collected.body())
    )
  })

/**
 * Whether the whole of `request`'s body is already in this process: read to its end, or its
 * `Content-Length` bytes all in node:http's buffer (most JSON bodies come in the packet of
 * their headers), or the message parsed whole (`complete`); and nothing holds the stream
 * paused. Such a body is read within the next turns of the event loop whatever the client
 * does, so it needs no deadline (`RequestTimeouts.readRequestBody`: a body's deadline is a race
 * of two fibers, a quarter of a submit's runtime steps). A web `Request` or another origin does not say, and
 * is taken as still arriving.
 */
export const arrived = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const source = request.source
  if (!isReadable(source)) return false
  if (source.readableEnded) return true
  if (source.readableFlowing === false) return false
  const length = Number(request.headers["content-length"])
  return (source as Readable & { readonly complete?: boolean }).complete === true ||
    (request.headers["content-length"] !== undefined && Number.isSafeInteger(length) && source.readableLength >= length)
}

/** Reads `request`'s body within `limits`. */
export const read = (request: HttpServerRequest.HttpServerRequest, limits: Limits): Effect.Effect<Body, Unreadable> =>
  isReadable(request.source)
    ? fromReadable(request.source, limits)
    : typeof Request === "function" && request.source instanceof Request
    ? fromWeb(request.source, limits)
    : fromStream(request, limits)
