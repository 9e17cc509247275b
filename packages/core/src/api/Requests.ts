/**
 * What requests carry, as Schemas the endpoints declare (spec 4.1 and 4.2, and the additive
 * list): the submit body and its Idempotency-Key header, the query's `wait`, the list's
 * filters, a path's task id. The OpenAPI document is derived from them. Each broken rule
 * becomes one 400 whose `msg` names the field and the rule, whoever decoded it: HttpApi
 * (`decodeFailure`) or the submit handler (`decodeSubmitRequest`).
 */
import type * as HttpApiError from "@effect/platform/HttpApiError"
import { Either, Option, ParseResult, Schema } from "effect"
import { shortened, ValidationError } from "../domain/Errors.js"
import { TaskId } from "../domain/Ids.js"
import { CallbackEvent, TaskStatus } from "../domain/Task.js"
import * as UrlPolicy from "../domain/UrlPolicy.js"
import { MAX_PROMPT_LENGTH } from "../models/Fields.js"
import * as IdempotencyKeys from "../services/IdempotencyKeys.js"
import { BadRequest } from "./Envelope.js"

/** How a part of the request names itself when it is not an object at all, and a key it does not take. */
interface Part {
  readonly whole: string
  readonly unexpected: string
}

const body: Part = { whole: "request body must be a JSON object", unexpected: "is not a supported field" }
const query: Part = { whole: "the query string could not be read", unexpected: "is not a supported parameter" }

/** The message of the first broken rule: `<field> is required`, `<field> <rule>`, ... */
const messageOf = (issue: ParseResult.ArrayFormatterIssue | undefined, part: Part): string => {
  const field = issue?.path.map(String).join(".") ?? ""
  return issue === undefined || field === ""
    ? part.whole
    : issue._tag === "Missing"
    ? `${field} is required`
    : issue._tag === "Unexpected"
    ? `${shortened(field)} ${part.unexpected}`
    : `${field} ${issue.message}`
}

/** The first broken rule only, and a key the schema does not name is one. */
export const strict = { parseOptions: { errors: "first", onExcessProperty: "error" } } as const

/** `is required` for null (JSON's way to leave a field out), else the type's rule. */
const requiredOr = (rule: string) => (issue: ParseResult.ParseIssue) =>
  issue._tag === "Type" && issue.actual === null ? "is required" : rule

/**
 * A query parameter's rule. A parameter given twice reaches the schema as an array of its
 * values, and is told so.
 */
export const parameterRule = (rule: string) => (issue: ParseResult.ParseIssue) => ({
  message: Array.isArray(issue.actual) ? "may be given once" : rule,
  override: true
})

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
  callBackEvents: Schema.optionalWith(
    Schema.Array(
      CallbackEvent.annotations({
        message: () => ({ message: `must be one of ${CallbackEvent.literals.map((event) => `"${event}"`).join(", ")}`, override: true })
      })
    ).annotations({ message: () => "must be an array of event names" }).pipe(
      Schema.filter((events) => events.includes("completed"), {
        message: () => `must include "completed": the terminal callback is always sent`,
        jsonSchema: { contains: { const: "completed" } }
      })
    ).annotations({
      description:
        "Additive: the callbacks to send to callBackUrl (which it needs), modelled on Replicate's webhook_events_filter. " +
        "started: the upstream took the job; progress: its progress changed (at most one per 2 s per task); " +
        "completed: the terminal state, always included. Every callback of such a task has an `event` field beside code, msg and data. " +
        "Without it, one callback is sent at the terminal state, with the spec's body."
    }),
    { nullable: true }
  ),
  user_id: Schema.optionalWith(
    Schema.String.annotations({ message: () => "must be a string" }).pipe(
      Schema.maxLength(maxUserIdLength, { message: () => `must be at most ${maxUserIdLength} characters` })
    ).annotations({ description: "Caller's user identifier, for tracing." }),
    { nullable: true }
  )
}).annotations({
  identifier: "SubmitRequest",
  description: "null counts as absent for callBackUrl, callBackEvents and user_id.",
  // callBackEvents needs a callBackUrl (TaskService.prepare says so in a 400).
  jsonSchema: { dependentRequired: { callBackEvents: ["callBackUrl"] } },
  ...strict
})
export type SubmitRequest = typeof SubmitRequest.Type

const decodeSubmit = Schema.decodeUnknownEither(SubmitRequest)

/**
 * Decodes a submit body (`model is required`, `extra is not a supported field`, ...). The
 * submit handler reads the body itself (size and depth limits, broken JSON is a 400), then
 * decodes it here; the typed client checks a body with it before sending.
 */
export const decodeSubmitRequest = (input: unknown): Either.Either<SubmitRequest, ValidationError> =>
  Either.mapLeft(decodeSubmit(input), (error) =>
    new ValidationError({ message: messageOf(ParseResult.ArrayFormatter.formatErrorSync(error)[0], body) }))

/**
 * Decodes a JSON body read by its handler (the admin API's) with `schema`, each broken rule
 * one message that names the field, as submit's body is decoded.
 */
export const decodeBodyWith = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknownEither(schema, strict.parseOptions)
  return (input: unknown): Either.Either<A, ValidationError> =>
    Either.mapLeft(decode(input), (error) => new ValidationError({ message: messageOf(ParseResult.ArrayFormatter.formatErrorSync(error)[0], body) }))
}

/**
 * The Idempotency-Key header as IdempotencyKeys.parseKey takes it, as a JSON Schema pattern:
 * a quoted string (escapes `\"` and `\\` count as one character) or a bare value, either
 * way 1 to 255 visible ASCII characters or spaces. A bare value that starts and ends with a
 * quote is read as a quoted string.
 */
const idempotencyKeyPattern = String.raw`^(?:"(?:[ !#-\[\]-~]|\\["\\]){1,${IdempotencyKeys.maxKeyLength}}"|(?!".*"$)[ -~]{1,${IdempotencyKeys.maxKeyLength}})$`

/** The Idempotency-Key header, into the key it names; its rule's message names the header. */
const IdempotencyKey = Schema.transformOrFail(Schema.String, Schema.String, {
  strict: true,
  decode: (header, _, ast) => {
    const parsed = IdempotencyKeys.parseKey(header)
    return "key" in parsed ? ParseResult.succeed(parsed.key) : ParseResult.fail(new ParseResult.Type(ast, header, parsed.problem))
  },
  encode: ParseResult.succeed
}).annotations({
  jsonSchema: {
    type: "string",
    pattern: idempotencyKeyPattern,
    description:
      "Additive: 1 to 255 characters, bare or as a quoted string. The same key and body from the same account within 24 hours answer the same task; the same key with another body is 422; while its first request is processed, 409."
  }
})

/** Headers of submit (names in lower case, as HTTP/1 servers hand them over). */
export const SubmitHeaders = Schema.Struct({
  "idempotency-key": Schema.optional(IdempotencyKey)
})

const headerNames: ReadonlySet<string> = new Set(Object.keys(SubmitHeaders.fields))

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
export const TaskIdPath = LowerCase.annotations({ description: "The taskId returned by submit (a UUID; any case)." })

/** Longest wait a query may ask for, in seconds. */
export const maxWaitSeconds = 60

/** `wait`: seconds to hold the answer of a query until the task ends, 1 to 60, in decimal digits. */
const Wait = Schema.transform(
  Schema.String.pipe(Schema.filter((wait) => /^\d{1,2}$/.test(wait) && Number(wait) >= 1 && Number(wait) <= maxWaitSeconds)),
  Schema.Int,
  { strict: true, decode: Number, encode: String }
).annotations({
  message: parameterRule(`must be an integer number of seconds between 1 and ${maxWaitSeconds}`),
  jsonSchema: {
    type: "integer",
    minimum: 1,
    maximum: maxWaitSeconds,
    description:
      `Additive: hold the answer up to this many seconds (1 to ${maxWaitSeconds}) until the task ends; the answer comes as soon as it does, or after the wait with the task as it is then.`
  }
})

/** Query parameters of GET /api/v1/task/{taskId}. Others are ignored, as they always were. */
export const QueryParams = Schema.Struct({ wait: Schema.optional(Wait) })
export type QueryParams = typeof QueryParams.Type

/** A cursor: the next_cursor of a previous page, a task id. */
const Cursor = Schema.String.pipe(
  Schema.filter((cursor) => uuid.test(cursor), { jsonSchema: { format: "uuid", pattern: uuidPattern } }),
  Schema.compose(TaskIdFromString)
).annotations({
  message: parameterRule("must be a next_cursor from a previous page"),
  description: "next_cursor of the previous page (with the same filters)."
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
  message: parameterRule(`must be an integer between 1 and ${maxPageSize}`),
  jsonSchema: {
    type: "integer",
    minimum: 1,
    maximum: maxPageSize,
    default: defaultPageSize,
    description: `Tasks per page, 1 to ${maxPageSize} (default ${defaultPageSize}), in decimal digits.`
  }
})

const statusList = TaskStatus.literals.join(", ")
const statusAlternatives = `(${TaskStatus.literals.join("|")})`

/** `status`: one status or several, separated by commas (`SUCCESS,FAILURE`). */
const StatusFilter = Schema.transform(
  Schema.String.pipe(Schema.filter(
    (value) => value.split(",").every((part) => (TaskStatus.literals as ReadonlyArray<string>).includes(part.trim())),
    { jsonSchema: { pattern: `^\\s*${statusAlternatives}\\s*(,\\s*${statusAlternatives}\\s*)*$` } }
  )),
  Schema.Array(TaskStatus),
  { strict: true, decode: (value) => [...new Set(value.split(",").map((part) => part.trim() as TaskStatus))], encode: (statuses) => statuses.join(",") }
).annotations({
  message: parameterRule(`must be one or more of ${statusList}, separated by commas`),
  description: "Only tasks in these statuses, separated by commas (SUCCESS,FAILURE)."
})

/** Longest `model` filter of the list. */
export const maxModelFilterLength = 200

/** `model`: the model id as submitted. */
const ModelFilter = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(maxModelFilterLength)).annotations({
  message: parameterRule("must be a model id"),
  description: "Only tasks of this model (the id as submitted)."
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
    Schema.String.pipe(Schema.filter((value) => parseTimestamp(value) !== undefined, { jsonSchema: { pattern: isoTimestamp.source } })),
    Schema.Number,
    { strict: true, decode: (value) => parseTimestamp(value)!, encode: (millis) => new Date(millis).toISOString() }
  ).annotations({
    message: parameterRule("must be an ISO 8601 timestamp with a time zone, e.g. 2025-01-31T12:00:00Z"),
    description
  })

/**
 * Query parameters of GET /api/v1/tasks: each at most once, no others. All optional, so a
 * typed client sends only those it names.
 */
export const ListParams = Schema.Struct({
  limit: Schema.optional(Limit),
  cursor: Schema.optional(Cursor),
  status: Schema.optional(StatusFilter),
  model: Schema.optional(ModelFilter),
  created_after: Schema.optional(
    Timestamp("Only tasks created after this time (ISO 8601 with a time zone, or a date: its midnight UTC; exclusive).")
  ),
  created_before: Schema.optional(
    Timestamp("Only tasks created before this time (ISO 8601 with a time zone, or a date: its midnight UTC; exclusive).")
  )
}).annotations(strict)
export type ListParams = typeof ListParams.Type

/** What the list use case takes: the parameters with the page size's default in place. */
export interface ListQuery extends Omit<ListParams, "limit" | "cursor"> {
  readonly limit: number
  readonly cursor: Option.Option<TaskId>
}

/** The list's parameters as the use case takes them. */
export const listQuery = ({ cursor, limit, ...filters }: ListParams): ListQuery => ({
  ...filters,
  limit: limit ?? defaultPageSize,
  cursor: Option.fromNullable(cursor)
})

/**
 * The 400 of a request HttpApi could not decode, in the envelope. HttpApi does not say which
 * part of the request failed: a header's rule names the header itself (`Idempotency-Key must
 * be ...`); the other parts it decodes are query strings (submit's body is its handler's).
 */
export const decodeFailure = (error: HttpApiError.HttpApiDecodeError): BadRequest => {
  const issue = error.issues[0]
  const msg = issue !== undefined && headerNames.has(String(issue.path[0])) ? issue.message : messageOf(issue, query)
  return new BadRequest({ code: 400, msg })
}
