/**
 * TaskStore on @effect/sql: SQLite (the embedded default) and PostgreSQL (several nodes).
 * Every SqlError becomes the store's StoreError here (logged); none reaches a handler. How
 * statements reach the database is the executor's (`internal/Executor.ts`), the claim of due
 * work is `internal/ClaimDue.ts`. A new task and its price's reservation are written in one
 * transaction (`createHeld`) when the ledger keeps its entries in the same tables' database
 * (`databaseId`); the ledger's statements are `internal/LedgerWrites.ts`.
 */
import type { SqlClient, SqlError } from "@effect/sql"
import { Ids, TaskConflict, TaskStore } from "@mediagate/core"
import type { StoreError, Task } from "@mediagate/core"
import type { Context, Scope } from "effect"
import { Effect, Layer, Option } from "effect"
import * as Database from "./Database.js"
import * as CallbackAttempts from "./internal/CallbackAttempts.js"
import * as ClaimDue from "./internal/ClaimDue.js"
import * as Executor from "./internal/Executor.js"
import * as HeldAtOnce from "./internal/HeldAtOnce.js"
import { refail as refailAs } from "./internal/refail.js"
import { num, numOrNull, records, strOrNull } from "./internal/Rows.js"
import * as LedgerWrites from "./internal/LedgerWrites.js"
import * as Schema from "./Schema.js"
import * as TaskRow from "./TaskRow.js"

/** Settings of the SQL store. */
export type Options = Database.Options

/** The default table prefix. */
export const defaultPrefix = Database.defaultPrefix

/** Driver failures while serving: StoreError, logged as the store's. */
const refail = (operation: string) => refailAs("store", operation)

/** The SQL TaskStore. Runs the migrations first; on SQLite it shares its client's one connection, operation by operation. */
export const make = (options: Options = {}): Effect.Effect<
  Context.Tag.Service<TaskStore.TaskStore>,
  StoreError,
  SqlClient.SqlClient | Scope.Scope
> =>
  Effect.gen(function*() {
    const db = yield* Database.prepare("the task store", options)
    const { compile, isPg, sql, tables: t } = db
    const databaseId = yield* Schema.databaseIdOf(options.tablePrefix ?? Database.defaultPrefix).pipe(refail("start"))
    const executor = yield* Executor.make(sql, isPg)
    const ledger = LedgerWrites.make(db)
    const heldAtOnce = isPg ? HeldAtOnce.make(db) : undefined
    const claimDue = ClaimDue.make(executor, db)
    const recordCallbackAttempts = CallbackAttempts.make(executor, db)

    // Statements, compiled once. Written with ?; PostgreSQL numbers its placeholders.
    const tasks = `"${t.tasks}"`
    const modelOf = Schema.modelExpression(isPg)
    const columns = TaskRow.columns
    const insertTask = compile(`INSERT INTO ${tasks} (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`)
    const updateColumns = columns.filter((column) => column !== "id")
    const updateText = `UPDATE ${tasks} SET ${updateColumns.map((column) => `${column} = ?`).join(", ")} WHERE id = ? AND version = ? RETURNING id`
    const updateTask = compile(updateText)
    // PostgreSQL: an update with its callback rows in one statement on its own (no BEGIN or
    // COMMIT): the rows written only where the version check let the update through. One
    // statement per callback count, compiled once.
    const updatedWith = new Map<number, string>()
    const updateWithCallbacks = (count: number) => {
      let text = updatedWith.get(count)
      if (text === undefined) {
        text = compile(`WITH updated AS (${updateText})${HeldAtOnce.callbackInserts(t.callbacks, "updated", count)} SELECT id FROM updated`)
        updatedWith.set(count, text)
      }
      return text
    }
    // PostgreSQL: the same, with a settlement's CTEs after it, which close the reservation only
    // where the update went through (`updateSettled`).
    const endedWith = new Map<number, string>()
    const updateEndedWith = (count: number) => {
      let text = endedWith.get(count)
      if (text === undefined) {
        text = compile(
          `WITH updated AS (${updateText})${HeldAtOnce.callbackInserts(t.callbacks, "updated", count)}, ${
            LedgerWrites.endCtes(t, " AND EXISTS (SELECT 1 FROM updated)")
          } SELECT (SELECT count(*) FROM updated) AS updated, (SELECT count(*) FROM ended) AS ended`
        )
        endedWith.set(count, text)
      }
      return text
    }
    const insertCallback = compile(
      `INSERT INTO "${t.callbacks}" (id, task_id, url, created_at, attempts, next_attempt_at, event, lease_until) VALUES (?, ?, ?, ?, 0, ?, ?, ?)`
    )
    const selectById = compile(`SELECT * FROM ${tasks} WHERE id = ?`)
    const selectByIdOwner = compile(`SELECT * FROM ${tasks} WHERE id = ? AND owner_id = ?`)
    const releaseLeases = compile(
      `UPDATE ${tasks} SET lease_owner = NULL, lease_until = NULL, version = version + 1 WHERE lease_owner = ? AND due_at IS NOT NULL`
    )
    const countPending = compile(`SELECT COUNT(*) AS n FROM ${tasks} WHERE status = 'PENDING'`)
    const listFirst = compile(`SELECT * FROM ${tasks} WHERE owner_id = ? ORDER BY id DESC LIMIT ?`)
    const listAfter = compile(`SELECT * FROM ${tasks} WHERE owner_id = ? AND id < ? ORDER BY id DESC LIMIT ?`)
    /** A filtered list, compiled once per shape (which conditions, how many statuses); `list` and `listAll`. */
    const listStatements = new Map<string, string>()
    const listFiltered = (cursor: boolean, filter: TaskStore.AdminListFilter) => {
      const shape = [
        filter.ownerId === undefined ? "" : "o",
        cursor ? "c" : "",
        filter.statuses === undefined ? "" : `s${filter.statuses.length}`,
        filter.model === undefined ? "" : "m",
        filter.provider === undefined ? "" : "p",
        filter.createdAfter === undefined ? "" : "a",
        filter.createdBefore === undefined ? "" : "b"
      ].join("")
      let statement = listStatements.get(shape)
      if (statement === undefined) {
        const conditions = [
          "1 = 1",
          ...(filter.ownerId === undefined ? [] : ["owner_id = ?"]),
          ...(cursor ? ["id < ?"] : []),
          ...(filter.statuses === undefined ? [] : [`status IN (${filter.statuses.map(() => "?").join(", ")})`]),
          // The same expression as the index of migration 0015.
          ...(filter.model === undefined ? [] : [`${modelOf} = ?`]),
          ...(filter.provider === undefined ? [] : ["provider = ?"]),
          ...(filter.createdAfter === undefined ? [] : ["created_at > ?"]),
          ...(filter.createdBefore === undefined ? [] : ["created_at < ?"])
        ]
        listStatements.set(shape, statement = compile(`SELECT * FROM ${tasks} WHERE ${conditions.join(" AND ")} ORDER BY id DESC LIMIT ?`))
      }
      return statement
    }
    /** A page of the tasks the filter lets through, newest first (ids are UUIDv7), after the cursor. */
    const listPage = (
      statement: string,
      { cursor, filter, limit }: { readonly limit: number; readonly cursor: string | undefined; readonly filter: TaskStore.AdminListFilter }
    ) => {
      const params = [
        ...(filter.ownerId === undefined ? [] : [filter.ownerId]),
        ...(cursor === undefined ? [] : [cursor]),
        ...(filter.statuses ?? []),
        ...(filter.model === undefined ? [] : [filter.model]),
        ...(filter.provider === undefined ? [] : [filter.provider]),
        ...(filter.createdAfter === undefined ? [] : [filter.createdAfter]),
        ...(filter.createdBefore === undefined ? [] : [filter.createdBefore]),
        limit + 1
      ]
      // An empty status list lets nothing through (IN () is not SQL).
      if (filter.statuses?.length === 0) return Effect.succeed<TaskStore.TaskPage>({ tasks: [], nextCursor: null })
      return executor.run(statement, params).pipe(
        Effect.flatMap((rows) =>
          Effect.map(records(rows.slice(0, limit)), (page): TaskStore.TaskPage => ({
            tasks: page,
            nextCursor: rows.length > limit ? page[page.length - 1]!.id : null
          }))
        )
      )
    }
    const selectCallbacks = compile(`SELECT * FROM "${t.callbacks}" WHERE task_id = ? ORDER BY created_at, id`)
    const redeliverCallbacks = compile(
      `UPDATE "${t.callbacks}" SET round_start = attempts, next_attempt_at = ?, delivered_at = NULL, failed_at = NULL
       WHERE task_id = ? AND (event IS NULL OR event = 'completed') RETURNING id`
    )
    const anyCallbackDue = compile(
      `SELECT 1 AS found FROM "${t.callbacks}"
       WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?) LIMIT 1`
    )
    // Each claimed callback comes back with its task's row as one JSON object (null: the task is
    // gone), so that the deliverer does not read each task again: one statement (and on SQLite
    // one round trip to its worker) fewer per callback.
    const taskObject = `${isPg ? "json_build_object" : "json_object"}(${columns.map((column) => `'${column}', t.${column}`).join(", ")})`
    const claimCallbacks = compile(
      `UPDATE "${t.callbacks}" SET lease_until = ?
       WHERE id IN (
         SELECT id FROM "${t.callbacks}"
         WHERE delivered_at IS NULL AND failed_at IS NULL AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)
         ORDER BY next_attempt_at LIMIT ?${isPg ? " FOR UPDATE SKIP LOCKED" : ""}
       )
       RETURNING *, (SELECT ${taskObject} FROM ${tasks} t WHERE t.id = "${t.callbacks}".task_id) AS task_row`
    )
    /** A claimed callback's task_row: SQLite answers the JSON as text, PostgreSQL parsed. */
    const taskOf = (value: unknown): Task.TaskRecord | null =>
      value === null || value === undefined ? null : TaskRow.fromRow(typeof value === "string" ? JSON.parse(value) : value)
    const selectAttempts = compile(`SELECT * FROM "${t.callbackAttempts}" WHERE callback_id = ? ORDER BY attempt`)

    /** A callback row's event, when it has one (null: the spec's one terminal callback). */
    const eventOf = (row: Record<string, unknown>): { readonly event?: Task.CallbackEvent } => {
      const event = row["event"]
      return event === "started" || event === "progress" || event === "completed" ? { event } : {}
    }

    const writeCallbacks = (run: Executor.Run, callbacks: ReadonlyArray<TaskStore.CallbackRow>) =>
      Effect.forEach(callbacks, (row) => Executor.later(run)(insertCallback, HeldAtOnce.callbackRowValues(row)), { discard: true })
    const callbackStatements = (callbacks: ReadonlyArray<TaskStore.CallbackRow>) => callbacks.map((row) => [insertCallback, HeldAtOnce.callbackRowValues(row)] as const)

    const updateParams = (next: Task.TaskRecord, expectedVersion: number) => {
      const row = TaskRow.toRow(next)
      return [...updateColumns.map((column) => row[column]), row.id, expectedVersion]
    }
    // Made only when the check fails: an error captures a stack trace.
    const conflict = (next: Task.TaskRecord, expectedVersion: number) => new TaskConflict({ taskId: next.id, expectedVersion })
    /** SQLite: the update in the caller's transaction (its answer is the version check), then its callbacks. */
    const updatedThen = (run: Executor.Run, next: Task.TaskRecord, params: ReadonlyArray<unknown>, expectedVersion: number, callbacks: ReadonlyArray<TaskStore.CallbackRow>) =>
      Effect.gen(function*() {
        const updated = yield* run(updateTask, params)
        if (updated.length === 0) return yield* Effect.fail(conflict(next, expectedVersion))
        yield* writeCallbacks(run, callbacks)
      })

    const service: Context.Tag.Service<TaskStore.TaskStore> = {
      create: (task, callbacks = []) =>
        (callbacks.length === 0
          ? executor.run(insertTask, TaskRow.values(TaskRow.toRow(task)))
          : executor.transaction((run) =>
            Effect.zipRight(Executor.later(run)(insertTask, TaskRow.values(TaskRow.toRow(task))), writeCallbacks(run, callbacks))
          )).pipe(Effect.asVoid, refail("create")),

      databaseId,
      // The common case in one go: on PostgreSQL one statement on its own (`HeldAtOnce`),
      // which holds the account's sums row for no round trip at all; on SQLite one round trip
      // (`heldInOneGo`). What they leave (too little credit, no sums row yet, a hold of nothing
      // or against a key's cap) goes to the transaction, which writes the task and its
      // callbacks first and the hold last, so that on PostgreSQL the sums row is locked for the
      // COMMIT's round trip alone; too little credit rolls the task back.
      createHeld: (task, callbacks, hold) => {
        const row = TaskRow.toRow(task)
        const inTransaction = (triedAtOnce: boolean) =>
          executor.transaction((run) =>
            Executor.later(run)(insertTask, TaskRow.values(row)).pipe(
              Effect.zipRight(writeCallbacks(run, callbacks)),
              Effect.zipRight(ledger.reserve(run, hold, { newTask: true, triedAtOnce }))
            )
          )
        const atOnce = heldAtOnce?.(row, callbacks, hold)
        const held = executor.atOnce === undefined ? undefined : ledger.heldInOneGo(hold)
        return (atOnce !== undefined
          ? Effect.flatMap(executor.run(atOnce.text, atOnce.params), (written) => written.length > 0 ? Effect.void : inTransaction(true))
          : executor.atOnce !== undefined && held !== undefined
          ? Effect.flatMap(executor.atOnce([...held, [insertTask, TaskRow.values(row)], ...callbackStatements(callbacks)]), (done) =>
            done._tag === "Committed" ? Effect.void : inTransaction(false))
          : inTransaction(false)).pipe(Effect.asVoid, refail("createHeld"))
      },

      get: (id) =>
        executor.run(selectById, [id]).pipe(
          Effect.flatMap((rows) => Effect.map(records(rows.slice(0, 1)), (found) => Option.fromNullable(found[0]))),
          refail("get")
        ),

      getOwned: (id, owner) =>
        executor.run(selectByIdOwner, [id, owner]).pipe(
          Effect.flatMap((rows) => Effect.map(records(rows.slice(0, 1)), (found) => Option.fromNullable(found[0]))),
          refail("getOwned")
        ),

      update: (next, expectedVersion, callbacks = []) => {
        const params = updateParams(next, expectedVersion)
        const checked = (updated: ReadonlyArray<unknown>) => updated.length === 0 ? Effect.fail(conflict(next, expectedVersion)) : Effect.void
        return (callbacks.length === 0
          ? Effect.flatMap(executor.run(updateTask, params), checked)
          : isPg
          ? Effect.flatMap(executor.run(updateWithCallbacks(callbacks.length), [...params, ...HeldAtOnce.callbackValues(callbacks)]), checked)
          : executor.atOnce !== undefined
          // The SQLite worker: in one go, the update's version check the guard (stopped there: a conflict).
          ? Effect.flatMap(executor.atOnce([[updateTask, params, "guard"], ...callbackStatements(callbacks)]), (done) =>
            done._tag === "Committed" ? Effect.void : Effect.fail(conflict(next, expectedVersion)))
          : executor.transaction((run) => updatedThen(run, next, params, expectedVersion, callbacks))).pipe(refail("update"))
      },

      // The ending write, its callbacks and the settlement together. SQLite: in one
      // transaction, in one round trip where the reservation is open (`endedInOneGo`): a stale
      // version stops it at the update, anything else the settlement's guard leaves to the
      // transaction. PostgreSQL: in one statement without BEGIN or COMMIT (a transaction would
      // hold the account's row across round trips), the settlement's CTEs (`endAtOnce`) only
      // where the update went through; where they wrote no end (settled already, no
      // reservation, a capped key's release), the ledger's transaction after it.
      updateSettled: (next: Task.TaskRecord, expectedVersion: number, callbacks: ReadonlyArray<TaskStore.CallbackRow>, end: { readonly id: string; readonly at: number; readonly kind: "charge" | "release" }) => {
        const params = updateParams(next, expectedVersion)
        const ending = { ...end, taskId: next.id }
        // No reservation (a task stored before credits, or unbilled): nothing to settle.
        const settle = (run: Executor.Run) => ledger.end(run, ending).pipe(Effect.catchTag("NoReservation", () => Effect.void), Effect.asVoid)
        if (isPg) {
          return executor.run(updateEndedWith(callbacks.length), [...params, ...HeldAtOnce.callbackValues(callbacks), ...LedgerWrites.endValues(ending)]).pipe(
            Effect.flatMap(([row]): Effect.Effect<void, TaskConflict | SqlError.SqlError> =>
              num(row?.["updated"]) === 0 ? Effect.fail(conflict(next, expectedVersion)) : num(row?.["ended"]) > 0 ? Effect.void : executor.transaction(settle)
            ),
            refail("updateSettled")
          )
        }
        const inTransaction = executor.transaction((run) => Effect.zipRight(updatedThen(run, next, params, expectedVersion, callbacks), settle(run)))
        return (executor.atOnce === undefined ? inTransaction : executor.atOnce([
          [updateTask, params, "guard"],
          ...callbackStatements(callbacks),
          ...ledger.endedInOneGo(ending)
        ]).pipe(
          Effect.flatMap((done) =>
            done._tag === "Committed" ? Effect.void : done.stoppedAt === 0 ? Effect.fail(conflict(next, expectedVersion)) : inTransaction
          )
        )).pipe(refail("updateSettled"))
      },

      claimDue: (options) => claimDue(options).pipe(refail("claimDue")),

      releaseLeases: (worker) => executor.run(releaseLeases, [worker]).pipe(Effect.asVoid, refail("releaseLeases")),
      countPending: executor.run(countPending, []).pipe(
        Effect.map((rows) => Number((rows[0] as { readonly n?: unknown } | undefined)?.n ?? 0)),
        refail("countPending")
      ),

      list: (ownerId, { cursor, filter = {}, limit }) => {
        const filtered = filter.statuses !== undefined || filter.model !== undefined || filter.createdAfter !== undefined ||
          filter.createdBefore !== undefined
        const statement = !filtered ? (cursor === undefined ? listFirst : listAfter) : listFiltered(cursor !== undefined, { ...filter, ownerId })
        return listPage(statement, { cursor, filter: { ...filter, ownerId }, limit }).pipe(refail("list"))
      },
      listAll: ({ cursor, filter = {}, limit }) => listPage(listFiltered(cursor !== undefined, filter), { cursor, filter, limit }).pipe(refail("listAll")),

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
                ...eventOf(row),
                attempts: num(row["attempts"]),
                status,
                nextAttemptAt: status === "pending" ? numOrNull(row["next_attempt_at"]) : null
              }
            })
          ),
          refail("callbacks")
        ),

      redeliverCallbacks: (taskId, now) =>
        executor.run(redeliverCallbacks, [now, taskId]).pipe(Effect.map((rows) => rows.length), refail("redeliverCallbacks")),

      // On SQLite, look first (`anyCallbackDue`); on the worker the look and the claim go in one round trip.
      claimCallbacks: ({ leaseUntil, limit, now }) =>
        (isPg
          ? executor.run(claimCallbacks, [leaseUntil, now, now, limit])
          : executor.atOnce !== undefined
          ? Effect.map(
            executor.atOnce([[anyCallbackDue, [now, now], "guard"], [claimCallbacks, [leaseUntil, now, now, limit]]]),
            (done) => done._tag === "Committed" ? done.rows[1]! : []
          )
          : Effect.flatMap(executor.run(anyCallbackDue, [now, now]), (due) =>
            due.length === 0 ? Effect.succeed([]) : executor.run(claimCallbacks, [leaseUntil, now, now, limit]))).pipe(
          Effect.map((rows) =>
            rows
              .map((row) => ({
                id: String(row["id"]),
                taskId: Ids.TaskId.make(String(row["task_id"])),
                url: String(row["url"]),
                createdAt: num(row["created_at"]),
                ...eventOf(row),
                attempts: num(row["attempts"]),
                roundStart: num(row["round_start"]),
                task: taskOf(row["task_row"]),
                due: num(row["next_attempt_at"])
              }))
              .sort((a, b) => a.due - b.due)
              .map(({ due: _, ...callback }) => callback)
          ),
          refail("claimCallbacks")
        ),

      recordCallbackAttempt: (attempt) => service.recordCallbackAttempts([attempt]),

      recordCallbackAttempts: (attempts) => recordCallbackAttempts(attempts).pipe(refail("recordCallbackAttempts")),

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
          refail("callbackAttempts")
        )
    }
    return service
  })

/** The SQL TaskStore layer (on the SqlClient in context). */
export const layer: Layer.Layer<TaskStore.TaskStore, StoreError, SqlClient.SqlClient> = Layer.scoped(TaskStore.TaskStore, make())

/** The SQL TaskStore layer with options (table prefix). */
export const layerWith = (options: Options): Layer.Layer<TaskStore.TaskStore, StoreError, SqlClient.SqlClient> =>
  Layer.scoped(TaskStore.TaskStore, make(options))
