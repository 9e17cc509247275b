/**
 * How long a client may take to send a request: its headers, then its body. A client that
 * sends a byte a second would otherwise hold a connection (and a body buffer) for as long as
 * Node lets it, 5 minutes by default.
 *
 * The body's deadline is the app's own (`readBody`): 408 in the envelope, with
 * `Connection: close`, and nothing of the request is used. An upload (up to 50 MB, where a
 * JSON body is at most 1 MiB) is held to its progress instead (`readUpload`): it fails when
 * no byte arrived for the body's deadline, or when it is still arriving past `upload`. The headers arrive before any
 * app sees the request, so their deadline is node:http's `headersTimeout`, answered in the
 * envelope by `ClientErrors`; `applyTo` sets it, and sets node's `requestTimeout` a little
 * past both, as the outer bound.
 */
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Api } from "@mediagate/core"
import { Clock, Context, Duration, Effect, Fiber, Layer } from "effect"
import type * as Http from "node:http"
import * as RequestBody from "./RequestBody.js"

/** The two deadlines. */
export interface Settings {
  /** From a connection's first byte of a request to the end of its headers. */
  readonly headers: Duration.Duration
  /** From the end of the headers to the end of the body; for an upload, the longest wait for its next bytes. */
  readonly body: Duration.Duration
  /** From the end of an upload's headers to the end of its body, however steadily it arrives; default `defaultUpload`. */
  readonly upload?: Duration.Duration | undefined
}

/**
 * An upload's whole deadline: 10 minutes, 50 MB (the largest upload by default) at about
 * 85 KB/s, a slow mobile link's upload rate.
 */
export const defaultUpload: Duration.Duration = Duration.minutes(10)

/** The defaults: 10 seconds each, plenty for a body of at most 1 MiB on any working network; 10 minutes for an upload. */
export const defaults: Settings = { headers: Duration.seconds(10), body: Duration.seconds(10), upload: defaultUpload }

/** The deadlines the app applies; `defaults` unless the host provides its own (`layer`). */
export class RequestTimeouts extends Context.Reference<RequestTimeouts>()("@mediagate/http/RequestTimeouts", {
  defaultValue: (): Settings => defaults
}) {}

/** The deadlines as a layer, for a host's composition. */
export const layer = (settings: Settings): Layer.Layer<never> => Layer.succeed(RequestTimeouts, settings)

/** How much longer node's own `requestTimeout` is than the two deadlines: ours answer first, in the envelope. */
export const outerMargin = Duration.seconds(1)

/** The longest a body may take: an upload's deadline or a body's, whichever is longer. */
const longestBody = (settings: Settings) => Math.max(Duration.toMillis(settings.body), Duration.toMillis(settings.upload ?? defaultUpload))

/**
 * Sets node:http's deadlines on `server`, before it listens: `headersTimeout` is the headers'
 * deadline, `requestTimeout` the headers' and the longest body's (an upload's) and
 * `outerMargin`, an outer bound only (the app answers a slow body first), and node checks them at
 * least every quarter of the headers' deadline (every second at most), where its default is
 * every 30 seconds.
 */
export const applyTo = (server: Http.Server, settings: Settings = defaults): Http.Server => {
  const headers = Duration.toMillis(settings.headers)
  server.headersTimeout = headers
  server.requestTimeout = headers + longestBody(settings) + Duration.toMillis(outerMargin)
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

/**
 * `readBody` for the reading of `request`'s own body, without the deadline when the body is
 * already here whole (`RequestBody.arrived`: most bodies come in the packet of their
 * headers), which no client can hold up. The request's fiber starts in node:http's `request`
 * event, before node has parsed the rest of that packet; one yield to the scheduler (a
 * microtask) later it has.
 */
export const readRequestBody = <A, E, E2>(
  request: HttpServerRequest.HttpServerRequest,
  read: Effect.Effect<A, E>,
  onTimeout: () => E2
): Effect.Effect<A, E | E2> =>
  Effect.zipRight(Effect.yieldNow(), Effect.suspend(() => RequestBody.arrived(request) ? read : readBody(read, onTimeout)))

/**
 * Runs `read` (the reading of an upload's body, which calls `progress` as its bytes arrive)
 * while it progresses: failing with `onTimeout()` when no bytes arrived for the body's
 * deadline, or when the upload is still arriving past its own (`upload`). As in `readBody`,
 * the reading goes on in the background after a deadline, and the answer closes the
 * connection. The watch sleeps by the Clock until the next moment either deadline could pass.
 */
export const readUpload = <A, E, E2>(
  read: (progress: Effect.Effect<void>) => Effect.Effect<A, E>,
  onTimeout: () => E2
): Effect.Effect<A, E | E2> =>
  Effect.gen(function*() {
    const settings = yield* RequestTimeouts
    const idle = Duration.toMillis(settings.body)
    const started = yield* Clock.currentTimeMillis
    const ends = started + Duration.toMillis(settings.upload ?? defaultUpload)
    let last = started
    const progress = Effect.map(Clock.currentTimeMillis, (now) => {
      last = now
    })
    const reading = yield* Effect.forkDaemon(read(progress))
    const watch: Effect.Effect<never, E2> = Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const due = Math.min(last + idle, ends)
      return now >= due ? Effect.fail(onTimeout()) : Effect.zipRight(Effect.sleep(due - now), watch)
    })
    return yield* Effect.raceFirst(Fiber.join(reading), watch).pipe(Effect.onInterrupt(() => Fiber.interruptFork(reading)))
  })
