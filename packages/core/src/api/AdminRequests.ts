/**
 * What requests of the admin API (`/api/v1/admin/...`) carry: the JSON bodies of its actions
 * and the query parameters of its lists, as Schemas the endpoints declare (the OpenAPI
 * document comes from them). Each broken rule is one 400 whose `msg` names the field and the
 * rule: bodies are read and decoded by their handlers (`Requests.decodeBodyWith`), query
 * strings by HttpApi (`Requests.decodeFailure`). What needs the clock or the key scopes'
 * rules (an expiry in the past, a model pattern) is checked by the handler, with the same kind
 * of message.
 */
import { Schema } from "effect"
import { TaskStatus } from "../domain/Task.js"
import { ListParams, parameterRule, parseTimestamp, strict, TaskIdPath } from "./Requests.js"

/** Every action the audit log records (`AuditLog.Action`). */
export const auditActions = [
  "account.create",
  "key.create",
  "key.revoke",
  "secret.rotate",
  "credits.add",
  "task.cancel",
  "task.redeliver",
  "admin_key.create",
  "admin_key.revoke"
] as const

/** Longest name, label, note or id the admin API takes. */
export const maxTextLength = 200

/** A string with something in it, at most `max` characters. */
const text = (max: number, description: string) =>
  Schema.String.annotations({ message: () => "must be a string" }).pipe(
    Schema.filter((value) => value.trim().length > 0 && value.length <= max, {
      message: () => `must not be blank and at most ${max} characters`,
      jsonSchema: { minLength: 1, maxLength: max, pattern: "\\S" }
    })
  ).annotations({ description })

/** An ISO 8601 timestamp in a body; when it must be (in the future) is the handler's rule. */
const BodyTimestamp = (description: string) =>
  Schema.String.annotations({ message: () => "must be a string" }).pipe(
    Schema.filter((value) => parseTimestamp(value) !== undefined, {
      message: () => "must be an ISO 8601 timestamp with a time zone, e.g. 2027-01-31T12:00:00Z",
      jsonSchema: { format: "date-time" }
    })
  ).annotations({ description })

const optionalNullable = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { nullable: true })

/** Body of POST /api/v1/admin/accounts. */
export const CreateAccountRequest = Schema.Struct({
  name: text(maxTextLength, `The account's name, for people (at most ${maxTextLength} characters).`)
}).annotations({ identifier: "AdminCreateAccountRequest", ...strict })

/** Body of POST /api/v1/admin/accounts/{accountId}/keys: a key's label, expiry and scope. */
export const CreateKeyRequest = Schema.Struct({
  label: optionalNullable(text(maxTextLength, "What the key is for.")),
  expires_at: optionalNullable(BodyTimestamp("When the key stops working (ISO 8601, in the future); absent or null: never.")),
  models: optionalNullable(
    Schema.Array(Schema.String.annotations({ message: () => "must be a string" })).annotations({
      message: () => "must be an array of model ids or glob patterns",
      description:
        "The models the key may submit, as model ids or glob patterns (`*` any run of characters, `?` one, `[...]` one of a set): `[\"alpha-*\", \"clip3\"]`. Absent or null: every model."
    })
  ),
  monthly_cap_usd: optionalNullable(
    Schema.String.annotations({
      message: () => "must be a string",
      description:
        "The most the key may spend in a UTC calendar month, in US dollars with at most six decimals (`\"50\"`, `\"12.50\"`); reservations count until released. Absent or null: no cap."
    })
  ),
  rate_limit: optionalNullable(
    Schema.String.annotations({
      message: () => "must be a string",
      description:
        "The key's own rate limit, replacing the server's per-key limit for it: `10/s`, `600/min` or `36000/h`, in bursts of the per-second figure rounded up (at least 1). Absent or null: the server's."
    })
  )
}).annotations({ identifier: "AdminCreateKeyRequest", description: "null counts as absent for every field.", ...strict })

/** Longest grace a secret rotation takes, in seconds (30 days). */
export const maxGraceSeconds = 30 * 24 * 3600

/** Grace of a rotation when the body names none, in seconds (24 hours). */
export const defaultGraceSeconds = 24 * 3600

/** Body of POST /api/v1/admin/accounts/{accountId}/secrets/rotate. */
export const RotateSecretRequest = Schema.Struct({
  grace_seconds: optionalNullable(
    Schema.Number.annotations({ message: () => `must be a whole number of seconds from 0 to ${maxGraceSeconds}` }).pipe(
      Schema.filter((seconds) => Number.isInteger(seconds) && seconds >= 0 && seconds <= maxGraceSeconds, {
        message: () => `must be a whole number of seconds from 0 to ${maxGraceSeconds}`,
        jsonSchema: { type: "integer", minimum: 0, maximum: maxGraceSeconds }
      })
    ).annotations({
      description:
        `How long the old secret keeps signing callbacks beside the new one, in seconds (0 to ${maxGraceSeconds}; default ${defaultGraceSeconds}, 24 hours).`
    })
  )
}).annotations({ identifier: "AdminRotateSecretRequest", ...strict })

/** An entry id an operator chooses: letters, digits and `_.:-`, at most 100 characters. */
const entryIdPattern = /^[A-Za-z0-9_.:-]{1,100}$/

/** Body of POST /api/v1/admin/accounts/{accountId}/credits. */
export const AddCreditsRequest = Schema.Struct({
  amount_usd: Schema.String.annotations({
    message: () => "must be a string of US dollars, such as \"10\" or \"0.25\"",
    description: "US dollars to add, as a string with at most six decimals: `\"10\"`, `\"0.25\"` (more than zero, at most a billion)."
  }),
  note: optionalNullable(text(maxTextLength, "Why, kept with the entry (default: added by admin).")),
  entry_id: optionalNullable(
    Schema.String.annotations({ message: () => "must be a string" }).pipe(
      Schema.filter((id) => entryIdPattern.test(id), {
        message: () => "must be 1 to 100 letters, digits or _ . : -",
        jsonSchema: { pattern: entryIdPattern.source }
      })
    ).annotations({
      description:
        "The entry's id, for a retry-safe top-up: the same id credits once however often it is sent (the answer then says already_credited); an id another entry has is 409."
    })
  )
}).annotations({ identifier: "AdminAddCreditsRequest", description: "null counts as absent for note and entry_id.", ...strict })

/** Body of POST /api/v1/admin/admin-keys. */
export const CreateAdminKeyRequest = Schema.Struct({
  label: optionalNullable(text(maxTextLength, "What (or who) the admin key is for.")),
  expires_at: optionalNullable(BodyTimestamp("When the admin key stops working (ISO 8601, in the future); absent or null: never."))
}).annotations({ identifier: "AdminCreateAdminKeyRequest", description: "null counts as absent for every field.", ...strict })

/** A query parameter that is an id or a name: 1 to 200 characters. */
const idParameter = (description: string) =>
  Schema.String.pipe(Schema.minLength(1), Schema.maxLength(maxTextLength)).annotations({
    message: parameterRule(`must be 1 to ${maxTextLength} characters`),
    description
  })

/** Query parameters of GET /api/v1/admin/tasks: the customer list's, and an account and a provider. */
export const AdminTaskListParams = Schema.Struct({
  ...ListParams.fields,
  account: Schema.optional(idParameter("Only tasks of this account (its id, acct_...).")),
  provider: Schema.optional(idParameter("Only tasks run by this provider (the upstream's name for where the job runs: fal, replicate, ...)."))
}).annotations(strict)
export type AdminTaskListParams = typeof AdminTaskListParams.Type

/** A whole number from 1 to `max` in decimal digits, `fallback` when absent. */
const count = (max: number, fallback: number, what: string) =>
  Schema.transform(
    Schema.String.pipe(Schema.filter((value) => /^\d{1,4}$/.test(value) && Number(value) >= 1 && Number(value) <= max)),
    Schema.Int,
    { strict: true, decode: Number, encode: String }
  ).annotations({
    message: parameterRule(`must be an integer between 1 and ${max}`),
    jsonSchema: { type: "integer", minimum: 1, maximum: max, default: fallback, description: `${what}, 1 to ${max} (default ${fallback}), in decimal digits.` }
  })

/** Most ledger entries the credits endpoint shows, and its default. */
export const maxCreditEntries = 1000
export const defaultCreditEntries = 20

/** Query parameters of GET /api/v1/admin/accounts/{accountId}/credits. */
export const CreditsParams = Schema.Struct({
  limit: Schema.optional(count(maxCreditEntries, defaultCreditEntries, "The latest ledger entries to show"))
}).annotations(strict)

/** Most audit entries on one page, and the default. */
export const maxAuditPage = 100
export const defaultAuditPage = 50

const actionList = auditActions.join(", ")

/** Query parameters of GET /api/v1/admin/audit. */
export const AuditParams = Schema.Struct({
  limit: Schema.optional(count(maxAuditPage, defaultAuditPage, "Entries per page")),
  cursor: Schema.optional(idParameter("next_cursor of the previous page (with the same filters).")),
  action: Schema.optional(
    Schema.Literal(...auditActions).annotations({
      message: parameterRule(`must be one of ${actionList}`),
      description: "Only entries of this action."
    })
  ),
  target: Schema.optional(idParameter("Only entries about this target: an account, key, admin key or task id."))
}).annotations(strict)

/** An account id in a path; any string: an id that names no account is 404. */
export const AccountIdPath = Schema.Struct({ accountId: Schema.String.annotations({ description: "The account's id (acct_...)." }) })

/** A key id in a path. */
export const KeyIdPath = Schema.Struct({ keyId: Schema.String.annotations({ description: "The key's id (key_...)." }) })

/** An admin key id in a path. */
export const AdminKeyIdPath = Schema.Struct({ adminKeyId: Schema.String.annotations({ description: "The admin key's id." }) })

/** A task id in a path (any case). */
export const AdminTaskIdPath = Schema.Struct({ taskId: TaskIdPath })

/** The statuses, for the task list's description. */
export const statusNames = TaskStatus.literals.join(", ")
