/**
 * The body of `POST /api/v1/task/submit` (spec section 4.1): one Schema that the HTTP
 * contract documents and the handler decodes, once, into the typed request the submit use
 * case takes. The model's own rules for `input` are the catalog's; the host of
 * `callBackUrl` is the submit policy's.
 */
import { Either, ParseResult, Schema } from "effect"
import { ValidationError } from "./Errors.js"

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
