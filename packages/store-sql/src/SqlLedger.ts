/**
 * The credits ledger on @effect/sql (SQLite and PostgreSQL). Each movement is one
 * transaction: the entry and its account's sums together. On PostgreSQL a transaction about
 * a task first takes an advisory lock on the task, so two nodes asking for the same
 * movement write it once; on SQLite transactions run one at a time anyway.
 */
import type { SqlClient } from "@effect/sql"
import { Ids, Ledger } from "@mediagate/core"
import type { StoreError } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option } from "effect"
import * as Database from "./Database.js"
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
    const { isPg, sql, tables: t } = yield* Database.prepare("the ledger", options)
    const entries = sql(t.ledgerEntries)
    const balances = sql(t.ledgerBalances)
    const openTable = sql(t.ledgerOpen)

    const insert = (entry: Ledger.LedgerEntry) =>
      sql`INSERT INTO ${entries} ${
        sql.insert({
          id: entry.id,
          account_id: entry.accountId,
          task_id: entry.taskId,
          kind: entry.kind,
          amount: entry.amount,
          held: entry.held,
          at: entry.at,
          note: entry.note
        })
      }`.pipe(
        Effect.zipRight(sql`INSERT INTO ${balances} (account_id, balance, reserved) VALUES (${entry.accountId}, ${entry.amount}, ${entry.held})
          ON CONFLICT (account_id) DO UPDATE SET balance = ${balances}.balance + ${entry.amount}, reserved = ${balances}.reserved + ${entry.held}`),
        Effect.zipRight(
          entry.kind === "reserve"
            ? Effect.asVoid(sql`INSERT INTO ${openTable} (task_id, entry_id, at) VALUES (${entry.taskId}, ${entry.id}, ${entry.at})`)
            : entry.kind === "credit"
            ? Effect.void
            : Effect.asVoid(sql`DELETE FROM ${openTable} WHERE task_id = ${entry.taskId}`)
        ),
        Effect.as(entry)
      )
    const lockTask = (taskId: string) => (isPg ? Effect.asVoid(sql`SELECT pg_advisory_xact_lock(hashtext(${`ledger:${taskId}`}))`) : Effect.void)
    const ofTask = (taskId: string, kinds: ReadonlyArray<string>) =>
      sql<Row>`SELECT * FROM ${entries} WHERE task_id = ${taskId} AND ${sql.in("kind", kinds)}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), entryOf))
      )
    const sums = (accountId: string) =>
      sql<{ balance: number | string; reserved: number | string }>`SELECT balance, reserved FROM ${balances} WHERE account_id = ${accountId}`.pipe(
        Effect.map((rows) => ({ balance: Number(rows[0]?.balance ?? 0), reserved: Number(rows[0]?.reserved ?? 0) }))
      )

    /**
     * On SQLite a movement takes the database's write lock with its first statement (a write
     * that changes nothing): a transaction that read first and wrote later would fail at once
     * (SQLITE_BUSY) whenever another connection, such as the task store's, wrote in between.
     * Taking the lock first, it waits its turn (busy timeout) and reads the latest sums.
     */
    const writeLock = isPg ? Effect.void : Effect.asVoid(sql`UPDATE ${balances} SET balance = balance WHERE 1 = 0`)

    /**
     * One movement in one transaction that, once begun, runs to its commit or rollback: an
     * interrupted caller (a sibling failed, a worker stopping) must not leave a transaction
     * open on a pooled connection, holding its task's lock for whoever comes next.
     */
    const transaction = <A, E, R>(body: Effect.Effect<A, E, R>) => Effect.uninterruptible(sql.withTransaction(Effect.zipRight(writeLock, body)))

    const end = (kind: "charge" | "release") => ({ at, id, taskId }: { readonly id: string; readonly taskId: string; readonly at: number }) =>
      transaction(Effect.gen(function*() {
        yield* lockTask(taskId)
        const done = yield* ofTask(taskId, ["charge", "release"])
        if (Option.isSome(done)) return done.value
        const held = yield* ofTask(taskId, ["reserve"])
        if (Option.isNone(held)) return yield* Effect.fail(new Ledger.NoReservation({ taskId }))
        return yield* insert({
          id,
          accountId: held.value.accountId,
          taskId,
          kind,
          amount: kind === "charge" ? -held.value.held : 0,
          held: -held.value.held,
          at,
          note: null
        })
      })).pipe(refail(kind))

    return {
      credit: ({ accountId, amount, at, id, note }) =>
        !Number.isSafeInteger(amount) || amount <= 0
          ? Effect.dieMessage(`a credit must be a positive whole number of micro-USD (got ${amount})`)
          : transaction(Effect.gen(function*() {
            // A credit asked again (a retried top-up) is the entry already written.
            if (isPg) yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`ledger-credit:${id}`}))`
            const existing = yield* sql<Row>`SELECT * FROM ${entries} WHERE id = ${id}`
            if (existing[0] !== undefined) return { entry: entryOf(existing[0]), written: false }
            const entry = yield* insert({ id, accountId, taskId: null, kind: "credit", amount, held: 0, at, note })
            return { entry, written: true }
          })).pipe(refail("credit")),
      reserve: ({ accountId, amount, at, id, taskId }) =>
        transaction(Effect.gen(function*() {
          yield* lockTask(taskId)
          const existing = yield* ofTask(taskId, ["reserve"])
          if (Option.isSome(existing)) return existing.value
          // On PostgreSQL the account's row is locked from here to the commit.
          if (isPg) yield* sql`SELECT 1 FROM ${balances} WHERE account_id = ${accountId} FOR UPDATE`
          const { balance, reserved } = yield* sums(accountId)
          if (amount > balance - reserved) {
            return yield* Effect.fail(new Ledger.InsufficientCredits({ accountId, requested: amount, available: balance - reserved }))
          }
          return yield* insert({ id, accountId, taskId, kind: "reserve", amount: 0, held: amount, at, note: null })
        })).pipe(refail("reserve")),
      charge: end("charge"),
      release: end("release"),
      // Reads, too, run to their end once begun (see SqlTaskStore's executor on PostgreSQL).
      balance: (accountId) => sums(accountId).pipe(Effect.uninterruptible, refail("balance")),
      entries: (accountId, limit) =>
        sql<Row>`SELECT * FROM ${entries} WHERE account_id = ${accountId} ORDER BY at DESC, id DESC LIMIT ${limit}`.pipe(
          Effect.map((rows) => rows.map(entryOf)),
          Effect.uninterruptible,
          refail("entries")
        ),
      forTask: (taskId) =>
        sql<Row>`SELECT * FROM ${entries} WHERE task_id = ${taskId} ORDER BY at, id`.pipe(Effect.map((rows) => rows.map(entryOf)), Effect.uninterruptible, refail("entries")),
      reservation: (taskId) => ofTask(taskId, ["reserve"]).pipe(Effect.uninterruptible, refail("reservation")),
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
