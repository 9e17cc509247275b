/**
 * The client's errors: the server's error envelope, a request that got no usable answer,
 * and a `run` that outlived its timeout.
 */
import * as HttpClientError from "@effect/platform/HttpClientError"
import { Effect, ParseResult, Predicate, Schema } from "effect"
import type { Task } from "@mediagate/core"

/** The server answered with its error envelope `{code, msg, data?}` (spec section 7). */
export class MediagateError extends Schema.TaggedError<MediagateError>()("MediagateError", {
  /** The HTTP status. */
  status: Schema.Number,
  /** The envelope's `code` (equal to the HTTP status for mediagate's errors). */
  code: Schema.Number,
  /** The envelope's `msg`: `unauthorized`, `task not found`, `input.n must be ...`. */
  msg: Schema.String,
  /** The envelope's `data`, when there is one (moderation: `flagged` and `categories`). */
  data: Schema.optional(Schema.Unknown)
}) {
  override get message(): string {
    return this.msg
  }
}

/** The request got no answer, or one that is not mediagate's (connection refused, a proxy's page, a body that does not decode). */
export class TransportError extends Schema.TaggedError<TransportError>()("TransportError", {
  message: Schema.String
}) {}

/** `run` gave up waiting: the task had not ended within the timeout (it goes on at the server). */
export class RunTimeout extends Schema.TaggedError<RunTimeout>()("RunTimeout", {
  taskId: Schema.String,
  /** The task as last seen, or undefined when no query answered in time. */
  task: Schema.optional(Schema.Unknown)
}) {
  override get message(): string {
    const status = (this.task as Task.Task | undefined)?.status
    return `task ${this.taskId} has not ended in time${status === undefined ? "" : ` (still ${status})`}; it goes on at the server`
  }
}

/** A local file given as an input or to `upload` that the client could not open (no such file; a path in a browser). */
export class LocalFileError extends Schema.TaggedError<LocalFileError>()("LocalFileError", {
  path: Schema.String,
  message: Schema.String
}) {}

/** Any failure of a client call but `run`'s timeout. */
export type ClientError = MediagateError | TransportError

const Envelope = Schema.Struct({ code: Schema.Number, msg: Schema.String, data: Schema.optional(Schema.Unknown) })
const decodeEnvelope = Schema.decodeUnknownOption(Schema.parseJson(Envelope))

const isEnvelope = (error: unknown): error is { readonly code: number; readonly msg: string; readonly data?: unknown } =>
  Predicate.hasProperty(error, "code") && typeof error.code === "number" && Predicate.hasProperty(error, "msg") &&
  typeof error.msg === "string"

/** An answer with a status the contract does not list (429, a proxy's 502): its envelope if it has one, else the status. */
const fromResponse = (error: HttpClientError.ResponseError) =>
  Effect.map(Effect.option(error.response.text), (body) => {
    const envelope = body._tag === "Some" ? decodeEnvelope(body.value) : body
    const status = error.response.status
    return envelope._tag === "Some"
      ? new MediagateError({ status, code: envelope.value.code, msg: envelope.value.msg, ...(envelope.value.data === undefined ? {} : { data: envelope.value.data }) })
      : status >= 400
      ? new MediagateError({ status, code: status, msg: `HTTP ${status} without a mediagate answer` })
      : new TransportError({ message: `unexpected answer HTTP ${status} from ${error.request.url}` })
  })

/**
 * Any failure of a contract-derived call as the client's error: the contract's error
 * classes (BadRequest, Unauthorized, NotFound, ...) carry the envelope, whose `code` is the
 * HTTP status; anything else is a transport failure.
 */
export const refail = (error: unknown): Effect.Effect<never, ClientError> => {
  if (HttpClientError.isHttpClientError(error)) {
    return error._tag === "ResponseError"
      ? Effect.flatMap(fromResponse(error), Effect.fail)
      : Effect.fail(new TransportError({ message: `cannot reach ${error.request.url}: ${describeCause(error.cause) ?? error.message}` }))
  }
  if (ParseResult.isParseError(error)) {
    return Effect.fail(new TransportError({ message: `unexpected answer from the server: ${error.message}` }))
  }
  if (isEnvelope(error)) {
    return Effect.fail(new MediagateError({ status: error.code, code: error.code, msg: error.msg, ...(error.data === undefined ? {} : { data: error.data }) }))
  }
  return Effect.fail(new TransportError({ message: String(error) }))
}

/** The innermost message of a fetch failure (`connect ECONNREFUSED 127.0.0.1:8080`). */
const describeCause = (cause: unknown): string | undefined => {
  if (!(cause instanceof Error)) return undefined
  return describeCause(cause.cause) ?? cause.message
}
