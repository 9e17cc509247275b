/**
 * A row of the tasks table: its columns with the types the drivers hand back, and the
 * transform between a row and a TaskRecord. The column list of every statement is this
 * schema's field list, so a column added here is read and written everywhere at once.
 */
import { Ids, Task } from "@mediagate/core"
import { Either, ParseResult, Schema } from "effect"

/** SQLite answers a number; PostgreSQL answers BIGINT as a string, a safe-integer driver as a bigint. */
const DbNumber = Schema.Union(
  Schema.Number,
  Schema.NumberFromString,
  Schema.transform(Schema.BigIntFromSelf, Schema.Number, { strict: true, decode: Number, encode: BigInt })
)

/** The tasks table's columns. JSON documents are TEXT columns. */
export const Row = Schema.Struct({
  id: Ids.TaskId,
  owner_id: Ids.AccountId,
  status: Task.TaskStatus,
  input: Schema.parseJson(Task.TaskInput),
  job: Schema.parseJson(Task.UpstreamJob),
  result: Schema.NullOr(Schema.parseJson(Task.TaskResult)),
  failure_reason: Schema.NullOr(Task.FailureReason),
  error_message: Schema.NullOr(Schema.String),
  callback_url: Schema.NullOr(Schema.String),
  user_id: Schema.NullOr(Schema.String),
  upstream_id: Schema.NullOr(Ids.UpstreamId),
  created_at: DbNumber,
  updated_at: DbNumber,
  deadline_at: DbNumber,
  due_at: Schema.NullOr(DbNumber),
  lease_owner: Schema.NullOr(Schema.String),
  lease_until: Schema.NullOr(DbNumber),
  version: DbNumber.pipe(Schema.compose(Schema.Int)),
  attempts: Schema.parseJson(Schema.Array(Task.UpstreamAttempt)),
  provider: Schema.NullOr(Schema.String),
  /** JSON; null when nothing is known (and in rows written before it existed). */
  progress: Schema.NullOr(Schema.parseJson(Task.TaskProgress)),
  /** JSON; null for the spec's one terminal callback (and in rows written before it existed). */
  callback_events: Schema.NullOr(Schema.parseJson(Task.CallbackEvents)),
  /** The key the task was submitted with (migration 0021); null where unknown. */
  key_id: Schema.NullOr(Schema.String)
})
/** A row as the driver hands it over and takes it. */
export type Row = typeof Row.Encoded

/** The columns of the tasks table, in the order of `Row`. */
export const columns: ReadonlyArray<keyof Row> = Object.keys(Row.fields) as Array<keyof Row>

/** A row's columns once decoded: numbers as numbers, JSON columns as their values. */
type Columns = typeof Row.Type

/** The record of decoded columns; Row has validated every field, so they are not checked twice. */
const recordOf = (row: Columns): Task.TaskRecord =>
  new Task.TaskRecord({
    id: row.id,
    ownerId: row.owner_id,
    status: row.status,
    input: row.input,
    job: row.job,
    result: row.result,
    failureReason: row.failure_reason,
    errorMessage: row.error_message,
    callBackUrl: row.callback_url,
    userId: row.user_id,
    upstreamId: row.upstream_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    deadlineAt: row.deadline_at,
    dueAt: row.due_at,
    leaseOwner: row.lease_owner,
    leaseUntil: row.lease_until,
    version: row.version,
    attempts: row.attempts,
    provider: row.provider,
    progress: row.progress,
    callbackEvents: row.callback_events,
    keyId: row.key_id
  }, true)

/** A record's columns before encoding: the one mapping of fields to columns, as `recordOf` is back. */
const columnsOf = (task: Task.TaskRecord): Columns => ({
  id: task.id,
  owner_id: task.ownerId,
  status: task.status,
  input: task.input,
  job: task.job,
  result: task.result,
  failure_reason: task.failureReason,
  error_message: task.errorMessage,
  callback_url: task.callBackUrl,
  user_id: task.userId,
  upstream_id: task.upstreamId,
  created_at: task.createdAt,
  updated_at: task.updatedAt,
  deadline_at: task.deadlineAt,
  due_at: task.dueAt,
  lease_owner: task.leaseOwner,
  lease_until: task.leaseUntil,
  version: task.version,
  attempts: task.attempts,
  provider: task.provider,
  progress: task.progress,
  callback_events: task.callbackEvents,
  key_id: task.keyId
})

/** A row of the tasks table as a TaskRecord and back. */
export const TaskRow = Schema.transform(Row, Schema.typeSchema(Task.TaskRecord), {
  strict: true,
  decode: recordOf,
  encode: columnsOf
})

const decode = Schema.decodeUnknownEither(TaskRow)
const encode = Schema.encodeEither(TaskRow)

/** A column `fastFromRow` does not take as it is. */
const notFast = Symbol("notFast")

/** A number column as the drivers hand it over: a number, a bigint, or PostgreSQL's BIGINT text. */
const dbNumber = (value: unknown): number | typeof notFast =>
  typeof value === "number"
    ? value
    : typeof value === "bigint"
    ? Number(value)
    : typeof value === "string" && /^-?\d{1,16}$/.test(value)
    ? Number(value)
    : notFast
const dbNumberOrNull = (value: unknown): number | null | typeof notFast => (value === null ? null : dbNumber(value))
const isStringOrNull = (value: unknown): value is string | null => value === null || typeof value === "string"
const json = (value: unknown): unknown => {
  if (typeof value !== "string") return notFast
  try {
    return JSON.parse(value)
  } catch {
    return notFast
  }
}

const isStatus = Schema.is(Task.TaskStatus)
const isFailureReason = Schema.is(Schema.NullOr(Task.FailureReason))
const isInput = Schema.is(Task.TaskInput)
const isJob = Schema.is(Task.UpstreamJob)
const isResult = Schema.is(Schema.NullOr(Task.TaskResult))
const isAttempts = Schema.is(Schema.Array(Task.UpstreamAttempt))
const isProgress = Schema.is(Schema.NullOr(Task.TaskProgress))
const isCallbackEvents = Schema.is(Schema.NullOr(Task.CallbackEvents))

/**
 * The row as a record without going through `TaskRow`'s decoder (about half its cost, on a
 * path every read takes): the same checks of each column, by `Schema.is` of the same
 * schemas, or undefined for anything it does not take as it is (a malformed row, an unusual
 * number), which `fromRow` then hands to the decoder. One difference: keys a JSON column
 * holds beyond its schema's are kept where the decoder drops them; the API's answers are
 * encoded through their own schemas, which drop them there.
 */
export const fastFromRow = (row: unknown): Task.TaskRecord | undefined => {
  if (typeof row !== "object" || row === null) return undefined
  const r = row as Record<keyof Row, unknown>
  const createdAt = dbNumber(r.created_at)
  const updatedAt = dbNumber(r.updated_at)
  const deadlineAt = dbNumber(r.deadline_at)
  const dueAt = dbNumberOrNull(r.due_at)
  const leaseUntil = dbNumberOrNull(r.lease_until)
  const version = dbNumber(r.version)
  if (
    typeof r.id !== "string" || typeof r.owner_id !== "string" || !isStatus(r.status) || !isFailureReason(r.failure_reason) ||
    !isStringOrNull(r.error_message) || !isStringOrNull(r.callback_url) || !isStringOrNull(r.user_id) ||
    !isStringOrNull(r.upstream_id) || !isStringOrNull(r.lease_owner) || !isStringOrNull(r.provider) || !isStringOrNull(r.key_id ?? null) ||
    createdAt === notFast || updatedAt === notFast || deadlineAt === notFast || dueAt === notFast || leaseUntil === notFast ||
    version === notFast || !Number.isInteger(version)
  ) return undefined
  const input = json(r.input)
  const job = json(r.job)
  const result = r.result === null ? null : json(r.result)
  const attempts = json(r.attempts)
  const progress = r.progress === null || r.progress === undefined ? null : json(r.progress)
  const callbackEvents = r.callback_events === null || r.callback_events === undefined ? null : json(r.callback_events)
  if (
    !isInput(input) || !isJob(job) || !isResult(result) || !isAttempts(attempts) || !isProgress(progress) ||
    !isCallbackEvents(callbackEvents)
  ) return undefined
  return recordOf({
    id: Ids.TaskId.make(r.id),
    owner_id: Ids.AccountId.make(r.owner_id),
    status: r.status,
    input,
    job,
    result,
    failure_reason: r.failure_reason,
    error_message: r.error_message,
    callback_url: r.callback_url,
    user_id: r.user_id,
    upstream_id: r.upstream_id === null ? null : Ids.UpstreamId.make(r.upstream_id),
    created_at: createdAt,
    updated_at: updatedAt,
    deadline_at: deadlineAt,
    due_at: dueAt,
    lease_owner: r.lease_owner,
    lease_until: leaseUntil,
    version,
    attempts,
    provider: r.provider,
    progress,
    callback_events: callbackEvents,
    key_id: (r.key_id ?? null) as string | null
  })
}

/**
 * A row of the tasks table as a TaskRecord. A row that does not decode was not written by
 * this store (or the database was edited by hand): a defect, thrown with the row's id and
 * what is wrong, never a task made of whatever the row held.
 */
export const fromRow = (row: unknown): Task.TaskRecord => {
  const fast = fastFromRow(row)
  if (fast !== undefined) return fast
  return Either.getOrElse(decode(row), (error) => {
    const id = typeof row === "object" && row !== null ? String((row as { id?: unknown }).id) : String(row)
    throw new Error(`malformed row ${id} in the tasks table: ${ParseResult.TreeFormatter.formatErrorSync(error)}`)
  })
}

/**
 * A TaskRecord as a row of the tasks table: `TaskRow`'s encoding written out (JSON columns as
 * text), about a tenth of its cost. A record is checked when it is made (`TaskRecord`'s
 * constructor); one that is not a TaskRecord goes through the encoder, which says what is
 * wrong with it.
 */
export const toRow = (task: Task.TaskRecord): Row => {
  if (!(task instanceof Task.TaskRecord)) {
    return Either.getOrElse(encode(task), (error) => {
      throw new Error(`task ${String((task as { id?: unknown }).id)} cannot be written: ${ParseResult.TreeFormatter.formatErrorSync(error)}`)
    })
  }
  const fields = columnsOf(task)
  return {
    ...fields,
    input: JSON.stringify(fields.input),
    job: JSON.stringify(fields.job),
    result: fields.result === null ? null : JSON.stringify(fields.result),
    attempts: JSON.stringify(fields.attempts),
    progress: fields.progress === null ? null : JSON.stringify(fields.progress),
    callback_events: fields.callback_events === null ? null : JSON.stringify(fields.callback_events)
  }
}

/** The values of a row in the order of `columns`, as statement parameters. */
export const values = (row: Row): Array<unknown> => columns.map((column) => row[column])
