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
  provider: Schema.NullOr(Schema.String)
})
/** A row as the driver hands it over and takes it. */
export type Row = typeof Row.Encoded

/** The columns of the tasks table, in the order of `Row`. */
export const columns: ReadonlyArray<keyof Row> = Object.keys(Row.fields) as Array<keyof Row>

/** A row of the tasks table as a TaskRecord and back. */
export const TaskRow = Schema.transform(Row, Schema.typeSchema(Task.TaskRecord), {
  strict: true,
  // Row has validated every field already; the record is built without checking them twice.
  decode: (row) =>
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
      provider: row.provider
    }, true),
  encode: (task) => ({
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
    provider: task.provider
  })
})

const decode = Schema.decodeUnknownEither(TaskRow)
const encode = Schema.encodeEither(TaskRow)

/**
 * A row of the tasks table as a TaskRecord. A row that does not decode was not written by
 * this store (or the database was edited by hand): a defect, thrown with the row's id and
 * what is wrong, never a task made of whatever the row held.
 */
export const fromRow = (row: unknown): Task.TaskRecord =>
  Either.getOrElse(decode(row), (error) => {
    const id = typeof row === "object" && row !== null ? String((row as { id?: unknown }).id) : String(row)
    throw new Error(`malformed row ${id} in the tasks table: ${ParseResult.TreeFormatter.formatErrorSync(error)}`)
  })

/** A TaskRecord as a row of the tasks table. */
export const toRow = (task: Task.TaskRecord): Row =>
  Either.getOrElse(encode(task), (error) => {
    throw new Error(`task ${task.id} cannot be written: ${ParseResult.TreeFormatter.formatErrorSync(error)}`)
  })

/** The values of a row in the order of `columns`, as statement parameters. */
export const values = (row: Row): Array<unknown> => columns.map((column) => row[column])
