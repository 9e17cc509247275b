/**
 * A receiver's check of a mediagate callback: its Standard Webhooks signature
 * (`StandardWebhooks.check`) and its body, the query answer's envelope. Here, beside the
 * contract, so that the client re-exports it without depending on the scheduler that signs.
 */
import { Clock, Duration, Effect, Either, Schema } from "effect"
import * as StandardWebhooks from "../domain/StandardWebhooks.js"
import { CallbackEvent, type Task } from "../domain/Task.js"
import { TaskResponse } from "./Api.js"

/** Why a callback was refused; `message` says it in a sentence. */
export class CallbackVerificationError extends Schema.TaggedError<CallbackVerificationError>()("CallbackVerificationError", {
  reason: Schema.Literal(
    /** The signature's refusals: `StandardWebhooks.Refusal`. */
    ...StandardWebhooks.Refusal.literals,
    /** Genuine, but the body is not a mediagate callback (`{ code: 0, msg: "ok", data: <task> }`). */
    "InvalidBody"
  ),
  message: Schema.String
}) {}

/** Request headers as node:http gives them (names in lower case), a plain record, or a fetch `Headers`. */
export type CallbackHeaders = StandardWebhooks.Headers

/** Options of `verifyCallback`. */
export interface VerifyOptions {
  /** How far `webhook-timestamp` may be from now, either way. Default 5 minutes. */
  readonly tolerance?: Duration.DurationInput
  /** The time to check the timestamp against, in epoch milliseconds (tests). Default: the wall clock. */
  readonly now?: number
}

/** A callback's body: the query answer's envelope, and the event of a task submitted with `callBackEvents`. */
const CallbackBody = Schema.extend(TaskResponse, Schema.Struct({ event: Schema.optional(Schema.Unknown) }))

const decodeBody = Schema.decodeUnknownEither(Schema.parseJson(CallbackBody), { onExcessProperty: "preserve" })

const utf8 = new TextDecoder("utf-8", { ignoreBOM: true })

/** The signature checked, then the body decoded, once: what both `verifyCallback` and `verifyCallbackEvent` read. */
const verifiedBody = (
  secret: string | ReadonlyArray<string>,
  headers: CallbackHeaders,
  body: string | Uint8Array,
  options: VerifyOptions
): Either.Either<typeof CallbackBody.Type, CallbackVerificationError> =>
  Either.flatMap(
    // A receiver's check, outside any Effect runtime: the wall clock unless told (verifyCallbackEffect reads the Clock).
    Either.mapLeft(
      StandardWebhooks.check(secret, headers, body, { now: options.now ?? Date.now(), tolerance: options.tolerance }),
      (refused) => new CallbackVerificationError(refused)
    ),
    () =>
      Either.mapLeft(
        decodeBody(typeof body === "string" ? body : utf8.decode(body)),
        () => new CallbackVerificationError({ reason: "InvalidBody", message: "the body is not a mediagate callback" })
      )
  )

/**
 * Checks a callback as a receiver gets it, per Standard Webhooks: the three headers are
 * there, the timestamp is within `tolerance` of now (5 minutes by default), and one of the
 * `v1` signatures in `webhook-signature` (space-separated: during a secret rotation there are
 * two) is the HMAC of the raw body under one of the given secrets, compared in constant time.
 * Answers the task the callback carries, or why it was refused. Pass the body exactly as
 * received: parsed and serialised again it no longer matches its signature.
 */
export const verifyCallback = (
  secret: string | ReadonlyArray<string>,
  headers: CallbackHeaders,
  body: string | Uint8Array,
  options: VerifyOptions = {}
): Either.Either<Task, CallbackVerificationError> => Either.map(verifiedBody(secret, headers, body, options), (decoded) => decoded.data)

/** A verified callback: the task it carries, and its event (null for the default callback, which has none). */
export interface VerifiedCallback {
  readonly event: CallbackEvent | null
  readonly task: Task
}

const isCallbackEvent = Schema.is(CallbackEvent)

/**
 * `verifyCallback` for a receiver of callback events (a submit with `callBackEvents`): the
 * same checks, answering the event (`started`, `progress`, `completed`) beside the task.
 */
export const verifyCallbackEvent = (
  secret: string | ReadonlyArray<string>,
  headers: CallbackHeaders,
  body: string | Uint8Array,
  options: VerifyOptions = {}
): Either.Either<VerifiedCallback, CallbackVerificationError> =>
  // The event read from the envelope as decoded (the body is parsed once); one this version
  // does not know is no event.
  Either.map(verifiedBody(secret, headers, body, options), (decoded) => ({
    event: isCallbackEvent(decoded.event) ? decoded.event : null,
    task: decoded.data
  }))

/** `verifyCallback` with the time from the Clock in context (TestClock in tests). */
export const verifyCallbackEffect = (
  secret: string | ReadonlyArray<string>,
  headers: CallbackHeaders,
  body: string | Uint8Array,
  options: Omit<VerifyOptions, "now"> = {}
): Effect.Effect<Task, CallbackVerificationError> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => verifyCallback(secret, headers, body, { ...options, now }))
