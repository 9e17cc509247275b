/**
 * The envelope on every answer. Domain errors become their HTTP error in one mapping;
 * whatever the framework or a bug produces (unknown route, wrong method, unreadable body,
 * defect) is turned into `{code, msg}`; no stack or framework-shaped body reaches a client.
 */
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import {
  Api,
  ModerationRejected,
  ModerationUnavailable,
  StoreError,
  TaskConflict,
  TaskNotCancellable,
  TaskNotFound,
  ValidationError
} from "@mediagate/core"
import type { Accounts, AdminKeys } from "@mediagate/core"
import { Cause, Effect, Option } from "effect"
import { authenticateAdmin } from "./AdminAuthentication.js"
import { authenticate } from "./Auth.js"
import * as Compression from "./Compression.js"
import { allowedMethods, isAdminPath, isApiPath, notFoundMessage } from "./Paths.js"
import * as StoreFailures from "./StoreFailures.js"

/** A JSON envelope response. */
export const envelope = (code: number, msg: string, data?: unknown, headers?: Record<string, string>) =>
  HttpServerResponse.unsafeJson(Api.errorEnvelope(code, msg, data), {
    status: code === 0 ? 200 : code,
    ...(headers === undefined ? {} : { headers })
  })

/** The HTTP error of each domain error a use case can fail with. */
export type HttpError<E> = E extends ValidationError ? Api.BadRequest
  : E extends ModerationRejected ? Api.ModerationRejectedResponse
  : E extends ModerationUnavailable ? Api.ServiceUnavailable
  : E extends TaskNotFound ? Api.NotFound
  : E extends TaskNotCancellable | TaskConflict ? Api.Conflict
  : E extends StoreError ? Api.ServiceUnavailable | Api.InternalServerError
  : E

/**
 * Seconds a 503 asks the client to wait (`Retry-After`) where the answer names none of its
 * own: the database out of reach, moderation down, a server shutting down.
 */
export const retryAfterSeconds = 5

/** The message of a request answered 503 because the database could not be reached. */
export const storeUnavailableMessage = "the database is unavailable; try again later"

/** 503 for a store that cannot reach its database (`StoreFailures.unreachable`); 500 for any other store failure. */
const storeFailure = (error: StoreError): Api.ServiceUnavailable | Api.InternalServerError =>
  StoreFailures.unreachable(error) ? new Api.ServiceUnavailable({ code: 503, msg: storeUnavailableMessage }) : Api.internalError()

/** Maps a domain error onto the envelope error the contract gives it; other errors pass unchanged. */
export const toHttpError = <E>(error: E): HttpError<E> => {
  const mapped: unknown = error instanceof ValidationError
    ? new Api.BadRequest({ code: 400, msg: error.message })
    : error instanceof ModerationRejected
    ? new Api.ModerationRejectedResponse({
      code: 400,
      msg: "content rejected by moderation",
      data: {
        flagged: error.flagged,
        // Always the 13 keys of the spec: a moderator that names fewer flags none of the others.
        categories: Api.moderationCategoryFlags(error.categories)
      }
    })
    : error instanceof ModerationUnavailable
    ? new Api.ServiceUnavailable({ code: 503, msg: "content moderation is unavailable; nothing was created, try again later" })
    : error instanceof TaskNotFound
    ? Api.taskNotFound()
    : error instanceof TaskNotCancellable
    ? new Api.Conflict({ code: 409, msg: `task is already ${error.status}` })
    : error instanceof TaskConflict
    ? new Api.Conflict({ code: 409, msg: "task is changing; try again" })
    : error instanceof StoreError
    ? storeFailure(error)
    : error
  return mapped as HttpError<E>
}

/** The one log line of a failure answered with 500: its cause, never shown to the client. */
const logAnsweredWith500 = (cause: Cause.Cause<unknown>) => Effect.logError("mediagate: unhandled failure answered with 500", cause)

/** The one log line of a request answered 503 because the database could not be reached. */
const logAnsweredWith503 = (cause: Cause.Cause<unknown>) =>
  Effect.logWarning("mediagate: the database could not be reached; answered 503", cause)

/** The log line of a store failure: 503's for the database out of reach, else 500's. */
const logStoreFailure = (error: StoreError, cause: Cause.Cause<unknown>) =>
  StoreFailures.unreachable(error) ? logAnsweredWith503(cause) : logAnsweredWith500(cause)

/**
 * A use case's errors as the contract's (`toHttpError`). A store that could not reach its
 * database is 503 (Retry-After is added by `middleware`); a store that failed otherwise is
 * answered as a defect is: 500 `internal server error`, with the same log line.
 */
export const answerErrors = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, HttpError<E>, R> =>
  effect.pipe(
    Effect.tapErrorCause((cause) => {
      const failure = Cause.failureOption(cause)
      return Option.isSome(failure) && failure.value instanceof StoreError ? logStoreFailure(failure.value, cause) : Effect.void
    }),
    Effect.mapError(toHttpError)
  )

/**
 * A StoreError that ended a request, as a failure or as a defect: authentication turns the
 * accounts store's failure into a defect (it may only fail with 401).
 */
const storeErrorOf = (cause: Cause.Cause<unknown>): Option.Option<StoreError> =>
  Cause.find(cause, (reason) =>
    reason._tag === "Fail" && reason.error instanceof StoreError
      ? Option.some(reason.error)
      : reason._tag === "Die" && reason.defect instanceof StoreError
      ? Option.some(reason.defect)
      : Option.none())

/**
 * The headers an answer's status asks for: Retry-After on a 503 that names none of its own;
 * `Connection: close` on a 408, whose request was not read to its end.
 */
const statusHeaders = (response: HttpServerResponse.HttpServerResponse): HttpServerResponse.HttpServerResponse =>
  response.status === 503 && response.headers["retry-after"] === undefined
    ? HttpServerResponse.setHeader(response, "retry-after", String(retryAfterSeconds))
    : response.status === 408
    ? HttpServerResponse.setHeader(response, "connection", "close")
    : response

/** Every error class of the contract's envelope (`Api`), answered as HttpApi encodes it: `{code, msg, data?}`. */
const envelopeErrors = [
  Api.BadRequest,
  Api.ModerationRejectedResponse,
  Api.Unauthorized,
  Api.Forbidden,
  Api.NotFound,
  Api.MethodNotAllowed,
  Api.Conflict,
  Api.UnprocessableEntity,
  Api.ServiceUnavailable,
  Api.RequestTimeout,
  Api.UnsupportedMediaType,
  Api.PayloadTooLarge,
  Api.TooManyRequests,
  Api.InternalServerError
]

const isErrorEnvelope = (error: unknown): error is { readonly code: number; readonly msg: string; readonly data?: unknown } =>
  envelopeErrors.some((envelopeError) => error instanceof envelopeError)

/** 405 with the methods the path takes. */
export const methodNotAllowed = (method: string, allowed: ReadonlyArray<string>) =>
  envelope(405, `method ${method} is not allowed here; use ${allowed.join(" or ")}`, undefined, { allow: allowed.join(", ") })

/** 404 naming the path it saw (`Paths.notFoundMessage`). */
export const notFound = (path: string) => envelope(404, notFoundMessage(path))

/** The path of a request, without its query. */
export const requestPath = (request: HttpServerRequest.HttpServerRequest) => request.url.split("?")[0] ?? ""

/**
 * A request no route took. Every endpoint under /api/v1/ requires the key, so without one
 * the answer there is 401 before anything about the path or method is revealed; under
 * /api/v1/admin/ the key must be an admin key (`AdminAuthentication`).
 */
const unrouted = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const path = requestPath(request)
  if (isAdminPath(path)) yield* authenticateAdmin
  else if (isApiPath(path)) yield* authenticate
  const allowed = allowedMethods(path)
  if (allowed.length > 0 && !allowed.includes(request.method)) return methodNotAllowed(request.method, allowed)
  // A task id the router would not take (too long, odd characters) is still an unknown task.
  if (request.method === "GET" && /^\/api\/v1\/task\/[^/]+$/.test(path)) return envelope(404, "task not found")
  return notFound(path)
})

const answer = (error: { readonly code: number; readonly msg: string; readonly data?: unknown }) =>
  envelope(error.code, error.msg, error.data)

/** Every failure `app` leaves unanswered, as an envelope. */
const answered = <E, R>(
  app: HttpApp.Default<E, R>
): HttpApp.Default<never, R | Accounts.Accounts | AdminKeys.AdminKeys | HttpServerRequest.HttpServerRequest> =>
  Effect.catchAllCause(app, (cause) => {
    const store = storeErrorOf(cause)
    if (Option.isSome(store) && StoreFailures.unreachable(store.value)) {
      return logAnsweredWith503(cause).pipe(Effect.as(envelope(503, storeUnavailableMessage)))
    }
    const failure = Cause.failureOption(cause)
    if (Option.isSome(failure)) {
      const error = failure.value as { readonly _tag?: string }
      if (isErrorEnvelope(error)) return Effect.succeed(answer(error))
      if (error._tag === "RouteNotFound") {
        // Authentication there may fail too (the accounts' database out of reach): answered alike.
        return answered(unrouted.pipe(Effect.catchAll((unauthorized) => Effect.succeed(answer(unauthorized)))))
      }
      if (error._tag === "RequestError") return Effect.succeed(envelope(400, "the request could not be read"))
    }
    if (Cause.isInterruptedOnly(cause)) return Effect.succeed(envelope(503, "service unavailable"))
    return logAnsweredWith500(cause).pipe(Effect.as(envelope(500, "internal server error")))
  })

/**
 * Wraps an app so that every failure it leaves unanswered becomes an envelope, every 503
 * carries Retry-After and every 408 closes the connection (`statusHeaders`). A store that
 * could not reach its database is 503 wherever it failed. Answers are compressed as the
 * request accepts, static pages cached (`Compression`).
 */
export const middleware = <E, R>(
  app: HttpApp.Default<E, R>
): HttpApp.Default<never, R | Accounts.Accounts | AdminKeys.AdminKeys | HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    Effect.flatMap(Effect.map(answered(app), statusHeaders), (response) => Compression.negotiate(request, response)))
