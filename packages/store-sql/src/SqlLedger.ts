/**
 * The credits ledger on @effect/sql (SQLite and PostgreSQL). Each movement is one
 * transaction of statements compiled once (`internal/LedgerWrites`, `Executor.perOperation`):
 * the entry and its account's sums together. On PostgreSQL a transaction about
 * a task first takes an advisory lock on the task, so two nodes asking for the same
 * movement write it once; on SQLite transactions run one at a time anyway. Its `databaseId`
 * names its tables' database: the SQL task store on the same one writes a submit's
 * reservation in the transaction that stores the task (`TaskStore.createHeld`).
 */
import type { SqlClient } from "@effect/sql"
import { Ledger } from "@mediagate/core"
import type { StoreError } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option } from "effect"
import * as Database from "./Database.js"
import * as Schema from "./Schema.js"
import * as Executor from "./internal/Executor.js"
import * as LedgerWrites from "./internal/LedgerWrites.js"
import { refail as refailAs } from "./internal/refail.js"

/** Settings of the SQL ledger. */
export type Options = Database.Options

/** Driver failures while serving: StoreError, logged as the ledger's. */
const refail = (operation: string) => refailAs("ledger", operation)

/** The SQL ledger. Runs the migrations first. */
export const make = (options: Options = {}): Effect.Effect<
  Context.Tag.Service<Ledger.Ledger>,
  StoreError,
  SqlClient.SqlClient
> =>
  Effect.gen(function*() {
    const prepared = yield* Database.prepare("the ledger", options)
    const { isPg, sql, tables: t } = prepared
    const entries = sql(t.ledgerEntries)
    // Entries of one instant in the order they can happen: a task's reservation before its
    // charge or release (ids are random, so they alone would order them by chance).
    const order = sql.literal("CASE kind WHEN 'credit' THEN 0 WHEN 'reserve' THEN 1 ELSE 2 END")
    const openTable = sql(t.ledgerOpen)
    const databaseId = yield* Schema.databaseIdOf(options.tablePrefix ?? Database.defaultPrefix).pipe(refail("start"))
    const { advisoryLock, end, endOnItsOwn, entryById, first, reservationOf, reserve, sums, write } = LedgerWrites.make(prepared)

    /**
     * One movement in one transaction that, once begun, runs to its commit or rollback: an
     * interrupted caller (a sibling failed, a worker stopping) must not leave a transaction
     * open on a pooled connection, holding its task's lock for whoever comes next. On SQLite
     * `BEGIN IMMEDIATE` takes the write lock first: a transaction that read first and wrote
     * later would fail at once (SQLITE_BUSY) whenever another connection, such as the task
     * store's, wrote in between; taking it first, it waits its turn (busy timeout) and reads
     * the latest sums.
     */
    const executor = Executor.perOperation(sql, isPg ? "BEGIN" : "BEGIN IMMEDIATE")
    const transaction = executor.transaction

    const inTransaction = (kind: "charge" | "release", movement: { readonly id: string; readonly taskId: string; readonly at: number }) =>
      transaction((run) => end(run, { ...movement, kind }))

    // On PostgreSQL a settlement is first tried as one statement on its own (`endAtOnce`), which
    // holds the account's row for no round trip; what it leaves (settled already, no
    // reservation, the release of a reservation made with a key) the transaction answers.
    const settle = (kind: "charge" | "release") => (movement: { readonly id: string; readonly taskId: string; readonly at: number }) =>
      (isPg
        ? Effect.flatMap(endOnItsOwn(executor.run, { ...movement, kind }), (ended) => Option.isSome(ended) ? Effect.succeed(ended.value) : inTransaction(kind, movement))
        : inTransaction(kind, movement)).pipe(refail(kind))

    return {
      databaseId,
      credit: ({ accountId, amount, at, id, note }) =>
        !Number.isSafeInteger(amount) || amount <= 0
          ? Effect.dieMessage(`a credit must be a positive whole number of micro-USD (got ${amount})`)
          : transaction((run) =>
            Effect.gen(function*() {
              // A credit asked again (a retried top-up) is the entry already written.
              if (isPg) yield* run(advisoryLock, [`ledger-credit:${id}`])
              const existing = first(yield* run(entryById, [id]))
              if (Option.isSome(existing)) return { entry: existing.value, written: false }
              const entry = yield* write(run, { id, accountId, taskId: null, kind: "credit", amount, held: 0, at, note })
              return { entry, written: true }
            })
          ).pipe(refail("credit")),
      reserve: (hold) => transaction((run) => reserve(run, hold)).pipe(refail("reserve")),
      charge: settle("charge"),
      release: settle("release"),
      // Reads, too, run to their end once begun (see SqlTaskStore's executor on PostgreSQL).
      balance: (accountId) => sums(executor.run, accountId).pipe(refail("balance")),
      entries: (accountId, limit) =>
        sql<LedgerWrites.EntryRow>`SELECT * FROM ${entries} WHERE account_id = ${accountId} ORDER BY at DESC, ${order} DESC, id DESC LIMIT ${limit}`.pipe(
          Effect.map((rows) => rows.map(LedgerWrites.entryOf)),
          Effect.uninterruptible,
          refail("entries")
        ),
      forTask: (taskId) =>
        sql<LedgerWrites.EntryRow>`SELECT * FROM ${entries} WHERE task_id = ${taskId} ORDER BY at, ${order}, id`.pipe(Effect.map((rows) => rows.map(LedgerWrites.entryOf)), Effect.uninterruptible, refail("entries")),
      reservation: (taskId) => executor.run(reservationOf, [taskId]).pipe(Effect.map(first), refail("reservation")),
      open: ({ after = { at: -1, taskId: "" }, before, limit }) =>
        sql<LedgerWrites.EntryRow>`SELECT e.* FROM ${openTable} o JOIN ${entries} e ON e.id = o.entry_id
          WHERE o.at < ${before} AND (o.at > ${after.at} OR (o.at = ${after.at} AND o.task_id > ${after.taskId}))
          ORDER BY o.at, o.task_id LIMIT ${limit}`.pipe(Effect.map((rows) => rows.map(LedgerWrites.entryOf)), Effect.uninterruptible, refail("open"))
    }
  })

/** The SQL ledger layer (on the SqlClient in context). */
export const layer: Layer.Layer<Ledger.Ledger, StoreError, SqlClient.SqlClient> = Layer.effect(Ledger.Ledger, make())

/** The SQL ledger layer with options (table prefix). */
export const layerWith = (options: Options): Layer.Layer<Ledger.Ledger, StoreError, SqlClient.SqlClient> =>
  Layer.effect(Ledger.Ledger, make(options))
