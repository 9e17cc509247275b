/**
 * The Outbound service on node:http and node:https. The connection's `lookup` answers the
 * address Outbound.target has already checked, so the name is resolved once and a second
 * answer (DNS rebinding) can never redirect the connection; requests go out on their own
 * socket (no pool that might hold a connection made under other rules), redirects are
 * answers, and the only headers are the caller's plus host and content-length.
 */
import { Outbound } from "@mediagate/core"
import type { Context } from "effect"
import { Duration, Effect, Layer } from "effect"
import * as Http from "node:http"
import * as Https from "node:https"
import type { LookupFunction } from "node:net"

/** Outbound settings. */
export interface Options {
  /** Connect to private, loopback and other non-public addresses (development and tests only). Default false. */
  readonly allowPrivate?: boolean
}

/** A request to a checked target; its answer is handed to `onResponse`, which owns the body. */
const exchange = <A>(
  target: Outbound.Target,
  request: { readonly method: string; readonly headers: Readonly<Record<string, string>>; readonly body?: Uint8Array },
  onResponse: (response: Http.IncomingMessage) => Effect.Effect<A, Outbound.OutboundError>
): Effect.Effect<A, Outbound.OutboundError> =>
  Effect.async<Http.IncomingMessage, Outbound.OutboundError>((resume) => {
    const pinned: LookupFunction = (_hostname, options, callback) =>
      options.all
        ? (callback as (error: null, addresses: Array<{ address: string; family: number }>) => void)(
          null,
          [{ address: target.address, family: target.family }]
        )
        : callback(null, target.address, target.family)
    const client = target.url.protocol === "https:" ? Https : Http
    const outgoing = client.request({
      method: request.method,
      hostname: target.hostname,
      port: target.url.port === "" ? undefined : Number(target.url.port),
      path: `${target.url.pathname}${target.url.search}`,
      headers: request.body === undefined
        ? request.headers
        : { ...request.headers, "content-length": String(request.body.byteLength) },
      lookup: pinned,
      agent: false
    })
    // node:http adds `connection: close` for a socket of its own; HTTP/1.1 needs no such header.
    outgoing.removeHeader("connection")
    outgoing.on("response", (response) => resume(Effect.succeed(response)))
    outgoing.on("error", (error) =>
      resume(Effect.fail(new Outbound.OutboundError({ reason: "Failed", message: `request failed: ${error.message}` })))
    )
    outgoing.end(request.body)
    return Effect.sync(() => outgoing.destroy())
  }).pipe(
    Effect.flatMap((response) =>
      onResponse(response).pipe(Effect.ensuring(Effect.sync(() => response.destroyed || response.resume())))
    )
  )

/** An Outbound that resolves with the Resolver in context. */
export const make = (options: Options = {}): Effect.Effect<Context.Tag.Service<Outbound.Outbound>, never, Outbound.Resolver> =>
  Effect.gen(function*() {
    const resolver = yield* Outbound.Resolver
    const allowPrivate = options.allowPrivate ?? false
    return Outbound.Outbound.of({
      post: (request) =>
        Outbound.target(request.url, { allowPrivate }).pipe(
          Effect.flatMap((target) =>
            exchange(
              target,
              {
                method: "POST",
                headers: request.headers,
                body: typeof request.body === "string" ? new TextEncoder().encode(request.body) : request.body
              },
              (response) => Effect.succeed({ status: response.statusCode ?? 0 })
            )
          ),
          Effect.provideService(Outbound.Resolver, resolver),
          Effect.timeoutFail({ duration: Duration.decode(request.timeout), onTimeout: () => Outbound.timeoutError(request.timeout) }),
          Effect.withSpan("Outbound.post", { attributes: { host: safeHost(request.url) } })
        )
    })
  })

/** The host of a URL for a span, never its path or query (they may carry secrets). */
const safeHost = (url: string) => URL.canParse(url) ? new URL(url).host : "(invalid)"

/** The Outbound layer; needs a Resolver (`NodeResolver.layer` in production). */
export const layer = (options: Options = {}): Layer.Layer<Outbound.Outbound, never, Outbound.Resolver> =>
  Layer.effect(Outbound.Outbound, make(options))
