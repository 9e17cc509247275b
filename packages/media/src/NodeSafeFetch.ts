/**
 * SafeFetch on node:http and node:https. Every hop, the first URL's and each redirect's, is
 * checked by `Outbound.target` (the host resolved once, every address public) and connected
 * with NodeOutbound's pinned lookup, so the connection goes to the address that was checked
 * and a second DNS answer cannot move it. A new connection per hop: a media download is
 * rare next to callbacks, and no kept connection can then carry one hop's check over to
 * another.
 *
 * Time limits run on the Effect Clock: to connect, from the connection to the answer's
 * headers, and for the whole download with its redirects. Sizes are counted as the body
 * arrives; the connection is closed as soon as the limit is passed.
 */
import { MediaProbe, Outbound, SafeFetch, spanned } from "@mediagate/core"
import type { Context, Scope } from "effect"
import { Deferred, Duration, Effect, Exit, Layer } from "effect"
import * as Http from "node:http"
import * as Https from "node:https"
import { pinnedLookup } from "./NodeOutbound.js"

/** SafeFetch settings. */
export interface Options {
  /** Connect to private, loopback and other non-public addresses (development and tests only). Default false. */
  readonly allowPrivate?: boolean
  /** Largest body accepted, in bytes. Default 50 MB (50,000,000 bytes). */
  readonly maxBytes?: number
  /** Limit to open a connection (TCP). Default 10 s. */
  readonly connectTimeout?: Duration.DurationInput
  /** Limit from the connection to the answer's headers (TLS included). Default 10 s. */
  readonly firstByteTimeout?: Duration.DurationInput
  /** Limit of the whole download: every hop, its connection, answer and body. Default 60 s. */
  readonly totalTimeout?: Duration.DurationInput
  /** Redirects followed; one more fails the download. Default 3. */
  readonly maxRedirects?: number
}

/** Where tests stand loopback servers in for public hosts (`layerTest`). */
export interface TestNetwork {
  /** The address a connection to the checked `address` really goes to. */
  readonly route: (address: string) => string
  /** Certificates trusted for https instead of the system's. */
  readonly ca?: string
}

/** The headers of every download; nothing else of ours (no cookies, no credentials, no tracing) goes out. */
const requestHeaders = { accept: "*/*", "user-agent": "mediagate" } as const

const redirectStatuses = new Set([301, 302, 303, 307, 308])

/** `50 MB`, `10 kB`, `999 bytes`: a limit as its setting reads. */
const sizeText = (bytes: number) =>
  bytes >= 1_000_000 && bytes % 1_000_000 === 0
    ? `${bytes / 1_000_000} MB`
    : bytes >= 1_000 && bytes % 1_000 === 0
    ? `${bytes / 1_000} kB`
    : `${bytes} bytes`

/** `10 s`, `0.5 s`. */
const secondsText = (duration: Duration.Duration) => `${Duration.toSeconds(duration)} s`

type Fail = (reason: SafeFetch.SafeFetchError["reason"], message: string) => SafeFetch.SafeFetchError

/** A hop's answer: the body of a success, or where a redirect points. */
type Answer =
  | { readonly _tag: "Body"; readonly bytes: Uint8Array }
  | { readonly _tag: "Redirect"; readonly location: string }

/** A SafeFetch resolving with the Resolver in context. */
export const make = (
  options: Options = {}
): Effect.Effect<Context.Tag.Service<SafeFetch.SafeFetch>, never, Outbound.Resolver> => makeOn(options, undefined)

const makeOn = (
  options: Options,
  network: TestNetwork | undefined
): Effect.Effect<Context.Tag.Service<SafeFetch.SafeFetch>, never, Outbound.Resolver> =>
  Effect.gen(function*() {
    const resolver = yield* Outbound.Resolver
    const allowPrivate = options.allowPrivate ?? false
    const maxBytes = options.maxBytes ?? 50_000_000
    const connectTimeout = Duration.decode(options.connectTimeout ?? "10 seconds")
    const firstByteTimeout = Duration.decode(options.firstByteTimeout ?? "10 seconds")
    const totalTimeout = Duration.decode(options.totalTimeout ?? "60 seconds")
    const maxRedirects = options.maxRedirects ?? 3

    /** Sends the GET on a new connection to the checked address; the request is destroyed with the scope. */
    const open = (target: Outbound.Target, fail: Fail): Effect.Effect<Http.IncomingMessage, SafeFetch.SafeFetchError, Scope.Scope> =>
      Effect.gen(function*() {
        const connected = yield* Deferred.make<void, SafeFetch.SafeFetchError>()
        const answered = yield* Deferred.make<Http.IncomingMessage, SafeFetch.SafeFetchError>()
        const address = network === undefined ? target.address : network.route(target.address)
        const https = target.url.protocol === "https:"
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            const request = (https ? Https : Http).request({
              method: "GET",
              hostname: target.hostname,
              port: target.url.port === "" ? undefined : Number(target.url.port),
              path: `${target.url.pathname}${target.url.search}`,
              headers: requestHeaders,
              lookup: pinnedLookup({ ...target, address, family: address.includes(":") ? 6 : 4 }),
              agent: false,
              ...(https && network?.ca !== undefined ? { ca: network.ca } : {})
            })
            request.on("socket", (socket) => {
              if (socket.connecting) socket.once("connect", () => Deferred.unsafeDone(connected, Exit.void))
              else Deferred.unsafeDone(connected, Exit.void)
            })
            request.on("response", (response) => Deferred.unsafeDone(answered, Exit.succeed(response)))
            request.on("error", (error) => {
              const failure = Exit.fail(fail("Failed", `request failed: ${error.message}`))
              Deferred.unsafeDone(connected, failure)
              Deferred.unsafeDone(answered, failure)
            })
            request.end()
            return request
          }),
          (request) => Effect.sync(() => request.destroy())
        )
        yield* Deferred.await(connected).pipe(
          Effect.timeoutFail({
            duration: connectTimeout,
            onTimeout: () => fail("Timeout", `could not connect within ${secondsText(connectTimeout)}`)
          })
        )
        return yield* Deferred.await(answered).pipe(
          Effect.timeoutFail({
            duration: firstByteTimeout,
            onTimeout: () => fail("Timeout", `no answer within ${secondsText(firstByteTimeout)}`)
          })
        )
      })

    /** The body up to `maxBytes`; past it the connection is closed at once. */
    const read = (response: Http.IncomingMessage, fail: Fail): Effect.Effect<Uint8Array, SafeFetch.SafeFetchError> =>
      Effect.async((resume) => {
        const chunks: Array<Buffer> = []
        let size = 0
        let settled = false
        const settle = (outcome: Effect.Effect<Uint8Array, SafeFetch.SafeFetchError>) => {
          if (settled) return
          settled = true
          resume(outcome)
        }
        response.on("data", (chunk: Buffer) => {
          size += chunk.length
          if (size <= maxBytes) return void chunks.push(chunk)
          response.destroy()
          settle(Effect.fail(fail("TooLarge", `larger than ${sizeText(maxBytes)}`)))
        })
        response.on("end", () => {
          const body = Buffer.concat(chunks, size)
          settle(Effect.succeed(new Uint8Array(body.buffer, body.byteOffset, body.byteLength)))
        })
        response.on("error", (error) => settle(Effect.fail(fail("Failed", `the body was cut short: ${error.message}`))))
        response.on("close", () => settle(Effect.fail(fail("Failed", "the body was cut short"))))
        return Effect.sync(() => response.destroy())
      })

    const exchange = (target: Outbound.Target, fail: Fail): Effect.Effect<Answer, SafeFetch.SafeFetchError, Scope.Scope> =>
      Effect.gen(function*() {
        const response = yield* open(target, fail)
        const status = response.statusCode ?? 0
        if (redirectStatuses.has(status)) {
          const location = response.headers.location
          if (location === undefined) return yield* fail("Redirect", `HTTP ${status} without a Location`)
          return { _tag: "Redirect", location } as const
        }
        if (status < 200 || status > 299) return yield* fail("Status", `HTTP ${status}`)
        // An announced size past the limit fails before a byte of the body is read.
        if (Number(response.headers["content-length"]) > maxBytes) {
          return yield* fail("TooLarge", `larger than ${sizeText(maxBytes)}`)
        }
        return { _tag: "Body", bytes: yield* read(response, fail) } as const
      })

    const get = (url: string): Effect.Effect<SafeFetch.Fetched, SafeFetch.SafeFetchError> => {
      const fail: Fail = (reason, message) => new SafeFetch.SafeFetchError({ url, reason, message: `${url}: ${message}` })
      return Effect.gen(function*() {
        let current = url
        for (let redirects = 0;; redirects++) {
          const hop = current
          // A redirect's failures say which hop failed; the message still starts with the URL asked for.
          const failHop: Fail = redirects === 0 ? fail : (reason, message) => fail(reason, `redirect to ${hop}: ${message}`)
          const target = yield* Outbound.target(hop, { allowPrivate }).pipe(
            Effect.provideService(Outbound.Resolver, resolver),
            Effect.mapError((error) => failHop(error.reason, error.message))
          )
          const answer = yield* Effect.scoped(exchange(target, failHop))
          if (answer._tag === "Body") {
            return { url: hop, bytes: answer.bytes, contentType: MediaProbe.contentType(answer.bytes) }
          }
          if (redirects === maxRedirects) return yield* fail("Redirect", `more than ${maxRedirects} redirects`)
          if (!URL.canParse(answer.location, hop)) {
            return yield* failHop("Redirect", `redirect to ${answer.location}, which is not a URL`)
          }
          const next = new URL(answer.location, hop)
          if (target.url.protocol === "https:" && next.protocol === "http:") {
            return yield* failHop("Redirect", `redirect from https to http (${next.href}) refused`)
          }
          current = next.href
        }
      }).pipe(
        Effect.timeoutFail({
          duration: totalTimeout,
          onTimeout: () => fail("Timeout", `not received in full within ${secondsText(totalTimeout)}`)
        }),
        spanned("SafeFetch.get", { attributes: { host: safeHost(url) } })
      )
    }

    return SafeFetch.SafeFetch.of({ get })
  })

/** The host of a URL for a span, never its path or query (they may carry secrets). */
const safeHost = (url: string) => URL.canParse(url) ? new URL(url).host : "(invalid)"

/** The SafeFetch layer; needs a Resolver (`NodeResolver.layer` in production). */
export const layer = (options: Options = {}): Layer.Layer<SafeFetch.SafeFetch, never, Outbound.Resolver> =>
  Layer.effect(SafeFetch.SafeFetch, make(options))

/**
 * A SafeFetch whose connections go where `network` routes them, after the same checks: tests
 * stand a loopback server in for a public address, so the checks run with `allowPrivate` off.
 */
export const layerTest = (
  options: Options,
  network: TestNetwork
): Layer.Layer<SafeFetch.SafeFetch, never, Outbound.Resolver> => Layer.effect(SafeFetch.SafeFetch, makeOn(options, network))
