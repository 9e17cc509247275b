/**
 * The HTTP contract (spec sections 4, 5 and 7): endpoints, envelope and errors. Handlers
 * live in @mediagate/http; the typed client and the OpenAPI document come from here too.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Either, Option, ParseResult, Schema } from "effect"
import { CurrentAccount } from "../services/Accounts.js"
import { shortened, ValidationError } from "../domain/Errors.js"
import { TaskId } from "../domain/Ids.js"
import { MAX_PROMPT_LENGTH } from "../models/Fields.js"
import { ModelInfo } from "../models/ModelInfo.js"
import { moderationCategories } from "../services/Moderation.js"
import * as OpenApiDocument from "./OpenApiDocument.js"
import type * as Ledger from "../services/Ledger.js"
import * as IdempotencyKeys from "../services/IdempotencyKeys.js"
import { isoTime, Task, TaskStatus } from "../domain/Task.js"
import type * as TaskStore from "../services/TaskStore.js"
import * as UrlPolicy from "../domain/UrlPolicy.js"

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

/** 503: something the request needs is down (the moderation backend); nothing was created. */
export class ServiceUnavailable extends Schema.Class<ServiceUnavailable>("ServiceUnavailable")(
  envelopeError(503, "What is unavailable; nothing was created, and the request may be sent again later."),
  HttpApiSchema.annotations({ status: 503 })
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

/** Bearer-key authentication; provides the caller's account. */
export class Authorization extends HttpApiMiddleware.Tag<Authorization>()("@mediagate/core/Authorization", {
  failure: Unauthorized,
  provides: CurrentAccount,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

/** Decodes a request part with `schema`; the first broken rule becomes a ValidationError `<field> <rule>`. */
const decodeRequest = <A, I>(
  schema: Schema.Schema<A, I>,
  notAnObject: string,
  unexpected: string
) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "first", onExcessProperty: "error" })
  return (input: unknown): Either.Either<A, ValidationError> =>
    Either.mapLeft(decode(input), (error) => {
      const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
      const field = issue?.path.map(String).join(".") ?? ""
      const message = issue === undefined || field === ""
        ? notAnObject
        : issue._tag === "Missing"
        ? `${field} is required`
        : issue._tag === "Unexpected"
        ? `${shortened(field)} ${unexpected}`
        : `${field} ${issue.message}`
      return new ValidationError({ message })
    })
}

/** `is required` for null (JSON's way to leave a field out), else the type's rule. */
const requiredOr = (rule: string) => (issue: ParseResult.ParseIssue) =>
  issue._tag === "Type" && issue.actual === null ? "is required" : rule

/** Longest accepted user_id. */
export const maxUserIdLength = 256

/** `input.prompt` as every model's schema has it (models/Fields.Prompt). */
const promptJsonSchema = {
  type: "string",
  minLength: 1,
  maxLength: MAX_PROMPT_LENGTH,
  pattern: "\\S",
  description: `Text description: not blank, at most ${MAX_PROMPT_LENGTH} characters.`
}

/** Body of POST /api/v1/task/submit (spec 4.1). The model's own rules check `input`. */
export const SubmitRequest = Schema.Struct({
  model: Schema.String.annotations({ message: requiredOr("must be a string") }).pipe(
    Schema.filter((model) => model !== "", { message: () => "is required", jsonSchema: { minLength: 1 } })
  ).annotations({ description: "Model identifier, e.g. alpha-image-2/text-to-image (GET /api/v1/models lists them)." }),
  input: Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
    message: requiredOr("must be an object")
  }).pipe(
    // The task's model is the top-level one; a second `model` inside input would be echoed
    // beside it and could be mistaken for it (see docs/decisions).
    Schema.filter(
      (input) =>
        Object.hasOwn(input, "model")
          ? { path: ["model"], message: "is not a supported field; the model is the top-level model field" }
          : true,
      // What every model's own schema requires of input (GET /api/v1/models has each in full).
      { jsonSchema: { required: ["prompt"], properties: { prompt: promptJsonSchema }, not: { required: ["model"] } } }
    )
  ).annotations({
    description: "Model input. input.prompt is required for every model; other fields are model specific."
  }),
  callBackUrl: Schema.optionalWith(
    Schema.String.annotations({ message: () => "must be a string" }).pipe(
      // The rest of the URL rule (a public host) is the submit policy's (UrlPolicy.checkUrl);
      // the document states all of it.
      Schema.filter((url) => url.length <= UrlPolicy.maxUrlLength, {
        message: () => UrlPolicy.tooLongMessage,
        jsonSchema: { format: "uri", pattern: UrlPolicy.httpUrlPattern, maxLength: UrlPolicy.maxUrlLength }
      })
    ).annotations({
      description:
        `Webhook address (absolute http or https URL on a public host, at most ${UrlPolicy.maxUrlLength} characters); a POST is sent there when the task reaches a terminal state.`
    }),
    { nullable: true }
  ),
  user_id: Schema.optionalWith(
    Schema.String.annotations({ message: () => "must be a string" }).pipe(
      Schema.maxLength(maxUserIdLength, { message: () => `must be at most ${maxUserIdLength} characters` })
    ).annotations({ description: "Caller's user identifier, for tracing." }),
    { nullable: true }
  )
}).annotations({ identifier: "SubmitRequest", description: "null counts as absent for callBackUrl and user_id." })
export type SubmitRequest = typeof SubmitRequest.Type

/** Decodes a submit body: `model is required`, `extra is not a supported field`, ... */
export const decodeSubmitRequest = decodeRequest(SubmitRequest, "request body must be a JSON object", "is not a supported field")

const uuidPattern = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
const uuid = new RegExp(uuidPattern)

/** A task id as a client writes it; UUIDs compare case-insensitively, so it is kept in lower case. */
const LowerCase = Schema.transform(Schema.String, Schema.String, {
  strict: true,
  decode: (id) => id.toLowerCase(),
  encode: (id) => id
})

/** A task id as a client writes it, into the branded id (lower case). */
export const TaskIdFromString = Schema.compose(LowerCase, TaskId)

/**
 * The task id in a path. Its type stays a plain string so typed clients pass what submit
 * returned; the handler brands it. Any string is accepted: an id that names no task is 404.
 */
const TaskIdPath = LowerCase.annotations({ description: "The taskId returned by submit (a UUID; any case)." })

/** A cursor: the next_cursor of a previous page, a task id. */
const Cursor = Schema.String.pipe(
  Schema.filter((cursor) => uuid.test(cursor), { jsonSchema: { format: "uuid" } }),
  Schema.compose(TaskIdFromString)
).annotations({
  message: () => ({ message: "must be a next_cursor from a previous page", override: true }),
  description: "next_cursor of the previous page."
})

/** Most tasks on one page of the list. */
export const maxPageSize = 100

/** Tasks on a page of the list when `limit` is not given. */
export const defaultPageSize = 20

/** A page size, 1 to 100, written in decimal. */
const Limit = Schema.transform(
  Schema.String.pipe(Schema.filter((limit) => /^\d{1,3}$/.test(limit) && Number(limit) >= 1 && Number(limit) <= maxPageSize)),
  Schema.Int,
  { strict: true, decode: Number, encode: String }
).annotations({
  message: () => ({ message: `must be an integer between 1 and ${maxPageSize}`, override: true }),
  description: `Tasks per page, 1 to ${maxPageSize} (default ${defaultPageSize}).`
})

const statusList = TaskStatus.literals.join(", ")
const statusAlternatives = `(${TaskStatus.literals.join("|")})`

/** `status`: one status or several, separated by commas (`SUCCESS,FAILURE`). */
const StatusFilter = Schema.transform(
  Schema.String.pipe(Schema.filter((value) => value.split(",").every((part) => (TaskStatus.literals as ReadonlyArray<string>).includes(part.trim())))),
  Schema.Array(TaskStatus),
  { strict: true, decode: (value) => [...new Set(value.split(",").map((part) => part.trim() as TaskStatus))], encode: (statuses) => statuses.join(",") }
).annotations({
  message: () => ({ message: `must be one or more of ${statusList}, separated by commas`, override: true }),
  description: "Only tasks in these statuses: one, or several separated by commas."
})

/** Longest `model` filter of the list. */
export const maxModelFilterLength = 200

/** `model`: the model id as submitted. */
const ModelFilter = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(maxModelFilterLength)).annotations({
  message: () => ({ message: "must be a model id", override: true }),
  description: "Only tasks of this model (the model id as submitted)."
})

const isoTimestamp = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?([Zz]|[+-]\d{2}:?\d{2}))?$/

/** Epoch milliseconds of an ISO 8601 timestamp with a time zone (or a date: its midnight UTC), if it is one. */
export const parseTimestamp = (value: string): number | undefined => {
  const match = isoTimestamp.exec(value)
  if (match === null) return undefined
  const [, year, month, day, hour = "00", minute = "00", second = "00"] = match
  // Date.parse rolls 2025-02-30 over to March: the parts must be what was written.
  const check = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day), Number(hour), Number(minute), Number(second)))
  if (
    check.getUTCFullYear() !== Number(year) || check.getUTCMonth() + 1 !== Number(month) || check.getUTCDate() !== Number(day) ||
    check.getUTCHours() !== Number(hour) || check.getUTCMinutes() !== Number(minute) || check.getUTCSeconds() !== Number(second)
  ) return undefined
  const zone = match[7]
  const normalized = match[4] === undefined ? `${value}T00:00:00Z` : zone !== undefined && /^[+-]\d{4}$/.test(zone) ? `${value.slice(0, -2)}:${value.slice(-2)}` : value
  const millis = Date.parse(normalized.replace(" ", "T"))
  return Number.isNaN(millis) ? undefined : millis
}

/** An ISO 8601 timestamp, into epoch milliseconds. */
const Timestamp = (description: string) =>
  Schema.transform(
    Schema.String.pipe(Schema.filter((value) => parseTimestamp(value) !== undefined, { jsonSchema: { format: "date-time" } })),
    Schema.Number,
    { strict: true, decode: (value) => parseTimestamp(value)!, encode: (millis) => new Date(millis).toISOString() }
  ).annotations({
    message: () => ({ message: "must be an ISO 8601 timestamp with a time zone, e.g. 2025-01-31T12:00:00Z", override: true }),
    description
  })

/** Query parameters of GET /api/v1/tasks. */
export const ListQuery = Schema.Struct({
  limit: Schema.optionalWith(Limit, { default: () => defaultPageSize }),
  cursor: Schema.optionalWith(Cursor, { as: "Option" }),
  status: Schema.optional(StatusFilter),
  model: Schema.optional(ModelFilter),
  created_after: Schema.optional(Timestamp("Only tasks created after this time (ISO 8601, exclusive).")),
  created_before: Schema.optional(Timestamp("Only tasks created before this time (ISO 8601, exclusive)."))
}).annotations({ identifier: "ListQuery" })
export type ListQuery = typeof ListQuery.Type

const decodeListParams = decodeRequest(ListQuery, "the query string could not be read", "is not a supported parameter")

/** Decodes the list query: each parameter at most once, no others. */
export const decodeListQuery = (params: URLSearchParams): Either.Either<ListQuery, ValidationError> => {
  const repeated = [...new Set(params.keys())].find((name) => params.getAll(name).length > 1)
  if (repeated !== undefined) return Either.left(new ValidationError({ message: `${shortened(repeated)} may be given once` }))
  return decodeListParams(Object.fromEntries(params))
}

/** Longest wait a query may ask for, in seconds. */
export const maxWaitSeconds = 60

/**
 * The `wait` parameter of the task query: seconds to hold the answer until the task ends,
 * 1 to 60; absent when not given. Other parameters are left alone, as the query always did.
 */
export const decodeWait = (params: URLSearchParams): Either.Either<Option.Option<number>, ValidationError> => {
  const given = params.getAll("wait")
  if (given.length === 0) return Either.right(Option.none())
  if (given.length > 1) return Either.left(new ValidationError({ message: "wait may be given once" }))
  const value = given[0]!
  return /^\d{1,2}$/.test(value) && Number(value) >= 1 && Number(value) <= maxWaitSeconds
    ? Either.right(Option.some(Number(value)))
    : Either.left(new ValidationError({ message: `wait must be an integer number of seconds between 1 and ${maxWaitSeconds}` }))
}

/**
 * The Idempotency-Key header as IdempotencyKeys.parseKey takes it, as a JSON Schema pattern:
 * a quoted string (escapes `\"` and `\\` count as one character) or a bare value, either
 * way 1 to 255 visible ASCII characters or spaces. A bare value that starts and ends with a
 * quote is read as a quoted string.
 */
const idempotencyKeyPattern = String.raw`^(?:"(?:[ !#-\[\]-~]|\\["\\]){1,${IdempotencyKeys.maxKeyLength}}"|(?!".*"$)[ -~]{1,${IdempotencyKeys.maxKeyLength}})$`

/** The Idempotency-Key header of submit, if given: 400 when it is empty, too long or malformed. */
export const decodeIdempotencyKey = (header: string | undefined): Either.Either<Option.Option<string>, ValidationError> => {
  if (header === undefined) return Either.right(Option.none())
  const parsed = IdempotencyKeys.parseKey(header)
  return "key" in parsed ? Either.right(Option.some(parsed.key)) : Either.left(new ValidationError({ message: parsed.problem }))
}

const okSchema = <S extends Schema.Schema.Any>(data: S) =>
  Schema.Struct({ code: Schema.Literal(0), msg: Schema.Literal("ok"), data })

/** The envelope of every success answer (and of callbacks). */
export const ok = <A>(data: A) => ({ code: 0, msg: "ok", data }) as const

/** 200 answer of submit. */
export const SubmitResponse = okSchema(Schema.Struct({ taskId: Schema.String })).annotations({ identifier: "SubmitResponse" })

/** 200 answer of query. */
export const TaskResponse = okSchema(Task).annotations({ identifier: "TaskResponse" })

/** 200 answer of the task list. */
export const TaskListResponse = okSchema(Schema.Struct({ tasks: Schema.Array(Task), next_cursor: Schema.NullOr(Schema.String) }))
  .annotations({ identifier: "TaskListResponse" })

/** An OpenAPI operation with `parameter` added to those HttpApi derived (a path's taskId). */
const withParameters = (parameter: Record<string, unknown>) => (operation: Record<string, unknown>) => ({
  ...operation,
  parameters: [...((operation["parameters"] as ReadonlyArray<unknown> | undefined) ?? []), parameter]
})

/** The task endpoints. */
export class TasksGroup extends HttpApiGroup.make("tasks")
  .add(
    HttpApiEndpoint.post("submit", "/task/submit")
      .setPayload(SubmitRequest)
      .addSuccess(SubmitResponse)
      .addError(BadRequest)
      .addError(ModerationRejectedResponse)
      .addError(Conflict)
      .addError(PayloadTooLarge)
      .addError(UnprocessableEntity)
      .addError(ServiceUnavailable)
      .annotate(OpenApi.Summary, "Submit a task")
      .annotate(OpenApi.Transform, withParameters({
          name: "Idempotency-Key",
          in: "header",
          required: false,
          description:
            "Additive: 1 to 255 characters, bare or as a quoted string. The same key and body from the same account within 24 hours answer the same task; the same key with another body is 422; while its first request is processed, 409.",
          schema: { type: "string", pattern: idempotencyKeyPattern }
        }))
  )
  .add(
    // The query parameters (ListQuery) are decoded by the handler, so that a malformed one
    // is our 400; the document lists them by hand.
    HttpApiEndpoint.get("list", "/tasks")
      .addSuccess(TaskListResponse)
      .addError(BadRequest)
      .annotate(OpenApi.Summary, "List your tasks, newest first (additive: not in the spec)")
      .annotate(OpenApi.Override, {
        description:
          "Each parameter may be given once; a parameter not listed here, or one given twice, is refused with 400.",
        parameters: [
          {
            name: "limit",
            in: "query",
            required: false,
            description: `Tasks per page, 1 to ${maxPageSize} (default ${defaultPageSize}), in decimal digits.`,
            schema: { type: "integer", minimum: 1, maximum: maxPageSize, default: defaultPageSize }
          },
          {
            name: "cursor",
            in: "query",
            required: false,
            description: "next_cursor of the previous page (with the same filters).",
            schema: { type: "string", format: "uuid", pattern: uuidPattern }
          },
          {
            name: "status",
            in: "query",
            required: false,
            description: "Only tasks in these statuses, separated by commas (SUCCESS,FAILURE).",
            schema: { type: "string", pattern: `^\\s*${statusAlternatives}\\s*(,\\s*${statusAlternatives}\\s*)*$` }
          },
          {
            name: "model",
            in: "query",
            required: false,
            description: "Only tasks of this model (the id as submitted).",
            schema: { type: "string", minLength: 1, maxLength: maxModelFilterLength }
          },
          {
            name: "created_after",
            in: "query",
            required: false,
            description: "Only tasks created after this time (ISO 8601 with a time zone, or a date: its midnight UTC; exclusive).",
            schema: { type: "string", pattern: isoTimestamp.source }
          },
          {
            name: "created_before",
            in: "query",
            required: false,
            description: "Only tasks created before this time (ISO 8601 with a time zone, or a date: its midnight UTC; exclusive).",
            schema: { type: "string", pattern: isoTimestamp.source }
          }
        ]
      })
  )
  .add(
    HttpApiEndpoint.post("cancel", "/task/:taskId/cancel")
      .setPath(Schema.Struct({ taskId: TaskIdPath }))
      .addSuccess(TaskResponse)
      .addError(NotFound)
      .addError(Conflict)
      .annotate(OpenApi.Summary, "Cancel a task that has not ended (additive: not in the spec)")
  )
  .add(
    HttpApiEndpoint.get("events", "/task/:taskId/events")
      .setPath(Schema.Struct({ taskId: TaskIdPath }))
      .addSuccess(Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" })).annotations({
        description:
          "Server-sent events: a `task` event whose data is the task (as `data` of the query answer) at once and after every change of status, then the stream ends after a terminal status; a `: keep-alive` comment every 15 seconds."
      }))
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Follow a task as it changes, as server-sent events (additive: not in the spec)")
  )
  .add(
    // `wait` is decoded by the handler (our 400), so the document lists it by hand.
    HttpApiEndpoint.get("query", "/task/:taskId")
      .setPath(Schema.Struct({ taskId: TaskIdPath }))
      .addSuccess(TaskResponse)
      .addError(BadRequest)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Query a task")
      .annotate(OpenApi.Transform, withParameters({
          name: "wait",
          in: "query",
          required: false,
          description:
            "Additive: hold the answer up to this many seconds (1 to 60) until the task ends; the answer comes as soon as it does, or after the wait with the task as it is then.",
          schema: { type: "integer", minimum: 1, maximum: maxWaitSeconds }
        }))
  )
  .middleware(Authorization)
  .prefix("/api/v1")
{}

/** One attempt to deliver a callback, as the callbacks endpoint shows it. */
export const CallbackAttempt = Schema.Struct({
  attempt: Schema.Int.annotations({ description: "1 for the first; a redelivery carries the numbering on." }),
  at: Schema.String.annotations({ description: "When the attempt ended (ISO 8601 UTC)." }),
  status_code: Schema.NullOr(Schema.Int).annotations({ description: "The receiver's HTTP status; null when there was no answer." }),
  latency_ms: Schema.Int.annotations({ description: "From sending the request to its answer or failure." }),
  error: Schema.NullOr(Schema.String).annotations({
    description: "Why the attempt did not deliver (`HTTP 500`, `no answer within 15s`, ...); null when it did."
  })
}).annotations({ identifier: "CallbackAttempt" })

/** A task's callback and its delivery, as the callbacks endpoint shows it. */
export const Callback = Schema.Struct({
  id: Schema.String.annotations({ description: "The callback's webhook-id, the same on every attempt and redelivery." }),
  url: Schema.String.annotations({ description: "Where it is sent: the task's callBackUrl." }),
  created_at: Schema.String.annotations({ description: "When the task ended and the callback became owed (ISO 8601 UTC)." }),
  status: Schema.Literal("pending", "delivered", "failed").annotations({
    description: "pending: an attempt is due at next_attempt_at; delivered: a 2xx answer; failed: given up (410 Gone or the retry schedule used up)."
  }),
  next_attempt_at: Schema.NullOr(Schema.String).annotations({ description: "When the next attempt is due; null unless pending." }),
  attempts: Schema.Array(CallbackAttempt).annotations({ description: "Every attempt, oldest first." })
}).annotations({ identifier: "Callback" })

/** A callback and its attempts in the shape the callbacks endpoint shows. */
export const callbackWire = (
  callback: TaskStore.CallbackState,
  attempts: ReadonlyArray<TaskStore.CallbackAttempt>
): typeof Callback.Type => ({
  id: callback.id,
  url: callback.url,
  created_at: isoTime(callback.createdAt),
  status: callback.status,
  next_attempt_at: callback.nextAttemptAt === null ? null : isoTime(callback.nextAttemptAt),
  attempts: attempts.map((attempt) => ({
    attempt: attempt.attempt,
    at: isoTime(attempt.at),
    status_code: attempt.status,
    latency_ms: Math.round(attempt.durationMs),
    error: attempt.error
  }))
})

/** 200 answer of the callbacks endpoints. */
export const CallbacksResponse = okSchema(Schema.Struct({ callbacks: Schema.Array(Callback) })).annotations({ identifier: "CallbacksResponse" })

/** A task's callbacks: their deliveries, and a redelivery on demand (additive: not in the spec). */
export class CallbacksGroup extends HttpApiGroup.make("callbacks")
  .add(
    HttpApiEndpoint.get("callbacks", "/task/:taskId/callbacks")
      .setPath(Schema.Struct({ taskId: TaskIdPath }))
      .addSuccess(CallbacksResponse)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "A task's callbacks and every delivery attempt (additive: not in the spec)")
  )
  .add(
    HttpApiEndpoint.post("redeliver", "/task/:taskId/callbacks/redeliver")
      .setPath(Schema.Struct({ taskId: TaskIdPath }))
      .addSuccess(CallbacksResponse)
      .addError(NotFound)
      .addError(Conflict)
      .annotate(OpenApi.Summary, "Send an ended task's callback again, now, with the same webhook-id (additive: not in the spec)")
  )
  .middleware(Authorization)
  .prefix("/api/v1")
{}

/** 200 answer of the catalog. */
export const ModelsResponse = okSchema(Schema.Struct({ models: Schema.Array(ModelInfo) })).annotations({ identifier: "ModelsResponse" })

/** The model catalog (additive: not in the spec). */
export class CatalogGroup extends HttpApiGroup.make("catalog")
  .add(
    HttpApiEndpoint.get("models", "/models")
      .addSuccess(ModelsResponse)
      .annotate(OpenApi.Summary, "List the models with the JSON Schema of their input")
  )
  .middleware(Authorization)
  .prefix("/api/v1")
{}

/** A movement of credits as the account endpoint shows it. */
export const LedgerEntry = Schema.Struct({
  id: Schema.String,
  kind: Schema.Literal("credit", "reserve", "charge", "release"),
  /** The task the movement is for; null for credits. */
  task_id: Schema.NullOr(Schema.String),
  amount_micro_usd: Schema.Int.annotations({ description: "What the entry adds to the balance (negative for a charge)." }),
  held_micro_usd: Schema.Int.annotations({ description: "What the entry adds to the reserved sum (negative when a reservation ends)." }),
  created_at: Schema.String,
  note: Schema.NullOr(Schema.String)
}).annotations({ identifier: "LedgerEntry" })

/** A ledger entry in the shape the account endpoint (and the admin CLI's --json) shows. */
export const ledgerEntryWire = (entry: Ledger.LedgerEntry): typeof LedgerEntry.Type => ({
  id: entry.id,
  kind: entry.kind,
  task_id: entry.taskId,
  amount_micro_usd: entry.amount,
  held_micro_usd: entry.held,
  created_at: isoTime(entry.at),
  note: entry.note
})

/** Most entries the account endpoint shows. */
export const accountEntries = 20

/** 200 answer of the account endpoint. */
export const AccountResponse = okSchema(Schema.Struct({
  account_id: Schema.String,
  name: Schema.String,
  balance_micro_usd: Schema.Int.annotations({ description: "Credits held for the account: the sum of every entry's amount." }),
  reserved_micro_usd: Schema.Int.annotations({ description: "The part of the balance held for tasks that have not ended." }),
  available_micro_usd: Schema.Int.annotations({ description: "What new tasks may reserve: balance minus reserved." }),
  entries: Schema.Array(LedgerEntry).annotations({ description: `The latest ${accountEntries} movements, newest first.` })
})).annotations({ identifier: "AccountResponse" })

/** The calling account (additive: not in the spec). */
export class AccountGroup extends HttpApiGroup.make("account")
  .add(
    HttpApiEndpoint.get("account", "/account")
      .addSuccess(AccountResponse)
      .annotate(OpenApi.Summary, "Your balance, reserved credits and latest ledger entries (additive: not in the spec)")
  )
  .middleware(Authorization)
  .prefix("/api/v1")
{}

/** The whole mediagate API. */
export class MediagateApi extends HttpApi.make("mediagate")
  .add(TasksGroup)
  .add(CallbacksGroup)
  .add(CatalogGroup)
  .add(AccountGroup)
  // Every endpoint is authenticated, and the limits run before authentication (HTTP layer).
  .addError(TooManyRequests)
  .addError(InternalServerError)
  // Answered for a wrong method on a known path, which no endpoint describes.
  .annotate(HttpApi.AdditionalSchemas, [MethodNotAllowed])
  .annotate(OpenApi.Transform, (spec) => OpenApiDocument.clean(spec as OpenApi.OpenAPISpec))
  .annotate(OpenApi.Title, "mediagate")
  .annotate(OpenApi.Description, "Asynchronous media generation: one submit endpoint and one query endpoint.")
{}
