/**
 * TaskStore on @effect/sql: SQLite (the embedded default) and PostgreSQL (several nodes).
 * Every SqlError becomes the store's StoreError here; none reaches a handler.
 */
import { SqlClient } from "@effect/sql"
import type { SqlConnection, SqlError } from "@effect/sql"
import { Ids, StoreError, TaskConflict, TaskStore } from "@mediagate/core"
import type { Task } from "@mediagate/core"
import type { Context, Scope } from "effect"
import { Effect, Exit, Layer, Option } from "effect"
import { orDie as orDieAs } from "./internal/orDie.js"
import { migrate, modelExpression, tables } from "./Schema.js"
import * as TaskRow from "./TaskRow.js"

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

/** Rows of the tasks table as records; a row that does not decode is a defect (see `TaskRow.fromRow`). */
const records = (rows: ReadonlyArray<Row>): Effect.Effect<Array<Task.TaskRecord>> => Effect.sync(() => rows.map(TaskRow.fromRow))

/** Turns a driver failure into the store's error, at the start (the layer fails to build). */
const refail = (operation: string) => <A, E, R>(effect: Effect.Effect<A, E | SqlError.SqlError, R>) =>
  Effect.catchTag(effect as Effect.Effect<A, SqlError.SqlError, R>, "SqlError", (error) =>
    Effect.fail(new StoreError({ message: `${operation} failed: ${error.message}`, cause: error.cause }))) as Effect.Effect<
      A,
      Exclude<E, SqlError.SqlError> | StoreError,
      R
    >

/** Driver failures while serving: defects, logged as the store's. */
const orDie = (operation: string) => orDieAs("store", operation)

type Run = (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<Row>, SqlError.SqlError>

/**
 * How the store talks to its database. Statements are compiled once, when the store is
 * made, and run on a connection directly: the per-statement machinery of the query
 * builder costs more than SQLite itself takes to answer (docs/benchmarks.md).
 */
interface Executor {
  /** One statement: atomic on its own (an implicit transaction), so it needs no BEGIN. */
  readonly run: Run
  /** Several statements in one write transaction, all or nothing. */
  readonly transaction: <A, E>(body: (run: Run) => Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError.SqlError>
}

const transaction = <A, E>(
  connection: SqlConnection.Connection,
  begin: string,
  body: (run: Run) => Effect.Effect<A, E>
): Effect.Effect<A, E | SqlError.SqlError> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      yield* connection.execute(begin, [], undefined)
      const exit = yield* Effect.exit(restore(body((text, params) => connection.execute(text, params, undefined))))
      yield* connection.execute(Exit.isSuccess(exit) ? "COMMIT" : "ROLLBACK", [], undefined)
      return yield* exit
    })
  )

/**
 * SQLite has one connection per client, and the store keeps it for its lifetime (give the
 * store a client of its own). Fibers share that connection, so a lock orders them: a
 * transaction runs from `BEGIN IMMEDIATE` to `COMMIT` with no other fiber's statement in
 * between (it would otherwise commit or roll back with someone else's transaction), and a
 * single statement waits while a transaction is open. better-sqlite3 answers synchronously,
 * so the lock is never held across a wait on the database. `BEGIN IMMEDIATE` takes the
 * write lock up front, so a writer never fails halfway when another process writes the
 * same file.
 */
const sqliteExecutor = (sql: SqlClient.SqlClient): Effect.Effect<Executor, SqlError.SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const connection = yield* sql.reserve
    const exclusive = (yield* Effect.makeSemaphore(1)).withPermits(1)
    return {
      run: (text, params) => exclusive(connection.execute(text, params, undefined)),
      transaction: (body) => exclusive(transaction(connection, "BEGIN IMMEDIATE", body))
    }
  })

/** PostgreSQL: a pooled connection per operation; row locks order concurrent writers. */
const pgExecutor = (sql: SqlClient.SqlClient): Executor => ({
  run: (text, params) => Effect.scoped(Effect.flatMap(sql.reserve, (connection) => connection.execute(text, params, undefined))),
  transaction: (body) => Effect.scoped(Effect.flatMap(sql.reserve, (connection) => transaction(connection, "BEGIN", body)))
})

const identifier = /^[A-Za-z_][A-Za-z0-9_]*$/

/** The SQL TaskStore. Runs the migrations first; on SQLite it keeps its client's connection. */
export const make = (options: Options = {}): Effect.Effect<
  Context.Tag.Service<TaskStore.TaskStore>,
  StoreError,
  SqlClient.SqlClient | Scope.Scope
> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const prefix = options.tablePrefix ?? defaultPrefix
    if (!identifier.test(prefix)) {
      return yield* new StoreError({ message: `table prefix must be letters, digits and _: '${prefix}'` })
    }
    const t = tables(prefix)
    yield* migrate(prefix).pipe(
      Effect.mapError((error) => new StoreError({ message: `migrating the task store failed: ${String((error as { message?: string }).message ?? error)}`, cause: error }))
    )
    const isPg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
    const executor = isPg ? pgExecutor(sql) : yield* sqliteExecutor(sql).pipe(refail("opening the store"))
    if (!isPg) yield* executor.run("PRAGMA busy_timeout = 5000", []).pipe(refail("configuring the connection"))

    // Statements, compiled once. Written with ?; PostgreSQL numbers its placeholders.
    const compile = (text: string) => {
      let n = 0
      return isPg ? text.replace(/\?/g, () => `$${++n}`) : text
    }
    const tasks = `"${t.tasks}"`
    const modelOf = modelExpression(isPg)
    const columns = TaskRow.columns
    const insertTask = compile(`INSERT INTO ${tasks} (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`)
    const updateColumns = columns.filter((column) => column !== "id")
    const updateTask = compile(
      `UPDATE ${tasks} SET ${updateColumns.map((column) => `${column} = ?`).join(", ")} WHERE id = ? AND version = ? RETURNING id`
    )
    const insertCallback = compile(
      `INSERT INTO "${t.callbacks}" (id, task_id, url, created_at, attempts, next_attempt_at) VALUES (?, ?, ?, ?, 0, ?)`
    )
    const selectById = compile(`SELECT * FROM ${tasks} WHERE id = ?`)
    const selectByIdOwner = compile(`SELECT * FROM ${tasks} WHERE id = ? AND owner_id = ?`)
    // Claims. A task is running from its claim out of PENDING until it ends. Work in flight
    // and waiting work have partial indexes of their own (migration 0007), so a claim reads
    // only the rows it may take, however long the line of waiting tasks.
    const free = (alias = "") => `(${alias}lease_until IS NULL OR ${alias}lease_until <= ?)`
    const claimInFlight = compile(
      `UPDATE ${tasks} SET lease_owner = ?, lease_until = ?, version = version + 1
       WHERE id IN (
         SELECT id FROM ${tasks} WHERE due_at IS NOT NULL AND status <> 'PENDING' AND due_at <= ? AND ${free()}
         ORDER BY due_at, id LIMIT ?${isPg ? " FOR UPDATE SKIP LOCKED" : ""}
       )
       RETURNING *`
    )
    // On SQLite an UPDATE that finds nothing still costs about 100 µs against 7 µs for the
    // SELECT (bench:e2e's statement trace), and most wake-ups find nothing to claim: look
    // first. On PostgreSQL each statement is a round trip: the UPDATE alone is cheaper.
    const anyDue = compile(`SELECT 1 AS found FROM ${tasks} WHERE due_at IS NOT NULL AND due_at <= ? AND ${free()} LIMIT 1`)
    const anyInFlight = compile(
      `SELECT 1 AS found FROM ${tasks} WHERE due_at IS NOT NULL AND status <> 'PENDING' AND due_at <= ? AND ${free()} LIMIT 1`
    )
    const waitingOwners = compile(
      `SELECT DISTINCT owner_id FROM ${tasks} WHERE status = 'PENDING' AND due_at <= ? AND ${free()}`
    )
    // Running: in flight, or PENDING under a live lease (claimed, not yet submitted); two
    // statements, so each reads its own index.
    const inFlightByOwner = compile(
      `SELECT owner_id, provider, count(*) AS n FROM ${tasks} WHERE due_at IS NOT NULL AND status <> 'PENDING' GROUP BY owner_id, provider`
    )
    const leasedByOwner = compile(
      `SELECT owner_id, provider, count(*) AS n FROM ${tasks} WHERE status = 'PENDING' AND lease_until > ? GROUP BY owner_id, provider`
    )
    /** An owner's line, leaving out the tasks of providers that are full (`full` placeholders). */
    const ownersLine = (full: number) =>
      compile(
        `SELECT id, owner_id, due_at, provider FROM ${tasks} WHERE status = 'PENDING' AND owner_id = ? AND due_at <= ? AND ${free()}${
          full === 0 ? "" : ` AND (provider IS NULL OR provider NOT IN (${Array.from({ length: full }, () => "?").join(", ")}))`
        }
       ORDER BY due_at, id LIMIT ?`
      )
    const lineStatements = new Map<number, string>()
    /** Leases the chosen waiting tasks (by id; `count` placeholders), if still free. */
    const leaseChosen = (count: number) =>
      compile(
        `UPDATE ${tasks} SET lease_owner = ?, lease_until = ?, version = version + 1
         WHERE status = 'PENDING' AND ${free()} AND id IN (${Array.from({ length: count }, () => "?").join(", ")})
         RETURNING *`
      )
    const leaseStatements = new Map<number, string>()
    // On PostgreSQL claims of new work take turns, so two nodes never both see the same free room.
    const claimLock = `SELECT pg_advisory_xact_lock(hashtext('${t.tasks}_claims'))`
    const releaseLeases = compile(
      `UPDATE ${tasks} SET lease_owner = NULL, lease_until = NULL, version = version + 1 WHERE lease_owner = ? AND due_at IS NOT NULL`
    )
    const countPending = compile(`SELECT COUNT(*) AS n FROM ${tasks} WHERE status = 'PENDING'`)
    const listFirst = compile(`SELECT * FROM ${tasks} WHERE owner_id = ? ORDER BY id DESC LIMIT ?`)
    const listAfter = compile(`SELECT * FROM ${tasks} WHERE owner_id = ? AND id < ? ORDER BY id DESC LIMIT ?`)
    /** A filtered list, compiled once per shape (which conditions, how many statuses). */
    const listStatements = new Map<string, string>()
    const listFiltered = (cursor: boolean, filter: TaskStore.ListFilter) => {
      const shape = [
        cursor ? "c" : "",
        filter.statuses === undefined ? "" : `s${filter.statuses.length}`,
        filter.model === undefined ? "" : "m",
        filter.createdAfter === undefined ? "" : "a",
        filter.createdBefore === undefined ? "" : "b"
      ].join("")
      let statement = listStatements.get(shape)
      if (statement === undefined) {
        const conditions = [
          "owner_id = ?",
          ...(cursor ? ["id < ?"] : []),
          ...(filter.statuses === undefined ? [] : [`status IN (${filter.statuses.map(() => "?").join(", ")})`]),
          // The same expression as the index of migration 0015.
          ...(filter.model === undefined ? [] : [`${modelOf} = ?`]),
          ...(filter.createdAfter === undefined ? [] : ["created_at > ?"]),
          ...(filter.createdBefore === undefined ? [] : ["created_at < ?"])
        ]
        listStatements.set(shape, statement = compile(`SELECT * FROM ${tasks} WHERE ${conditions.join(" AND ")} ORDER BY id DESC LIMIT ?`))
      }
      return statement
    }
    const selectCallbacks = compile(`SELECT * FROM "${t.callbacks}" WHERE task_id = ? ORDER BY created_at, id`)
    const redeliverCallbacks = compile(
      `UPDATE "${t.callbacks}" SET round_start = attempts, next_attempt_at = ?, delivered_at = NULL, failed_at = NULL WHERE task_id = ? RETURNING id`
    )
    const anyCallbackDue = compile(
      `SELECT 1 AS found FROM "${t.callbacks}"
       WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?) LIMIT 1`
    )
    const claimCallbacks = compile(
      `UPDATE "${t.callbacks}" SET lease_until = ?
       WHERE id IN (
         SELECT id FROM "${t.callbacks}"
         WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)
         ORDER BY next_attempt_at LIMIT ?${isPg ? " FOR UPDATE SKIP LOCKED" : ""}
       )
       RETURNING *`
    )
    const insertAttempt = compile(
      `INSERT INTO "${t.callbackAttempts}" (callback_id, attempt, at, status, error, duration_ms, outcome, retry_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
    )
    const afterAttempt = compile(
      `UPDATE "${t.callbacks}" SET attempts = ?, lease_until = NULL, next_attempt_at = ?, delivered_at = ?, failed_at = ? WHERE id = ?`
    )
    const selectAttempts = compile(`SELECT * FROM "${t.callbackAttempts}" WHERE callback_id = ? ORDER BY attempt`)

    const writeCallbacks = (run: Run, callbacks: ReadonlyArray<TaskStore.CallbackRow>) =>
      Effect.forEach(callbacks, (row) => run(insertCallback, [row.id, row.taskId, row.url, row.createdAt, row.createdAt]), {
        discard: true
      })

    const service: Context.Tag.Service<TaskStore.TaskStore> = {
      create: (task, callbacks = []) =>
        (callbacks.length === 0
          ? executor.run(insertTask, TaskRow.values(TaskRow.toRow(task)))
          : executor.transaction((run) =>
            Effect.zipRight(run(insertTask, TaskRow.values(TaskRow.toRow(task))), writeCallbacks(run, callbacks))
          )).pipe(Effect.asVoid, orDie("create")),

      get: (id) =>
        executor.run(selectById, [id]).pipe(
          Effect.flatMap((rows) => Effect.map(records(rows.slice(0, 1)), (found) => Option.fromNullable(found[0]))),
          orDie("get")
        ),

      getOwned: (id, owner) =>
        executor.run(selectByIdOwner, [id, owner]).pipe(
          Effect.flatMap((rows) => Effect.map(records(rows.slice(0, 1)), (found) => Option.fromNullable(found[0]))),
          orDie("getOwned")
        ),

      update: (next, expectedVersion, callbacks = []) => {
        const row = TaskRow.toRow(next)
        const params = [...updateColumns.map((column) => row[column]), row.id, expectedVersion]
        // Made only when the check fails: an error captures a stack trace.
        const conflict = () => new TaskConflict({ taskId: next.id, expectedVersion })
        return (callbacks.length === 0
          ? Effect.flatMap(executor.run(updateTask, params), (updated) => (updated.length === 0 ? Effect.fail(conflict()) : Effect.void))
          : executor.transaction((run) =>
            Effect.gen(function*() {
              const updated = yield* run(updateTask, params)
              if (updated.length === 0) return yield* Effect.fail(conflict())
              yield* writeCallbacks(run, callbacks)
            })
          )).pipe(orDie("update"))
      },

      claimDue: ({ leaseUntil, limit, limits, now, worker }) =>
        Effect.flatMap(isPg ? Effect.succeed([{}]) : executor.run(anyDue, [now, now]), (due) =>
          due.length === 0 ? Effect.succeed([]) : executor.transaction((run) =>
          Effect.gen(function*() {
            const byDue = (a: Task.TaskRecord, b: Task.TaskRecord) => a.dueAt! - b.dueAt!
            const inFlight = !isPg && (yield* run(anyInFlight, [now, now])).length === 0
              ? []
              : (yield* records(yield* run(claimInFlight, [worker, leaseUntil, now, now, limit]))).sort(byDue)
            let room = limit - inFlight.length
            if (room <= 0) return inFlight
            const owners = (yield* run(waitingOwners, [now, now])).map((row) => String(row["owner_id"]))
            if (owners.length === 0) return inFlight
            if (isPg) yield* run(claimLock, [])
            const busy = new Map<string, number>()
            const onProvider = new Map<string, number>()
            for (const row of [...yield* run(inFlightByOwner, []), ...yield* run(leasedByOwner, [now])]) {
              busy.set(String(row["owner_id"]), (busy.get(String(row["owner_id"])) ?? 0) + num(row["n"]))
              const provider = strOrNull(row["provider"])
              if (provider !== null) onProvider.set(provider, (onProvider.get(provider) ?? 0) + num(row["n"]))
            }
            if (limits !== undefined) {
              room = Math.min(room, limits.running - [...busy.values()].reduce((a, b) => a + b, 0))
            }
            const cap = limits?.perAccount ?? Number.POSITIVE_INFINITY
            const perProvider = limits?.perProvider
            /** Whether a provider has room for one more task. */
            const roomOn = (provider: string | null) =>
              provider === null || perProvider === undefined || (onProvider.get(provider) ?? 0) < perProvider(provider)
            // Lines leave out the tasks of full providers, so they do not hide others' behind them.
            const full = [...onProvider.keys()].filter((provider) => !roomOn(provider))
            let line = lineStatements.get(full.length)
            if (line === undefined) lineStatements.set(full.length, line = ownersLine(full.length))
            // Each owner's line: its waiting tasks behind its running ones; places are served in
            // order across the lines, so owners alternate and the least busy goes first.
            const places: Array<{ readonly id: string; readonly place: number; readonly due: number; readonly provider: string | null }> = []
            for (const owner of owners) {
              const running = busy.get(owner) ?? 0
              const take = Math.min(room, cap - running)
              if (take <= 0) continue
              const rows = yield* run(line, [owner, now, now, ...full, take])
              rows.forEach((row, i) =>
                places.push({ id: String(row["id"]), place: running + i + 1, due: num(row["due_at"]), provider: strOrNull(row["provider"]) })
              )
            }
            const chosen: Array<string> = []
            for (const place of places.sort((a, b) => a.place - b.place || a.due - b.due || (a.id < b.id ? -1 : 1))) {
              if (chosen.length >= room) break
              // A provider may fill up during this claim.
              if (!roomOn(place.provider)) continue
              if (place.provider !== null) onProvider.set(place.provider, (onProvider.get(place.provider) ?? 0) + 1)
              chosen.push(place.id)
            }
            if (chosen.length === 0) return inFlight
            let statement = leaseStatements.get(chosen.length)
            if (statement === undefined) leaseStatements.set(chosen.length, statement = leaseChosen(chosen.length))
            const waiting = yield* records(yield* run(statement, [worker, leaseUntil, now, ...chosen]))
            return [...inFlight, ...waiting.sort(byDue)]
          })
        )).pipe(orDie("claimDue")),

      releaseLeases: (worker) => executor.run(releaseLeases, [worker]).pipe(Effect.asVoid, orDie("releaseLeases")),
      countPending: executor.run(countPending, []).pipe(
        Effect.map((rows) => Number((rows[0] as { readonly n?: unknown } | undefined)?.n ?? 0)),
        orDie("countPending")
      ),

      list: (ownerId, { cursor, filter = {}, limit }) => {
        const filtered = filter.statuses !== undefined || filter.model !== undefined || filter.createdAfter !== undefined ||
          filter.createdBefore !== undefined
        const statement = !filtered ? (cursor === undefined ? listFirst : listAfter) : listFiltered(cursor !== undefined, filter)
        const params = [
          ownerId,
          ...(cursor === undefined ? [] : [cursor]),
          ...(filter.statuses ?? []),
          ...(filter.model === undefined ? [] : [filter.model]),
          ...(filter.createdAfter === undefined ? [] : [filter.createdAfter]),
          ...(filter.createdBefore === undefined ? [] : [filter.createdBefore]),
          limit + 1
        ]
        // An empty status list lets nothing through (IN () is not SQL).
        if (filter.statuses?.length === 0) return Effect.succeed({ tasks: [], nextCursor: null })
        return executor.run(statement, params).pipe(
          Effect.flatMap((rows) =>
            Effect.map(records(rows.slice(0, limit)), (page) => ({
              tasks: page,
              nextCursor: rows.length > limit ? page[page.length - 1]!.id : null
            }))
          ),
          orDie("list")
        )
      },

      callbacks: (taskId) =>
        executor.run(selectCallbacks, [taskId]).pipe(
          Effect.map((rows) =>
            rows.map((row): TaskStore.CallbackState => {
              const status = numOrNull(row["delivered_at"]) !== null ? "delivered" : numOrNull(row["failed_at"]) !== null ? "failed" : "pending"
              return {
                id: String(row["id"]),
                taskId: Ids.TaskId.make(String(row["task_id"])),
                url: String(row["url"]),
                createdAt: num(row["created_at"]),
                attempts: num(row["attempts"]),
                status,
                nextAttemptAt: status === "pending" ? numOrNull(row["next_attempt_at"]) : null
              }
            })
          ),
          orDie("callbacks")
        ),

      redeliverCallbacks: (taskId, now) =>
        executor.run(redeliverCallbacks, [now, taskId]).pipe(Effect.map((rows) => rows.length), orDie("redeliverCallbacks")),

      claimCallbacks: ({ leaseUntil, limit, now }) =>
        Effect.flatMap(isPg ? Effect.succeed([{}]) : executor.run(anyCallbackDue, [now, now]), (due) =>
          due.length === 0 ? Effect.succeed([]) : executor.run(claimCallbacks, [leaseUntil, now, now, limit])).pipe(
          Effect.map((rows) =>
            rows
              .map((row) => ({
                id: String(row["id"]),
                taskId: Ids.TaskId.make(String(row["task_id"])),
                url: String(row["url"]),
                createdAt: num(row["created_at"]),
                attempts: num(row["attempts"]),
                roundStart: num(row["round_start"]),
                due: num(row["next_attempt_at"])
              }))
              .sort((a, b) => a.due - b.due)
              .map(({ due: _, ...callback }) => callback)
          ),
          orDie("claimCallbacks")
        ),

      recordCallbackAttempt: (attempt) => service.recordCallbackAttempts([attempt]),

      // Each attempt's row and its callback's next state, all in one transaction.
      recordCallbackAttempts: (attempts) =>
        attempts.length === 0 ? Effect.void : executor.transaction((run) =>
          Effect.forEach(attempts, (attempt) =>
            Effect.zipRight(
              run(insertAttempt, [
                attempt.callbackId,
                attempt.attempt,
                attempt.at,
                attempt.status,
                attempt.error,
                Math.round(attempt.durationMs),
                attempt.outcome._tag,
                attempt.outcome._tag === "Retry" ? attempt.outcome.retryAt : null
              ]),
              run(afterAttempt, [
                attempt.attempt,
                attempt.outcome._tag === "Retry" ? attempt.outcome.retryAt : null,
                attempt.outcome._tag === "Delivered" ? attempt.at : null,
                attempt.outcome._tag === "GaveUp" ? attempt.at : null,
                attempt.callbackId
              ])
            ), { discard: true })
        ).pipe(orDie("recordCallbackAttempts")),

      callbackAttempts: (callbackId) =>
        executor.run(selectAttempts, [callbackId]).pipe(
          Effect.map((rows) =>
            rows.map((row): TaskStore.CallbackAttempt => ({
              callbackId: String(row["callback_id"]),
              attempt: num(row["attempt"]),
              at: num(row["at"]),
              status: numOrNull(row["status"]),
              error: strOrNull(row["error"]),
              durationMs: num(row["duration_ms"]),
              outcome: row["outcome"] === "Retry"
                ? { _tag: "Retry", retryAt: num(row["retry_at"]) }
                : row["outcome"] === "Delivered"
                ? { _tag: "Delivered" }
                : { _tag: "GaveUp" }
            }))
          ),
          orDie("callbackAttempts")
        )
    }
    return service
  })

/** The SQL TaskStore layer (on the SqlClient in context). */
export const layer: Layer.Layer<TaskStore.TaskStore, StoreError, SqlClient.SqlClient> = Layer.scoped(TaskStore.TaskStore, make())

/** The SQL TaskStore layer with options (table prefix). */
export const layerWith = (options: Options): Layer.Layer<TaskStore.TaskStore, StoreError, SqlClient.SqlClient> =>
  Layer.scoped(TaskStore.TaskStore, make(options))
