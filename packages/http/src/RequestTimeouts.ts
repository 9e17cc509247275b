/**
 * How long a client may take to send a request: its headers, then its body. A client that
 * sends a byte a second would otherwise hold a connection (and a body buffer) for as long as
 * Node lets it, 5 minutes by default.
 *
 * The body's deadline is the app's own (`readBody`): 408 in the envelope, with
 * `Connection: close`, and nothing of the request is used. The headers arrive before any
 * app sees the request, so their deadline is node:http's `headersTimeout`, answered in the
 * envelope by `ClientErrors`; `applyTo` sets it, and sets node's `requestTimeout` a little
 * past both, as the outer bound.
 */
import { Api } from "@mediagate/core"
import { Context, Duration, Effect, Fiber, Layer } from "effect"
import type * as Http from "node:http"

/** The two deadlines. */
export interface Settings {
  /** From a connection's first byte of a request to the end of its headers. */
  readonly headers: Duration.Duration
  /** From the end of the headers to the end of the body. */
  readonly body: Duration.Duration
}

/** The defaults: 10 seconds each, plenty for a body of at most 1 MiB on any working network. */
export const defaults: Settings = { headers: Duration.seconds(10), body: Duration.seconds(10) }

/** The deadlines the app applies; `defaults` unless the host provides its own (`layer`). */
export class RequestTimeouts extends Context.Reference<RequestTimeouts>()("@mediagate/http/RequestTimeouts", {
  defaultValue: (): Settings => defaults
}) {}

/** The deadlines as a layer, for a host's composition. */
export const layer = (settings: Settings): Layer.Layer<never> => Layer.succeed(RequestTimeouts, settings)

/** How much longer node's own `requestTimeout` is than the two deadlines: ours answer first, in the envelope. */
export const outerMargin = Duration.seconds(1)

/**
 * Sets node:http's deadlines on `server`, before it listens: `headersTimeout` is the headers'
 * deadline, `requestTimeout` the two deadlines and `outerMargin`, and node checks them at
 * least every quarter of the headers' deadline (every second at most), where its default is
 * every 30 seconds.
 */
export const applyTo = (server: Http.Server, settings: Settings = defaults): Http.Server => {
  const headers = Duration.toMillis(settings.headers)
  server.headersTimeout = headers
  server.requestTimeout = headers + Duration.toMillis(settings.body) + Duration.toMillis(outerMargin)
  const checked = server as Http.Server & { connectionsCheckingInterval: number }
  checked.connectionsCheckingInterval = Math.max(10, Math.min(1_000, Math.floor(headers / 4)))
  return server
}

/** 408: the body did not arrive within its deadline. */
export const bodyTooSlow = () => new Api.RequestTimeout({ code: 408, msg: "the request body took too long to arrive" })

/**
 * Runs `read` (the reading of a request body) within the body's deadline, failing with
 * `onTimeout()` past it. The reading goes on in the background after the deadline: stopping
 * it would destroy the request, and with it the socket, before the 408 is written. The
 * answer closes the connection, which ends the reading.
 */
export const readBody = <A, E, E2>(read: Effect.Effect<A, E>, onTimeout: () => E2): Effect.Effect<A, E | E2> =>
  Effect.gen(function*() {
    const { body } = yield* RequestTimeouts
    const reading = yield* Effect.forkDaemon(read)
    return yield* Fiber.join(reading).pipe(
      Effect.timeoutFail({ duration: body, onTimeout }),
      Effect.onInterrupt(() => Fiber.interruptFork(reading))
    )
  })
