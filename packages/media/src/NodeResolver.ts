/**
 * The Resolver on the operating system's resolver (getaddrinfo: /etc/hosts, then DNS), the
 * same one node:http would use, so a name in /etc/hosts is judged by the address it maps to.
 */
import { Outbound } from "@mediagate/core"
import { Effect, Layer } from "effect"
import { lookup } from "node:dns/promises"

/** Every address of a host name, in the resolver's order. */
export const resolve = (hostname: string): Effect.Effect<ReadonlyArray<string>, Outbound.OutboundError> =>
  Effect.tryPromise({
    // verbatim: the resolver's own order, which is the order a connection would try.
    try: () => lookup(hostname, { all: true, verbatim: true }),
    catch: (cause) =>
      new Outbound.OutboundError({
        reason: "Unresolvable",
        message: `${hostname} could not be resolved${cause instanceof Error && "code" in cause ? ` (${String(cause.code)})` : ""}`
      })
  }).pipe(Effect.map((answers) => answers.map((answer) => answer.address)))

/** The Resolver layer. */
export const layer: Layer.Layer<Outbound.Resolver> = Layer.succeed(Outbound.Resolver, Outbound.Resolver.of({ resolve }))
