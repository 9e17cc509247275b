/**
 * The envelope of every answer (spec section 7): `{code, msg, data}`, with one class per
 * error status the API gives, each annotated with its HTTP status.
 */
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"
import { moderationCategories } from "../services/Moderation.js"

const envelopeError = <const Code extends number>(code: Code, description: string) =>
  ({
    code: Schema.Literal(code),
    msg: Schema.String.annotations({ description }),
    data: Schema.optional(Schema.Unknown)
  }) as const

/** 400: the request broke a rule; `msg` names the field and the rule. */
export class BadRequest extends Schema.Class<BadRequest>("BadRequest")(
  envelopeError(400, "What is wrong with the request, naming the field and the rule."),
  HttpApiSchema.annotations({ status: 400 })
) {}

/** The 13 category flags of a moderation answer: a category the moderator did not name is false. */
export const moderationCategoryFlags = (
  categories: Readonly<Record<string, boolean>>
): Record<typeof moderationCategories[number], boolean> =>
  Object.fromEntries(moderationCategories.map((category) => [category, categories[category] === true])) as Record<
    typeof moderationCategories[number],
    boolean
  >

/** 400: pre-submission moderation rejected the prompt. */
export class ModerationRejectedResponse extends Schema.Class<ModerationRejectedResponse>("ModerationRejected")(
  {
    code: Schema.Literal(400),
    msg: Schema.Literal("content rejected by moderation"),
    data: Schema.Struct({
      flagged: Schema.Boolean,
      categories: Schema.Struct(
        Object.fromEntries(moderationCategories.map((category) => [category, Schema.Boolean])) as Record<
          typeof moderationCategories[number],
          typeof Schema.Boolean
        >
      )
    })
  },
  HttpApiSchema.annotations({ status: 400 })
) {}

/** 401: missing or invalid bearer key. */
export class Unauthorized extends Schema.Class<Unauthorized>("Unauthorized")(
  envelopeError(401, "Always 'unauthorized'."),
  HttpApiSchema.annotations({ status: 401 })
) {}

/**
 * 403: the key is known but may not do this: a customer key on an admin path, an admin key
 * on a customer path, or a scoped key's rule (a model it may not use, its monthly cap
 * spent); the message names the rule.
 */
export class Forbidden extends Schema.Class<Forbidden>("Forbidden")(
  envelopeError(403, "The rule that refused the request."),
  HttpApiSchema.annotations({ status: 403 })
) {}

/** 404: unknown task (msg 'task not found') or unknown route. */
export class NotFound extends Schema.Class<NotFound>("NotFound")(
  envelopeError(404, "'task not found' for an unknown task."),
  HttpApiSchema.annotations({ status: 404 })
) {}

/** 405: the path exists but does not take this method; the `Allow` header lists those it takes. */
export class MethodNotAllowed extends Schema.Class<MethodNotAllowed>("MethodNotAllowed")(
  envelopeError(405, "Which methods the path takes (also in the Allow header)."),
  HttpApiSchema.annotations({ status: 405 })
) {}

/** 409: the request conflicts with the task's state (cancelling a finished task, redelivering an unfinished one's callback). */
export class Conflict extends Schema.Class<Conflict>("Conflict")(
  envelopeError(409, "Why the task's state does not allow it."),
  HttpApiSchema.annotations({ status: 409 })
) {}

/** 422: an Idempotency-Key sent again with a different request body. */
export class UnprocessableEntity extends Schema.Class<UnprocessableEntity>("UnprocessableEntity")(
  envelopeError(422, "Why the request cannot be processed as sent (an Idempotency-Key reused with another body)."),
  HttpApiSchema.annotations({ status: 422 })
) {}

/**
 * 503: something the request needs is down for a while: the moderation backend (nothing was
 * created) or the database. The `Retry-After` header gives the seconds to wait
 * (OpenApiDocument declares it).
 */
export class ServiceUnavailable extends Schema.Class<ServiceUnavailable>("ServiceUnavailable")(
  envelopeError(
    503,
    "What is unavailable (the moderation backend, the database); send the request again after the seconds of the Retry-After header. " +
      "A submit refused by moderation created nothing; one that lost the database may have been stored, so send it again with the same Idempotency-Key."
  ),
  HttpApiSchema.annotations({ status: 503 })
) {}

/**
 * 408: the request's body did not arrive within its deadline (10 seconds by default); the
 * connection is closed and nothing of the request was used.
 */
export class RequestTimeout extends Schema.Class<RequestTimeout>("RequestTimeout")(
  envelopeError(408, "The request took too long to arrive; nothing of it was used."),
  HttpApiSchema.annotations({ status: 408 })
) {}

/** 415: an uploaded file of a type no model takes; the message names what was found. */
export class UnsupportedMediaType extends Schema.Class<UnsupportedMediaType>("UnsupportedMediaType")(
  envelopeError(415, "What the file is, and the types an upload may be."),
  HttpApiSchema.annotations({ status: 415 })
) {}

/** 413: request body over the limit. */
export class PayloadTooLarge extends Schema.Class<PayloadTooLarge>("PayloadTooLarge")(
  envelopeError(413, "The body limit."),
  HttpApiSchema.annotations({ status: 413 })
) {}

/**
 * 429: a limit was reached before the request was looked at: the key's rate, the requests
 * it holds open (events, `?wait=`), or failed authentications from the client's address.
 * The `Retry-After` header gives the seconds to wait (OpenApiDocument declares it).
 */
export class TooManyRequests extends Schema.Class<TooManyRequests>("TooManyRequests")(
  envelopeError(429, "Which limit was reached; try again after the seconds of the Retry-After header."),
  HttpApiSchema.annotations({ status: 429 })
) {}

/** 500: something failed on our side; the cause is logged, never returned. */
export class InternalServerError extends Schema.Class<InternalServerError>("InternalServerError")(
  envelopeError(500, "Always 'internal server error'."),
  HttpApiSchema.annotations({ status: 500 })
) {}

/** The envelope of every error answer. */
export const errorEnvelope = (code: number, msg: string, data?: unknown) =>
  data === undefined ? { code, msg } : { code, msg, data }

/** Shorthands for the fixed messages. */
export const unauthorized = () => new Unauthorized({ code: 401, msg: "unauthorized" })
export const taskNotFound = () => new NotFound({ code: 404, msg: "task not found" })
export const internalError = () => new InternalServerError({ code: 500, msg: "internal server error" })

/** The success envelope around `data`, as a Schema. */
export const okSchema = <S extends Schema.Schema.Any>(data: S) =>
  Schema.Struct({ code: Schema.Literal(0), msg: Schema.Literal("ok"), data })

/** The envelope of every success answer (and of callbacks). */
export const ok = <A>(data: A) => ({ code: 0, msg: "ok", data }) as const
