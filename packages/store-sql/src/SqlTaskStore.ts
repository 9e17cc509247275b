/**
 * TaskStore on @effect/sql: SQLite (the embedded default) and PostgreSQL (several nodes).
 * Every SqlError becomes the store's StoreError here; none reaches a handler.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql"
import { StoreError, Task, TaskConflict, TaskStore } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Exit, Layer, Option } from "effect"
import { migrate, tables } from "./Schema.js"

/** Settings of the SQL store. */
export interface Options {
  /** Prefix of every table name. Default `mediagate_`. */
  readonly tablePrefix?: string
}

/** The default table prefix. */
export const defaultPrefix = "mediagate_"

type Row = Record<string, unknown>

const num = (value: unknown): number => Number(value)
const numOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value))
const strOrNull = (value: unknown): string | null => (value === null || value === undefined ? null : String(value))
const json = (value: unknown): any => (value === null || value === undefined ? null : JSON.parse(String(value)))

/** A row of the tasks table as a TaskRecord (validated by its schema). */
export const fromRow = (row: Row): Task.TaskRecord =>
  new Task.TaskRecord({
    id: String(row["id"]),
    ownerId: String(row["owner_id"]),
    status: row["status"] as Task.TaskStatus,
    input: json(row["input"]),
    job: json(row["job"]),
    result: json(row["result"]),
    failureReason: strOrNull(row["failure_reason"]) as Task.FailureReason | null,
    errorMessage: strOrNull(row["error_message"]),
    callBackUrl: strOrNull(row["callback_url"]),
    userId: strOrNull(row["user_id"]),
    upstreamId: strOrNull(row["upstream_id"]),
    createdAt: num(row["created_at"]),
    updatedAt: num(row["updated_at"]),
    deadlineAt: num(row["deadline_at"]),
    dueAt: numOrNull(row["due_at"]),
    leaseOwner: strOrNull(row["lease_owner"]),
    leaseUntil: numOrNull(row["lease_until"]),
    version: num(row["version"])
  })

/** A TaskRecord as a row of the tasks table. */
export const toRow = (task: Task.TaskRecord) => ({
  id: task.id,
  owner_id: task.ownerId,
  status: task.status,
  input: JSON.stringify(task.input),
  job: JSON.stringify(task.job),
  result: task.result === null ? null : JSON.stringify(task.result),
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
  version: task.version
})

const callbackRow = (row: TaskStore.CallbackRow) => ({
  id: row.id,
  task_id: row.taskId,
  url: row.url,
  created_at: row.createdAt,
  attempts: 0,
  next_attempt_at: row.createdAt,
  delivered_at: null
})

/** Turns a driver failure into the store's error; the cause is logged where it happened. */
const refail = (operation: string) => <A, E, R>(effect: Effect.Effect<A, E | SqlError.SqlError, R>) =>
  Effect.catchTag(effect as Effect.Effect<A, SqlError.SqlError, R>, "SqlError", (error) =>
    Effect.logError(`store: ${operation} failed`, error).pipe(
      Effect.zipRight(Effect.fail(new StoreError({ message: `${operation} failed: ${error.message}`, cause: error.cause })))
    )) as Effect.Effect<A, Exclude<E, SqlError.SqlError> | StoreError, R>

/**
 * Runs `effect` in one write transaction. SQLite: `BEGIN IMMEDIATE`, so a writer takes the
 * write lock up front instead of failing halfway when another process writes the same
 * file. PostgreSQL: an ordinary transaction (row locks do the rest).
 */
export const writeTransaction = (sql: SqlClient.SqlClient) => <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E | SqlError.SqlError, R> =>
    sql.onDialectOrElse({
      sqlite: () =>
        Effect.uninterruptibleMask((restore) =>
          Effect.scoped(
            Effect.gen(function*() {
              const connection = yield* sql.reserve
              yield* connection.executeUnprepared("BEGIN IMMEDIATE", [], undefined)
              const exit = yield* Effect.exit(
                restore(Effect.provideService(effect, SqlClient.TransactionConnection, [connection, 0] as const))
              )
              yield* connection.executeUnprepared(Exit.isSuccess(exit) ? "COMMIT" : "ROLLBACK", [], undefined)
              return yield* exit
            })
          )
        ),
      orElse: () => sql.withTransaction(effect)
    })

/** The SQL TaskStore. Runs the migrations first. */
export const make = (options: Options = {}): Effect.Effect<
  Context.Tag.Service<TaskStore.TaskStore>,
  StoreError,
  SqlClient.SqlClient
> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const prefix = options.tablePrefix ?? defaultPrefix
    const t = tables(prefix)
    yield* migrate(prefix).pipe(
      Effect.mapError((error) => new StoreError({ message: `migrating the task store failed: ${String((error as { message?: string }).message ?? error)}`, cause: error }))
    )
    yield* sql.onDialectOrElse({
      sqlite: () => sql`PRAGMA busy_timeout = 5000`.pipe(Effect.asVoid),
      orElse: () => Effect.void
    }).pipe(refail("configuring the connection"))

    const transaction = writeTransaction(sql)
    const insertCallbacks = (callbacks: ReadonlyArray<TaskStore.CallbackRow>): Effect.Effect<void, SqlError.SqlError> =>
      callbacks.length === 0
        ? Effect.void
        : Effect.asVoid(sql`INSERT INTO ${sql(t.callbacks)} ${sql.insert(callbacks.map(callbackRow))}`)

    const claimSql = (now: number, limit: number, worker: string, leaseUntil: number) =>
      sql.onDialectOrElse({
        pg: () =>
          sql<Row>`UPDATE ${sql(t.tasks)} SET lease_owner = ${worker}, lease_until = ${leaseUntil}, version = version + 1
            WHERE id IN (
              SELECT id FROM ${sql(t.tasks)}
              WHERE due_at IS NOT NULL AND due_at <= ${now} AND (lease_until IS NULL OR lease_until <= ${now})
              ORDER BY due_at LIMIT ${limit}
              FOR UPDATE SKIP LOCKED
            )
            RETURNING *`,
        orElse: () =>
          sql<Row>`UPDATE ${sql(t.tasks)} SET lease_owner = ${worker}, lease_until = ${leaseUntil}, version = version + 1
            WHERE id IN (
              SELECT id FROM ${sql(t.tasks)}
              WHERE due_at IS NOT NULL AND due_at <= ${now} AND (lease_until IS NULL OR lease_until <= ${now})
              ORDER BY due_at LIMIT ${limit}
            )
            RETURNING *`
      })

    const service: Context.Tag.Service<TaskStore.TaskStore> = {
      create: (task, callbacks = []) =>
        transaction(
          Effect.zipRight(sql`INSERT INTO ${sql(t.tasks)} ${sql.insert(toRow(task))}`, insertCallbacks(callbacks))
        ).pipe(refail("create"), Effect.asVoid, Effect.withSpan("SqlTaskStore.create")),

      get: (id, ownerId) =>
        (ownerId === undefined
          ? sql<Row>`SELECT * FROM ${sql(t.tasks)} WHERE id = ${id}`
          : sql<Row>`SELECT * FROM ${sql(t.tasks)} WHERE id = ${id} AND owner_id = ${ownerId}`).pipe(
            Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), fromRow)),
            refail("get"),
            Effect.withSpan("SqlTaskStore.get")
          ),

      update: (next, expectedVersion, callbacks = []) =>
        transaction(
          Effect.gen(function*() {
            const { id: _, ...columns } = toRow(next)
            const updated = yield* sql<Row>`UPDATE ${sql(t.tasks)} SET ${sql.update(columns)}
              WHERE id = ${next.id} AND version = ${expectedVersion} RETURNING id`
            if (updated.length === 0) return yield* new TaskConflict({ taskId: next.id, expectedVersion })
            yield* insertCallbacks(callbacks)
          })
        ).pipe(refail("update"), Effect.withSpan("SqlTaskStore.update")),

      claimDue: ({ leaseUntil, limit, now, worker }) =>
        transaction(claimSql(now, limit, worker, leaseUntil)).pipe(
          Effect.map((rows) => rows.map(fromRow).sort((a, b) => a.dueAt! - b.dueAt!)),
          refail("claimDue"),
          Effect.withSpan("SqlTaskStore.claimDue")
        ),

      list: (ownerId, { cursor, limit }) =>
        (cursor === undefined
          ? sql<Row>`SELECT * FROM ${sql(t.tasks)} WHERE owner_id = ${ownerId} ORDER BY id DESC LIMIT ${limit + 1}`
          : sql<Row>`SELECT * FROM ${sql(t.tasks)} WHERE owner_id = ${ownerId} AND id < ${cursor} ORDER BY id DESC LIMIT ${limit + 1}`)
          .pipe(
            Effect.map((rows) => {
              const page = rows.slice(0, limit).map(fromRow)
              return { tasks: page, nextCursor: rows.length > limit ? page[page.length - 1]!.id : null }
            }),
            refail("list"),
            Effect.withSpan("SqlTaskStore.list")
          ),

      callbacks: (taskId) =>
        sql<Row>`SELECT * FROM ${sql(t.callbacks)} WHERE task_id = ${taskId} ORDER BY created_at, id`.pipe(
          Effect.map((rows) =>
            rows.map((row) => ({ id: String(row["id"]), taskId: String(row["task_id"]), url: String(row["url"]), createdAt: num(row["created_at"]) }))
          ),
          refail("callbacks"),
          Effect.withSpan("SqlTaskStore.callbacks")
        )
    }
    return service
  })

/** The SQL TaskStore layer (on the SqlClient in context). */
export const layer: Layer.Layer<TaskStore.TaskStore, StoreError, SqlClient.SqlClient> = Layer.effect(TaskStore.TaskStore, make())

/** The SQL TaskStore layer with options (table prefix). */
export const layerWith = (options: Options): Layer.Layer<TaskStore.TaskStore, StoreError, SqlClient.SqlClient> =>
  Layer.effect(TaskStore.TaskStore, make(options))
