/**
 * The envelope on every answer. Whatever the framework or a bug produces (unknown route,
 * unreadable body, defect) is turned into `{code, msg}`; no stack or framework-shaped body
 * reaches a client.
 */
import type { HttpApp } from "@effect/platform"
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Api } from "@mediagate/core"
import type { Accounts } from "@mediagate/core"
import { Cause, Effect, Option } from "effect"
import { authenticateRequest } from "./Auth.js"

/** A JSON envelope response. */
export const envelope = (code: number, msg: string, data?: unknown) =>
  HttpServerResponse.unsafeJson(Api.errorEnvelope(code, msg, data), { status: code === 0 ? 200 : code })

/** Prefix every API path lives under. */
export const apiPrefix = "/api/v1/"

const notFound = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const path = request.url.split("?")[0] ?? ""
  // Every endpoint under /api/v1/ requires the key, so an unknown path there is a 401
  // for callers without one, like every other path there.
  if (path.startsWith(apiPrefix) || path === apiPrefix.slice(0, -1)) {
    const account = yield* authenticateRequest(request)
    if (Option.isNone(account)) return envelope(401, "unauthorized")
    // A task id the router would not take (too long, odd characters) is still an unknown task.
    if (request.method === "GET" && /^\/api\/v1\/task\/[^/]+$/.test(path)) return envelope(404, "task not found")
  }
  return envelope(404, "not found")
})

/** Wraps an app so that every failure it leaves unanswered becomes an envelope. */
export const middleware = <E, R>(
  app: HttpApp.Default<E, R>
): HttpApp.Default<never, R | Accounts.Accounts | HttpServerRequest.HttpServerRequest> =>
  Effect.catchAllCause(app, (cause) => {
    const failure = Cause.failureOption(cause)
    if (Option.isSome(failure)) {
      const error = failure.value as { readonly _tag?: string }
      if (error._tag === "RouteNotFound") return notFound.pipe(Effect.orElseSucceed(() => envelope(500, "internal server error")))
      if (error._tag === "RequestError") return Effect.succeed(envelope(400, "the request could not be read"))
    }
    if (Cause.isInterruptedOnly(cause)) return Effect.succeed(envelope(503, "service unavailable"))
    return Effect.logError("mediagate: unhandled failure answered with 500", cause).pipe(
      Effect.as(envelope(500, "internal server error"))
    )
  })
