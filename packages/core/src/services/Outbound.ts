/**
 * Every request we send to a third party (callbacks now, media fetches next) goes through
 * the `Outbound` service, so that one module decides where a URL may take us: the host is
 * resolved once, every address it resolves to must be public (UrlPolicy), the connection
 * goes to the address that was checked, redirects are never followed, and only the headers
 * the caller gives are sent. A host's own HTTP client (fetch, an Effect HttpClient with
 * tracing) is never used for this: its redirects, tracer and browser headers are not ours to
 * control.
 */
import { Context, Duration, Effect, Schema } from "effect"
import { isNonPublicHostname, isPublicAddress } from "../domain/UrlPolicy.js"

/** Why an outbound request did not get an answer. */
export class OutboundError extends Schema.TaggedError<OutboundError>()("OutboundError", {
  reason: Schema.Literal(
    /** Not an absolute http(s) URL without credentials. */
    "InvalidUrl",
    /** The host name did not resolve. */
    "Unresolvable",
    /** The host is, or resolves to, an address that is not public. Nothing was sent. */
    "NotPublic",
    /** No answer within the time limit. */
    "Timeout",
    /** The connection or the exchange failed. */
    "Failed"
  ),
  message: Schema.String
}) {}

/** A POST to a third party. */
export interface PostRequest {
  readonly url: string
  /** Sent as given, and nothing else of ours beyond host and content-length. */
  readonly headers: Readonly<Record<string, string>>
  readonly body: string | Uint8Array
  /** Limit of the whole exchange, resolution included. */
  readonly timeout: Duration.DurationInput
}

/** The answer to a request: its status. A 3xx is an answer like any other, never followed. */
export interface OutboundResponse {
  readonly status: number
  /** Its headers, names in lower case (a Retry-After, for the deliverer); absent where a test double gives none. */
  readonly headers?: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
}

/** Sends requests to third parties (see the module comment). */
export class Outbound extends Context.Tag("@mediagate/core/Outbound")<Outbound, {
  readonly post: (request: PostRequest) => Effect.Effect<OutboundResponse, OutboundError>
}>() {}

/** Host name to addresses; a Tag so that tests can answer what they need. */
export class Resolver extends Context.Tag("@mediagate/core/Resolver")<Resolver, {
  /** Every address of `hostname` (IPv4 and IPv6, as strings). */
  readonly resolve: (hostname: string) => Effect.Effect<ReadonlyArray<string>, OutboundError>
}>() {}

/** Where a request goes: the URL and the one checked address the connection must use. */
export interface Target {
  readonly url: URL
  /** The host name without IPv6 brackets, for the Host header and TLS. */
  readonly hostname: string
  readonly address: string
  readonly family: 4 | 6
}

const invalid = (message: string) => new OutboundError({ reason: "InvalidUrl", message })

/**
 * Resolves the URL's host once and checks every address it answers: one non-public address
 * refuses the whole name, since we cannot know which one a connection would get. With
 * `allowPrivate` (development and tests only) any address goes.
 */
export const target = (
  url: string,
  options: { readonly allowPrivate: boolean }
): Effect.Effect<Target, OutboundError, Resolver> =>
  Effect.gen(function*() {
    const parsed = yield* Effect.try({ try: () => new URL(url), catch: () => invalid("not an absolute URL") })
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return yield* invalid("not an http or https URL")
    if (parsed.username !== "" || parsed.password !== "") return yield* invalid("the URL contains credentials")
    const hostname = parsed.hostname.replace(/^\[(.*)\]$/, "$1")
    const literal = isIp(hostname)
    // localhost and its subdomains are loopback by definition (RFC 6761), whatever a resolver says.
    if (!options.allowPrivate && !literal && isNonPublicHostname(parsed.hostname)) {
      return yield* new OutboundError({ reason: "NotPublic", message: `${hostname} is not a public host` })
    }
    const addresses = literal ? [hostname] : yield* Effect.flatMap(Resolver, (resolver) => resolver.resolve(hostname))
    if (addresses.length === 0) {
      return yield* new OutboundError({ reason: "Unresolvable", message: `${hostname} has no address` })
    }
    // The refusal of a name never names its addresses: they would map the internal network
    // for whoever submits names to try. A literal address is named, since the client wrote it.
    if (!options.allowPrivate && !addresses.every(isPublicAddress)) {
      return yield* new OutboundError({
        reason: "NotPublic",
        message: literal ? `${hostname} is not a public address` : `${hostname} does not resolve to a public address`
      })
    }
    const address = addresses[0]!
    return { url: parsed, hostname, address, family: address.includes(":") ? 6 : 4 }
  })

/** WHATWG URL leaves an IP literal host as four decimal parts or bracketed IPv6. */
const isIp = (hostname: string) => hostname.includes(":") || /^\d+\.\d+\.\d+\.\d+$/.test(hostname)

/** The message of a timed-out exchange. */
export const timeoutError = (limit: Duration.DurationInput) =>
  new OutboundError({ reason: "Timeout", message: `no answer within ${Duration.format(Duration.decode(limit))}` })
