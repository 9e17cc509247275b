/**
 * The credits ledger on @effect/sql (SQLite and PostgreSQL). Each movement is one
 * transaction of statements compiled once (`Executor.perOperation`): the entry and its
 * account's sums together. On PostgreSQL a transaction about
 * a task first takes an advisory lock on the task, so two nodes asking for the same
 * movement write it once; on SQLite transactions run one at a time anyway.
 */
import type { SqlClient } from "@effect/sql"
import { Ids, Ledger } from "@mediagate/core"
import type { StoreError } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option } from "effect"
import * as Database from "./Database.js"
import * as Executor from "./internal/Executor.js"
import { refail as refailAs } from "./internal/refail.js"

/** Settings of the SQL ledger. */
export type Options = Database.Options

type Row = {
  id: string
  account_id: string
  task_id: string | null
  kind: string
  amount: number | string
  held: number | string
  at: number | string
  note: string | null
}

const entryOf = (row: Row): Ledger.LedgerEntry => ({
  id: String(row.id),
  accountId: Ids.AccountId.make(String(row.account_id)),
  taskId: row.task_id === null ? null : String(row.task_id),
  kind: String(row.kind) as Ledger.EntryKind,
  amount: Number(row.amount),
  held: Number(row.held),
  at: Number(row.at),
  note: row.note === null ? null : String(row.note)
})

/** Driver failures while serving: StoreError, logged as the ledger's. */
const refail = (operation: string) => refailAs("ledger", operation)

/** The SQL ledger. Runs the migrations first. */
export const make = (options: Options = {}): Effect.Effect<
  Context.Tag.Service<Ledger.Ledger>,
  StoreError,
  SqlClient.SqlClient
> =>
  Effect.gen(function*() {
    const { compile, isPg, sql, tables: t } = yield* Database.prepare("the ledger", options)
    const entries = sql(t.ledgerEntries)
    const openTable = sql(t.ledgerOpen)

    // The movements' statements, compiled once and run on the transaction's connection
    // (Executor.perOperation): the query builder's machinery around each statement cost more
    // than the statement (docs/benchmarks.md), and a movement runs several.
    const quoted = { entries: `"${t.ledgerEntries}"`, balances: `"${t.ledgerBalances}"`, open: `"${t.ledgerOpen}"` }
    const insertEntry = compile(`INSERT INTO ${quoted.entries} (id, account_id, task_id, kind, amount, held, at, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
    const addToSums = compile(
      `INSERT INTO ${quoted.balances} (account_id, balance, reserved) VALUES (?, ?, ?)
       ON CONFLICT (account_id) DO UPDATE SET balance = ${quoted.balances}.balance + excluded.balance, reserved = ${quoted.balances}.reserved + excluded.reserved`
    )
    const openReservation = compile(`INSERT INTO ${quoted.open} (task_id, entry_id, at) VALUES (?, ?, ?)`)
    const closeReservation = compile(`DELETE FROM ${quoted.open} WHERE task_id = ?`)
    // The kinds written out, not bound: the partial unique indexes of migration 0011 answer these.
    const reservationOf = compile(`SELECT * FROM ${quoted.entries} WHERE task_id = ? AND kind = 'reserve'`)
    const endOf = compile(`SELECT * FROM ${quoted.entries} WHERE task_id = ? AND kind IN ('charge', 'release')`)
    const entryById = compile(`SELECT * FROM ${quoted.entries} WHERE id = ?`)
    const sumsOf = compile(`SELECT balance, reserved FROM ${quoted.balances} WHERE account_id = ?`)
    const lockAccount = compile(`SELECT 1 FROM ${quoted.balances} WHERE account_id = ? FOR UPDATE`)
    // PostgreSQL: the hold in one statement, as the account's row is locked by its UPDATE until
    // the commit; a submit of the same account waits for one statement and the commit, not
    // for five round trips. The UPDATE's condition is checked again on the row's latest
    // version after that wait (READ COMMITTED), so the sums never go below what is held. No
    // row back: too little credit, or no sums row yet, which the statements below answer.
    const holdAtOnce = compile(
      `WITH held AS (
         UPDATE ${quoted.balances} SET reserved = reserved + ? WHERE account_id = ? AND balance - reserved >= ? RETURNING account_id
       ), entry AS (
         INSERT INTO ${quoted.entries} (id, account_id, task_id, kind, amount, held, at, note)
         SELECT ?, account_id, ?, 'reserve', 0, ?, ?, NULL FROM held RETURNING id
       )
       INSERT INTO ${quoted.open} (task_id, entry_id, at) SELECT ?, id, ? FROM entry RETURNING entry_id`
    )
    const advisoryLock = compile(`SELECT pg_advisory_xact_lock(hashtext(?))`)

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

    const write = (run: Executor.Run, entry: Ledger.LedgerEntry) =>
      run(insertEntry, [entry.id, entry.accountId, entry.taskId, entry.kind, entry.amount, entry.held, entry.at, entry.note]).pipe(
        Effect.zipRight(run(addToSums, [entry.accountId, entry.amount, entry.held])),
        Effect.zipRight(
          entry.kind === "reserve"
            ? run(openReservation, [entry.taskId, entry.id, entry.at])
            : entry.kind === "credit"
            ? Effect.void
            : run(closeReservation, [entry.taskId])
        ),
        Effect.as(entry)
      )
    const lockTask = (run: Executor.Run, taskId: string) => (isPg ? Effect.asVoid(run(advisoryLock, [`ledger:${taskId}`])) : Effect.void)
    const first = (rows: ReadonlyArray<Record<string, unknown>>) => Option.map(Option.fromNullable(rows[0] as Row | undefined), entryOf)
    const sums = (run: Executor.Run, accountId: string) =>
      run(sumsOf, [accountId]).pipe(
        Effect.map((rows) => ({ balance: Number(rows[0]?.["balance"] ?? 0), reserved: Number(rows[0]?.["reserved"] ?? 0) }))
      )

    const end = (kind: "charge" | "release") => ({ at, id, taskId }: { readonly id: string; readonly taskId: string; readonly at: number }) =>
      transaction((run) =>
        Effect.gen(function*() {
          yield* lockTask(run, taskId)
          const done = first(yield* run(endOf, [taskId]))
          if (Option.isSome(done)) return done.value
          const held = first(yield* run(reservationOf, [taskId]))
          if (Option.isNone(held)) return yield* Effect.fail(new Ledger.NoReservation({ taskId }))
          return yield* write(run, {
            id,
            accountId: held.value.accountId,
            taskId,
            kind,
            amount: kind === "charge" ? -held.value.held : 0,
            held: -held.value.held,
            at,
            note: null
          })
        })
      ).pipe(refail(kind))

    return {
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
      reserve: ({ accountId, amount, at, id, taskId }) =>
        transaction((run) =>
          Effect.gen(function*() {
            yield* lockTask(run, taskId)
            const existing = first(yield* run(reservationOf, [taskId]))
            if (Option.isSome(existing)) return existing.value
            const entry: Ledger.LedgerEntry = { id, accountId, taskId, kind: "reserve", amount: 0, held: amount, at, note: null }
            if (isPg && amount > 0) {
              const held = yield* run(holdAtOnce, [amount, accountId, amount, id, taskId, amount, at, taskId, at])
              if (held.length > 0) return entry
            }
            // On PostgreSQL the account's row is locked from here to the commit.
            if (isPg) yield* run(lockAccount, [accountId])
            const { balance, reserved } = yield* sums(run, accountId)
            if (amount > balance - reserved) {
              return yield* Effect.fail(new Ledger.InsufficientCredits({ accountId, requested: amount, available: balance - reserved }))
            }
            return yield* write(run, entry)
          })
        ).pipe(refail("reserve")),
      charge: end("charge"),
      release: end("release"),
      // Reads, too, run to their end once begun (see SqlTaskStore's executor on PostgreSQL).
      balance: (accountId) => sums(executor.run, accountId).pipe(refail("balance")),
      entries: (accountId, limit) =>
        sql<Row>`SELECT * FROM ${entries} WHERE account_id = ${accountId} ORDER BY at DESC, id DESC LIMIT ${limit}`.pipe(
          Effect.map((rows) => rows.map(entryOf)),
          Effect.uninterruptible,
          refail("entries")
        ),
      forTask: (taskId) =>
        sql<Row>`SELECT * FROM ${entries} WHERE task_id = ${taskId} ORDER BY at, id`.pipe(Effect.map((rows) => rows.map(entryOf)), Effect.uninterruptible, refail("entries")),
      reservation: (taskId) => executor.run(reservationOf, [taskId]).pipe(Effect.map(first), refail("reservation")),
      open: ({ after = { at: -1, taskId: "" }, before, limit }) =>
        sql<Row>`SELECT e.* FROM ${openTable} o JOIN ${entries} e ON e.id = o.entry_id
          WHERE o.at < ${before} AND (o.at > ${after.at} OR (o.at = ${after.at} AND o.task_id > ${after.taskId}))
          ORDER BY o.at, o.task_id LIMIT ${limit}`.pipe(Effect.map((rows) => rows.map(entryOf)), Effect.uninterruptible, refail("open"))
    }
  })

/** The SQL ledger layer (on the SqlClient in context). */
export const layer: Layer.Layer<Ledger.Ledger, StoreError, SqlClient.SqlClient> = Layer.effect(Ledger.Ledger, make())

/** The SQL ledger layer with options (table prefix). */
export const layerWith = (options: Options): Layer.Layer<Ledger.Ledger, StoreError, SqlClient.SqlClient> =>
  Layer.effect(Ledger.Ledger, make(options))
