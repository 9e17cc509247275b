/**
 * What a client sends, decoded once at the HTTP edge into the typed requests the use cases
 * take: the submit body (spec section 4.1), the list query, and task ids in paths. The
 * model's own rules for `input` are the catalog's; the host of `callBackUrl` is the submit
 * policy's.
 */
import { Either, Option, ParseResult, Schema } from "effect"
import { ValidationError } from "./Errors.js"
import { TaskId } from "./Ids.js"

const text = (message: string) => Schema.String.annotations({ message: () => ({ message, override: true }) })

/** A JSON object: what `input` must be. */
const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
  message: () => ({ message: "must be an object", override: true }),
  description: "Model input. input.prompt is required for every model; other fields are model specific."
})

/** The submit body; `null` counts as absent for the optional fields. */
export const SubmitRequest = Schema.Struct({
  model: text("must be a string").pipe(
    Schema.filter((model) => model !== "", { message: () => "is required" })
  ).annotations({ description: "Model identifier, e.g. alpha-image-2/text-to-image." }),
  input: JsonObject,
  callBackUrl: Schema.optionalWith(text("must be a string"), { nullable: true }).annotations({
    description: "Webhook address; a POST is sent there when the task reaches a terminal state."
  }),
  user_id: Schema.optionalWith(text("must be a string"), { nullable: true }).annotations({
    description: "Caller's user identifier, for tracing (at most 256 characters by default)."
  })
}).annotations({ identifier: "SubmitRequest" })
export type SubmitRequest = typeof SubmitRequest.Type

const decode = Schema.decodeUnknownEither(SubmitRequest, { errors: "first", onExcessProperty: "error" })

/** A client's string in a message, cut short: an error should not echo a megabyte back. */
export const shown = (value: string) => (value.length > 64 ? `${value.slice(0, 64)}…` : value)

/**
 * Decodes a parsed JSON body; the first broken rule becomes a ValidationError in the same
 * `<field> <rule>` shape as the model inputs' messages (`model is required`,
 * `webhook is not a supported field`, `input must be an object`).
 */
export const decodeSubmitRequest = (body: unknown): Either.Either<SubmitRequest, ValidationError> =>
  Either.mapLeft(decode(body), (error) => {
    const issue = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
    const field = issue?.path.map(String).join(".") ?? ""
    const message = issue === undefined || field === ""
      ? "request body must be a JSON object"
      : issue._tag === "Missing" || (field !== "user_id" && field !== "callBackUrl" && isNull(body, field))
      ? `${field} is required`
      : issue._tag === "Unexpected"
      ? `${shown(field)} is not a supported field`
      : `${field} ${issue.message}`
    return new ValidationError({ message })
  })

/** `model: null` and `input: null` read as missing, as they did before the Schema. */
const isNull = (body: unknown, field: string) =>
  typeof body === "object" && body !== null && (body as Record<string, unknown>)[field] === null

const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/**
 * A task id as a client writes it: UUIDs compare case-insensitively (RFC 9562), so any
 * case is read as the lowercase id we issued. None for anything that is not a UUID.
 */
export const parseTaskId = (value: string): Option.Option<TaskId> => {
  const lower = value.toLowerCase()
  return uuid.test(lower) ? Option.some(TaskId.make(lower)) : Option.none()
}

/** The query of `GET /api/v1/tasks`, typed. */
export interface ListRequest {
  /** 1 to 100, default 20. */
  readonly limit: number
  /** The `next_cursor` of the previous page. */
  readonly cursor: Option.Option<TaskId>
}

/**
 * Decodes the list query: only `limit` (an integer 1 to 100) and `cursor` (a `next_cursor`,
 * which is a task id), each at most once.
 */
export const decodeListRequest = (params: URLSearchParams): Either.Either<ListRequest, ValidationError> => {
  const fail = (message: string) => Either.left(new ValidationError({ message }))
  for (const name of new Set(params.keys())) {
    if (name !== "limit" && name !== "cursor") return fail(`${shown(name)} is not a supported parameter`)
    if (params.getAll(name).length > 1) return fail(`${name} may be given once`)
  }
  const limitText = params.get("limit")
  const limit = limitText === null ? 20 : /^\d{1,3}$/.test(limitText) ? Number(limitText) : Number.NaN
  if (!(limit >= 1 && limit <= 100)) return fail("limit must be an integer between 1 and 100")
  const cursorText = params.get("cursor")
  const cursor = cursorText === null ? Option.none() : parseTaskId(cursorText)
  if (cursorText !== null && Option.isNone(cursor)) return fail("cursor must be a next_cursor from a previous page")
  return Either.right({ limit, cursor })
}
