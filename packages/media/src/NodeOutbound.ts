/**
 * The Outbound service on node:http and node:https. The connection's `lookup` answers the
 * address Outbound.target has already checked, so the name is resolved once and a second
 * answer (DNS rebinding) can never redirect the connection; redirects are answers, and the
 * only headers are the caller's plus host and content-length.
 *
 * Connections are kept open and reused, but only for a request to the same host and port
 * whose own check chose the same address: the pool is keyed by the checked address, so a
 * reused connection goes exactly where a new one would, under the same rules (one pool per
 * Outbound, so per `allowPrivate` setting). A new connection per request cost more than
 * the rest of a callback's delivery, and at about 500 connections a second to one receiver
 * the closed ones (TIME_WAIT) use up the ephemeral ports (docs/benchmarks.md).
 */
import { Outbound, spanned } from "@mediagate/core"
import type { Context, Scope } from "effect"
import { Duration, Effect, Layer } from "effect"
import * as Http from "node:http"
import * as Https from "node:https"
import type { LookupFunction } from "node:net"
import type { Duplex } from "node:stream"

/** Outbound settings. */
export interface Options {
  /** Connect to private, loopback and other non-public addresses (development and tests only). Default false. */
  readonly allowPrivate?: boolean
  /** Idle connections kept open in all, whatever their hosts; beyond it a connection closes once its exchange ends. Default 128. */
  readonly idleConnections?: number
}

/**
 * An idle connection is closed after this long: below the 5 s of node:http servers, so a
 * receiver rarely closes one under us. (A socket timer of node's, not the Effect Clock: it
 * bounds resources and decides nothing about a request.)
 */
const idleMillis = 4_000
/** Addresses with a pool of their own; the least recently used beyond this stops keeping connections. */
const pools = 256

/** The connection closed as we reused it (the receiver had just closed it): worth one more try on a new connection. */
class Stale {
  readonly _tag = "Stale"
  constructor(readonly message: string) {}
}

/**
 * The `lookup` of a connection to a checked target: it answers the checked address whatever
 * name it is asked, so the connection goes where the check looked (SafeFetch uses it too).
 */
export const pinnedLookup = (target: Outbound.Target): LookupFunction => (_hostname, options, callback) =>
  options.all
    ? (callback as (error: null, addresses: Array<{ address: string; family: number }>) => void)(
      null,
      [{ address: target.address, family: target.family }]
    )
    : callback(null, target.address, target.family)

/** A request to a checked target; its answer is handed to `onResponse`, which owns the body. */
const exchange = <A>(
  target: Outbound.Target,
  request: { readonly method: string; readonly headers: Readonly<Record<string, string>>; readonly body?: Uint8Array },
  agent: Http.Agent | false,
  onResponse: (response: Http.IncomingMessage) => Effect.Effect<A, Outbound.OutboundError>
): Effect.Effect<A, Outbound.OutboundError | Stale> =>
  Effect.async<Http.IncomingMessage, Outbound.OutboundError | Stale>((resume) => {
    const client = target.url.protocol === "https:" ? Https : Http
    const outgoing = client.request({
      method: request.method,
      hostname: target.hostname,
      port: target.url.port === "" ? undefined : Number(target.url.port),
      path: `${target.url.pathname}${target.url.search}`,
      headers: request.body === undefined
        ? request.headers
        : { ...request.headers, "content-length": String(request.body.byteLength) },
      lookup: pinnedLookup(target),
      agent
    })
    // node:http adds a `connection` header of its own; HTTP/1.1 needs none, and keeps the connection open without it.
    outgoing.removeHeader("connection")
    outgoing.on("response", (response) => resume(Effect.succeed(response)))
    outgoing.on("error", (error) =>
      resume(
        outgoing.reusedSocket && "code" in error && (error.code === "ECONNRESET" || error.code === "EPIPE")
          ? Effect.fail(new Stale(error.message))
          : Effect.fail(new Outbound.OutboundError({ reason: "Failed", message: `request failed: ${error.message}` }))
      )
    )
    outgoing.end(request.body)
    return Effect.sync(() => outgoing.destroy())
  }).pipe(
    Effect.flatMap((response) =>
      // The body is read to its end (or the response destroyed), so the connection can serve the next request.
      onResponse(response).pipe(Effect.ensuring(Effect.sync(() => response.destroyed || response.resume())))
    )
  )

/** Answer bodies past this size are not read: the connection is closed instead of kept. */
const drainLimit = 64 * 1024

/**
 * Reads an answer's body to its end and drops it, so its connection is free for the next
 * request once the exchange is over; a larger body closes the connection instead.
 */
const drain = (response: Http.IncomingMessage): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    let size = 0
    const done = () => resume(Effect.void)
    response.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > drainLimit) {
        response.destroy()
        done()
      }
    })
    response.on("end", done)
    response.on("error", done)
    response.on("close", done)
  })

/** An Outbound that resolves with the Resolver in context; its kept connections close with the scope. */
export const make = (
  options: Options = {}
): Effect.Effect<Context.Tag.Service<Outbound.Outbound>, never, Outbound.Resolver | Scope.Scope> =>
  Effect.gen(function*() {
    const resolver = yield* Outbound.Resolver
    const allowPrivate = options.allowPrivate ?? false
    // A deliverer calling many hosts never holds more than this many connections open while idle.
    const idleLimit = options.idleConnections ?? 128
    // By protocol and checked address; within an agent, node keys connections by host and port.
    const agents = new Map<string, Http.Agent>()
    // Idle connections of every agent, counted against `idleLimit`.
    const idle = new Set<Duplex>()
    const watched = new WeakSet<Duplex>()
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const agent of agents.values()) agent.destroy()
        agents.clear()
      })
    )
    const retired = new WeakSet<Http.Agent>()
    const retire = (agent: Http.Agent) => {
      // Its requests in flight finish; their connections and its idle ones close.
      retired.add(agent)
      for (const sockets of Object.values(agent.freeSockets)) sockets?.forEach((socket) => socket.destroy())
    }
    const agentFor = (target: Outbound.Target): Http.Agent => {
      const key = `${target.url.protocol}${target.address}`
      const found = agents.get(key)
      if (found !== undefined) {
        agents.delete(key)
        agents.set(key, found)
        return found
      }
      const settings = { keepAlive: true, timeout: idleMillis, maxFreeSockets: idleLimit, scheduling: "lifo" } as const
      const agent: Http.Agent = target.url.protocol === "https:" ? new Https.Agent(settings) : new Http.Agent(settings)
      const keep = agent.keepSocketAlive.bind(agent) as (socket: Duplex) => boolean
      const reuse = agent.reuseSocket.bind(agent)
      Object.assign(agent, {
        keepSocketAlive: (socket: Duplex): boolean => {
          if (retired.has(agent) || idle.size >= idleLimit || !keep(socket)) return false
          idle.add(socket)
          if (!watched.has(socket)) {
            watched.add(socket)
            socket.once("close", () => idle.delete(socket))
          }
          return true
        },
        reuseSocket: (socket: Duplex, request: Http.ClientRequest) => {
          idle.delete(socket)
          reuse(socket, request)
        }
      })
      agents.set(key, agent)
      if (agents.size > pools) {
        const [oldest, dropped] = agents.entries().next().value!
        agents.delete(oldest)
        retire(dropped)
      }
      return agent
    }
    return Outbound.Outbound.of({
      post: (request) =>
        Outbound.target(request.url, { allowPrivate }).pipe(
          Effect.flatMap((target) => {
            const send = (agent: Http.Agent | false) =>
              exchange(
                target,
                {
                  method: "POST",
                  headers: request.headers,
                  body: typeof request.body === "string" ? Buffer.from(request.body) : request.body
                },
                agent,
                (response) => Effect.as(drain(response), { status: response.statusCode ?? 0, headers: response.headers })
              )
            // A kept connection the receiver closed as we sent: once more, on a connection of its own.
            return send(agentFor(target)).pipe(
              Effect.catchIf((error): error is Stale => error instanceof Stale, () => send(false)),
              Effect.catchIf(
                (error): error is Stale => error instanceof Stale,
                (error) => Effect.fail(new Outbound.OutboundError({ reason: "Failed", message: `request failed: ${error.message}` }))
              )
            )
          }),
          Effect.provideService(Outbound.Resolver, resolver),
          Effect.timeoutFail({ duration: Duration.decode(request.timeout), onTimeout: () => Outbound.timeoutError(request.timeout) }),
          spanned("Outbound.post", { attributes: { host: safeHost(request.url) } })
        )
    })
  })

/** The host of a URL for a span, never its path or query (they may carry secrets). */
const safeHost = (url: string) => URL.canParse(url) ? new URL(url).host : "(invalid)"

/** The Outbound layer; needs a Resolver (`NodeResolver.layer` in production). */
export const layer = (options: Options = {}): Layer.Layer<Outbound.Outbound, never, Outbound.Resolver> =>
  Layer.scoped(Outbound.Outbound, make(options))
