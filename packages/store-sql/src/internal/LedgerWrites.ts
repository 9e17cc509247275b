/**
 * The ledger's movements as statements on a transaction's connection, compiled once: what
 * the SQL ledger runs in a transaction of its own, and what the task store runs in the
 * transaction that stores a new task (`SqlTaskStore`'s `createHeld`), so that a reservation
 * and its task are written both or neither. On PostgreSQL a movement about a task first
 * takes an advisory lock on the task, so two nodes asking for the same movement write it once.
 *
 * A reservation of a key with a monthly cap counts against it in the table key_spend (one row
 * per key and UTC month of the reservation), in the reservation's transaction: one upsert whose
 * update is conditional on staying within the cap, so that racing submits, on one node or
 * several, never take the key past it (on PostgreSQL the row is locked by the upsert until
 * the commit and the condition is checked again on its latest version, as `holdAtOnce` does
 * for the balance). A release gives its amount back to the reservation's month; a charge
 * leaves it counted.
 */
import type { SqlError } from "@effect/sql"
import { Ids, KeyScopes, Ledger } from "@mediagate/core"
import { Effect, Option } from "effect"
import type * as Database from "../Database.js"
import type * as Batch from "./Batch.js"
import * as Executor from "./Executor.js"
import * as HeldAtOnce from "./HeldAtOnce.js"
import type { Run } from "./Executor.js"

/** A row of the entries table. */
export type EntryRow = {
  id: string
  account_id: string
  task_id: string | null
  kind: string
  amount: number | string
  held: number | string
  at: number | string
  note: string | null
  key_id?: string | null
  model?: string | null
}

/** A row of the entries table as an entry. */
export const entryOf = (row: EntryRow): Ledger.LedgerEntry => ({
  id: String(row.id),
  accountId: Ids.AccountId.make(String(row.account_id)),
  taskId: row.task_id === null ? null : String(row.task_id),
  kind: String(row.kind) as Ledger.EntryKind,
  amount: Number(row.amount),
  held: Number(row.held),
  at: Number(row.at),
  note: row.note === null ? null : String(row.note),
  // Absent, not null, where unknown (credits, entries from before): as the memory ledger's.
  ...(row.key_id === null || row.key_id === undefined ? {} : { keyId: String(row.key_id) }),
  ...(row.model === null || row.model === undefined ? {} : { model: String(row.model) })
})

/**
 * PostgreSQL: a charge's or release's CTEs (`closed`, `ended`, `moved`; see `endAtOnce`),
 * the reservation closed only where `gate` (a condition, `AND ...`, or empty) holds. Its
 * parameters are `endValues`.
 */
export const endCtes = (t: Database.Prepared["tables"], gate: string): string =>
  `closed AS (
       DELETE FROM "${t.ledgerOpen}" o USING "${t.ledgerEntries}" r
       WHERE o.task_id = ? AND r.id = o.entry_id AND (? = 'charge' OR r.key_id IS NULL OR r.held = 0)${gate}
       RETURNING r.account_id, r.task_id, r.held, r.key_id, r.model
     ), ended AS (
       INSERT INTO "${t.ledgerEntries}" (id, account_id, task_id, kind, amount, held, at, note, key_id, model)
       SELECT ?, account_id, task_id, ?, CASE WHEN ? = 'charge' THEN -held ELSE 0 END, -held, ?, NULL, key_id, model FROM closed
       RETURNING *
     ), moved AS (
       UPDATE "${t.ledgerBalances}" b SET balance = b.balance + ended.amount, reserved = b.reserved + ended.held
       FROM ended WHERE b.account_id = ended.account_id RETURNING b.account_id
     )`

/** The parameters of `endCtes`, in order. */
export const endValues = (end: { readonly id: string; readonly taskId: string; readonly at: number; readonly kind: "charge" | "release" }) =>
  [end.taskId, end.kind, end.id, end.kind, end.kind, end.at]

/** The movements' statements for the tables of a prepared database. */
export const make = ({ compile, isPg, tables: t }: Pick<Database.Prepared, "compile" | "isPg" | "tables">) => {
  // Compiled once and run on the transaction's connection: the query builder's machinery
  // around each statement cost more than the statement (docs/benchmarks.md), and a movement
  // runs several.
  const quoted = { entries: `"${t.ledgerEntries}"`, balances: `"${t.ledgerBalances}"`, open: `"${t.ledgerOpen}"`, keySpend: `"${t.keySpend}"` }
  const insertEntry = compile(
    `INSERT INTO ${quoted.entries} (id, account_id, task_id, kind, amount, held, at, note, key_id, model) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
  )
  // A capped key's count: added to when it stays within the cap (the last parameter), else
  // no row back. A first reservation of the month inserts its row (the caller has checked
  // that the amount alone is within the cap).
  const spendUp = compile(
    `INSERT INTO ${quoted.keySpend} (key_id, month, used) VALUES (?, ?, ?)
     ON CONFLICT (key_id, month) DO UPDATE SET used = ${quoted.keySpend}.used + excluded.used
     WHERE ${quoted.keySpend}.used + excluded.used <= ? RETURNING used`
  )
  const spendOf = compile(`SELECT used FROM ${quoted.keySpend} WHERE key_id = ? AND month = ?`)
  const spendDown = compile(`UPDATE ${quoted.keySpend} SET used = used - ? WHERE key_id = ? AND month = ?`)
  const addToSums = compile(
    `INSERT INTO ${quoted.balances} (account_id, balance, reserved) VALUES (?, ?, ?)
     ON CONFLICT (account_id) DO UPDATE SET balance = ${quoted.balances}.balance + excluded.balance, reserved = ${quoted.balances}.reserved + excluded.reserved`
  )
  const openReservation = compile(`INSERT INTO ${quoted.open} (task_id, entry_id, at) VALUES (?, ?, ?)`)
  const closeReservation = compile(`DELETE FROM ${quoted.open} WHERE task_id = ?`)
  // The kinds written out, not bound: the partial unique indexes of migration 0011 answer these.
  const reservationOf = compile(`SELECT * FROM ${quoted.entries} WHERE task_id = ? AND kind = 'reserve'`)
  // A charge's or release's reads in one: the task's reservation and its end, if any (each
  // part answered by its partial unique index).
  const reservationAndEnd = compile(
    `SELECT * FROM ${quoted.entries} WHERE task_id = ? AND kind = 'reserve'
     UNION ALL SELECT * FROM ${quoted.entries} WHERE task_id = ? AND kind IN ('charge', 'release')`
  )
  // SQLite: a hold's reads in one row, the account's sums and the task's reservation if any
  // (no other writer can come between: the transaction holds the write lock).
  const sumsAndReservation = compile(
    `SELECT b.balance AS sums_balance, b.reserved AS sums_reserved, e.* FROM (SELECT 1) AS one
     LEFT JOIN ${quoted.balances} b ON b.account_id = ?
     LEFT JOIN ${quoted.entries} e ON e.task_id = ? AND e.kind = 'reserve'`
  )
  const entryById = compile(`SELECT * FROM ${quoted.entries} WHERE id = ?`)
  const sumsOf = compile(`SELECT balance, reserved FROM ${quoted.balances} WHERE account_id = ?`)
  const lockAccount = compile(`SELECT 1 FROM ${quoted.balances} WHERE account_id = ? FOR UPDATE`)
  // PostgreSQL: the hold in one statement (`HeldAtOnce.holdCtes`): a submit of the same
  // account waits for one statement and the commit, not for five round trips. No row back:
  // too little credit, or no sums row yet, which the statements below answer.
  const holdAtOnce = compile(`${HeldAtOnce.holdCtes(t)} SELECT entry_id FROM opened`)
  const advisoryLock = compile(`SELECT pg_advisory_xact_lock(hashtext(?))`)
  // PostgreSQL: a charge or release in one statement, on its own (no BEGIN or COMMIT), so the
  // account's row is locked only while the statement runs, not across round trips to the
  // node: the reservation's open row deleted (a second settlement of the task waits for that
  // row, then finds it gone), its end written, the sums moved. Only where nothing else is owed:
  // a release of a reservation made with a key may give the key's monthly cap back too, which
  // the transaction below does. No row back: settled already, no reservation, or such a release.
  const endAtOnce = compile(`WITH ${endCtes(t, "")} SELECT ended.* FROM ended`)

  // SQLite, for `Executor.atOnce` (a transaction sent whole): a hold's and a settlement's
  // statements, each guarded by its first, which writes only in the common case (see
  // `heldInOneGo` and `endedInOneGo`).
  const raiseReserved = compile(`UPDATE ${quoted.balances} SET reserved = reserved + ? WHERE account_id = ? AND balance - reserved >= ? RETURNING account_id`)
  const insertEndOfReservation = compile(
    `INSERT INTO ${quoted.entries} (id, account_id, task_id, kind, amount, held, at, note, key_id, model)
     SELECT ?, r.account_id, r.task_id, ?, CASE WHEN ? = 'charge' THEN -r.held ELSE 0 END, -r.held, ?, NULL, r.key_id, r.model
     FROM ${quoted.entries} r
     WHERE r.task_id = ? AND r.kind = 'reserve' AND (? = 'charge' OR r.key_id IS NULL OR r.held = 0)
       AND NOT EXISTS (SELECT 1 FROM ${quoted.entries} e WHERE e.task_id = ? AND e.kind IN ('charge', 'release'))
     RETURNING id`
  )
  // As `addToSums`, by the entry just written (its amounts come from the reservation).
  const moveSumsBy = compile(
    `INSERT INTO ${quoted.balances} (account_id, balance, reserved) SELECT account_id, amount, held FROM ${quoted.entries} WHERE id = ?
     ON CONFLICT (account_id) DO UPDATE SET balance = ${quoted.balances}.balance + excluded.balance, reserved = ${quoted.balances}.reserved + excluded.reserved`
  )

  /**
   * SQLite: the statements of `reserve` for a new task in one go, for `Executor.atOnce`: the
   * sums' `reserved` raised where enough is left (the guard), the reservation's entry and its
   * open row. Undefined where `reserve` must run: a hold of nothing, or one counted against a
   * key's monthly cap. A guard that stops (too little credit, no sums row) leaves it to
   * `reserve` too, which answers those cases.
   */
  const heldInOneGo = ({ accountId, amount, at, id, keyId = null, model = null, monthlyCapMicroUsd = null, taskId }: Ledger.Hold): Batch.Statements | undefined =>
    amount <= 0 || (keyId !== null && monthlyCapMicroUsd !== null) ? undefined : [
      [raiseReserved, [amount, accountId, amount], "guard"],
      [insertEntry, [id, accountId, taskId, "reserve", 0, amount, at, null, keyId, model]],
      [openReservation, [taskId, id, at]]
    ]

  /**
   * SQLite: the statements of `end` in one go, for `Executor.atOnce`: the end's entry written
   * from the task's reservation where it is open (the guard), its open row deleted, the sums
   * moved. The guard stops where `end` must run: no reservation, settled already, or a release
   * of a reservation counted against a key's cap (which gives the key's month back too).
   */
  const endedInOneGo = ({ at, id, kind, taskId }: { readonly id: string; readonly taskId: string; readonly at: number; readonly kind: "charge" | "release" }): Batch.Statements => [
    [insertEndOfReservation, [id, kind, kind, at, taskId, kind, taskId], "guard"],
    [closeReservation, [taskId]],
    [moveSumsBy, [id]]
  ]

  /**
   * Writes `entry` and moves its account's sums; a reservation is opened, a charge or release
   * closes it. Nothing reads their answers: on the SQLite worker they go with the
   * transaction's next statement or its COMMIT (`Executor.later`). The sums go last: on
   * PostgreSQL their UPDATE locks the account's row to the commit, and every other movement
   * of the account waits for that lock, so it is held for the COMMIT's round trip alone.
   */
  const write = (run: Run, entry: Ledger.LedgerEntry) => {
    const later = Executor.later(run)
    return later(insertEntry, [
      entry.id,
      entry.accountId,
      entry.taskId,
      entry.kind,
      entry.amount,
      entry.held,
      entry.at,
      entry.note,
      entry.keyId ?? null,
      entry.model ?? null
    ]).pipe(
      Effect.zipRight(
        entry.kind === "reserve"
          ? later(openReservation, [entry.taskId, entry.id, entry.at])
          : entry.kind === "credit"
          ? Effect.void
          : later(closeReservation, [entry.taskId])
      ),
      Effect.zipRight(later(addToSums, [entry.accountId, entry.amount, entry.held])),
      Effect.as(entry)
    )
  }
  /** PostgreSQL: the task's movements one at a time, to the commit. */
  const lockTask = (run: Run, taskId: string) => (isPg ? Effect.asVoid(run(advisoryLock, [`ledger:${taskId}`])) : Effect.void)
  const first = (rows: ReadonlyArray<Record<string, unknown>>) => Option.map(Option.fromNullable(rows[0] as EntryRow | undefined), entryOf)
  const sums = (run: Run, accountId: string) =>
    run(sumsOf, [accountId]).pipe(
      Effect.map((rows) => ({ balance: Number(rows[0]?.["balance"] ?? 0), reserved: Number(rows[0]?.["reserved"] ?? 0) }))
    )

  /**
   * Counts `amount` against the key's cap in `at`'s month, or fails with KeyCapReached having
   * counted nothing. Within the caller's transaction: a later refusal (too little credit)
   * rolls the count back with it.
   */
  const countAgainstCap = (run: Run, keyId: string, cap: number, amount: number, at: number) =>
    Effect.gen(function*() {
      const month = KeyScopes.monthOf(at)
      if (amount <= cap && (yield* run(spendUp, [keyId, month, amount, cap])).length > 0) return
      const usedMicroUsd = Number((yield* run(spendOf, [keyId, month]))[0]?.["used"] ?? 0)
      return yield* Effect.fail(new Ledger.KeyCapReached({ keyId, month, capMicroUsd: cap, usedMicroUsd, requested: amount }))
    })

  /** A release's amount given back to the key's count in its reservation's month (no row: the key has no cap). */
  const uncount = (run: Run, reservation: Ledger.LedgerEntry) =>
    reservation.keyId == null || reservation.held === 0
      ? Effect.void
      : Effect.asVoid(Executor.later(run)(spendDown, [reservation.held, reservation.keyId, KeyScopes.monthOf(reservation.at)]))

  /**
   * `Ledger.reserve` within the caller's transaction: the existing reservation when there is one.
   * `newTask`: the caller writes the task in this same transaction (`createHeld`), so no
   * reservation of it can exist yet; on PostgreSQL its lock and the look for one are left out
   * (two statements). Two transactions writing the same new task conflict on its key, and on
   * the unique index of its reservation, so one of them fails and rolls back.
   * `triedAtOnce`: the caller's one statement (`HeldAtOnce`) found too little credit or no sums
   * row a moment ago; the same hold in one statement is not tried again here.
   */
  const reserve = (
    run: Run,
    { accountId, amount, at, id, keyId = null, model = null, monthlyCapMicroUsd = null, taskId }: Ledger.Hold,
    options: { readonly newTask?: boolean; readonly triedAtOnce?: boolean } = {}
  ): Effect.Effect<Ledger.LedgerEntry, Ledger.HoldRefused | SqlError.SqlError> =>
    Effect.gen(function*() {
      const skipLookup = isPg && options.newTask === true
      if (!skipLookup) yield* lockTask(run, taskId)
      const read = isPg ? undefined : (yield* run(sumsAndReservation, [accountId, taskId]))[0]
      const existing = skipLookup
        ? Option.none()
        : read === undefined
        ? first(yield* run(reservationOf, [taskId]))
        : read["id"] == null
        ? Option.none()
        : first([read])
      if (Option.isSome(existing)) return existing.value
      if (keyId !== null && monthlyCapMicroUsd !== null) yield* countAgainstCap(run, keyId, monthlyCapMicroUsd, amount, at)
      const entry: Ledger.LedgerEntry = {
        id,
        accountId,
        taskId,
        kind: "reserve",
        amount: 0,
        held: amount,
        at,
        note: null,
        ...(keyId === null ? {} : { keyId }),
        ...(model === null ? {} : { model })
      }
      if (isPg && amount > 0 && options.triedAtOnce !== true) {
        const held = yield* run(holdAtOnce, HeldAtOnce.holdValues({ accountId, amount, at, id, keyId, model, taskId }))
        if (held.length > 0) return entry
      }
      // On PostgreSQL the account's row is locked from here to the commit.
      if (isPg) yield* run(lockAccount, [accountId])
      const { balance, reserved } = read === undefined
        ? yield* sums(run, accountId)
        : { balance: Number(read["sums_balance"] ?? 0), reserved: Number(read["sums_reserved"] ?? 0) }
      if (amount > balance - reserved) {
        return yield* Effect.fail(new Ledger.InsufficientCredits({ accountId, requested: amount, available: balance - reserved }))
      }
      return yield* write(run, entry)
    })

  /** A charge's or release's reads: the task's reservation and its end, each if written. */
  const reservationAndEndOf = (run: Run, taskId: string) =>
    Effect.map(run(reservationAndEnd, [taskId, taskId]), (rows) => ({
      reservation: first(rows.filter((row) => row["kind"] === "reserve")),
      end: first(rows.filter((row) => row["kind"] !== "reserve"))
    }))

  /** PostgreSQL: `endAtOnce` (see there); the end written, or none when the transaction must do it. */
  const endOnItsOwn = (run: Run, end: { readonly id: string; readonly taskId: string; readonly at: number; readonly kind: "charge" | "release" }) =>
    Effect.map(run(endAtOnce, endValues(end)), first)

  /**
   * `Ledger.charge` or `Ledger.release` within the caller's transaction: the task's end
   * written once (the existing end when there is one), or NoReservation. What the SQL ledger
   * runs in a transaction of its own, and what the task store runs in the transaction of the
   * write that ends the task (`SqlTaskStore`'s `updateSettled`).
   */
  const end = (
    run: Run,
    { at, id, kind, taskId }: { readonly id: string; readonly taskId: string; readonly at: number; readonly kind: "charge" | "release" }
  ): Effect.Effect<Ledger.LedgerEntry, Ledger.NoReservation | SqlError.SqlError> =>
    Effect.gen(function*() {
      yield* lockTask(run, taskId)
      const { end: done, reservation: held } = yield* reservationAndEndOf(run, taskId)
      if (Option.isSome(done)) return done.value
      if (Option.isNone(held)) return yield* Effect.fail(new Ledger.NoReservation({ taskId }))
      const { keyId, model } = held.value
      // A release gives the key's cap back what the reservation counted; a charge leaves it.
      if (kind === "release") yield* uncount(run, held.value)
      return yield* write(run, {
        id,
        accountId: held.value.accountId,
        taskId,
        kind,
        amount: kind === "charge" ? -held.value.held : 0,
        held: -held.value.held,
        at,
        note: null,
        ...(keyId === undefined ? {} : { keyId }),
        ...(model === undefined ? {} : { model })
      })
    })

  return { write, lockTask, first, sums, reserve, end, heldInOneGo, endedInOneGo, reservationOf, entryById, advisoryLock, endOnItsOwn }
}
