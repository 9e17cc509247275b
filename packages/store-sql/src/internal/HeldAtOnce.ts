/**
 * PostgreSQL: a new task written with its hold in one statement on its own (no BEGIN or
 * COMMIT). The account's sums row, which every submit and settlement of the account locks, is
 * then held only while the statement runs, not across round trips to the node, which under
 * load wait for its busy event loop. In one statement, each part only if the one before it
 * wrote a row: the sums' `reserved` raised when enough is left, the reservation's entry and
 * open row, the task's row, its callback rows. No row back: nothing was written (too little
 * credit, or no sums row yet), and the caller's transaction, which answers those cases, runs
 * instead. A task whose id exists already fails on its key, and the statement writes nothing.
 *
 * Not for a hold of nothing or a hold counted against a key's monthly cap: those take the
 * transaction.
 */
import type { Ledger, TaskStore } from "@mediagate/core"
import type * as Database from "../Database.js"
import * as TaskRow from "../TaskRow.js"

/**
 * PostgreSQL: `count` callback rows written in one statement's CTEs (`callback0`, ...), each
 * only where the CTE `from` wrote its row; their parameters are `callbackValues`.
 */
export const callbackInserts = (table: string, from: string, count: number): string =>
  Array.from({ length: count }, (_, n) =>
    `, callback${n} AS (
       INSERT INTO "${table}" (id, task_id, url, created_at, attempts, next_attempt_at, event, lease_until) SELECT ?, ?, ?, ?, 0, ?, ?, ? FROM ${from} RETURNING id
     )`).join("")

/** A callback row's values: id, task, URL, creation, first attempt's due time, event, lease (a hand-off's). */
export const callbackRowValues = (row: TaskStore.CallbackRow): Array<unknown> => [
  row.id,
  row.taskId,
  row.url,
  row.createdAt,
  row.dueAt ?? row.createdAt,
  row.event ?? null,
  row.leaseUntil ?? null
]

/** The parameters of `callbackInserts`, in order. */
export const callbackValues = (callbacks: ReadonlyArray<TaskStore.CallbackRow>): Array<unknown> => callbacks.flatMap(callbackRowValues)

/**
 * PostgreSQL: a hold's three CTEs, each only where the one before wrote its row: the sums'
 * `reserved` raised when enough is left (`held`), the reservation's entry (`entry`) and its
 * open row (`opened`, which returns `task_id` and `entry_id`). Its parameters are `holdValues`.
 * The UPDATE locks the account's row until the commit, and its condition is checked again on
 * the row's latest version after a wait for it (READ COMMITTED): the sums never go below what
 * is held.
 */
export const holdCtes = (t: Database.Prepared["tables"]): string =>
  `WITH held AS (
       UPDATE "${t.ledgerBalances}" SET reserved = reserved + ? WHERE account_id = ? AND balance - reserved >= ? RETURNING account_id
     ), entry AS (
       INSERT INTO "${t.ledgerEntries}" (id, account_id, task_id, kind, amount, held, at, note, key_id, model)
       SELECT ?, account_id, ?, 'reserve', 0, ?, ?, NULL, ?, ? FROM held RETURNING id
     ), opened AS (
       INSERT INTO "${t.ledgerOpen}" (task_id, entry_id, at) SELECT ?, id, ? FROM entry RETURNING task_id, entry_id
     )`

/** The parameters of `holdCtes`, in order. */
export const holdValues = ({ accountId, amount, at, id, keyId = null, model = null, taskId }: Ledger.Hold): Array<unknown> => [
  amount,
  accountId,
  amount,
  id,
  taskId,
  amount,
  at,
  keyId,
  model,
  taskId,
  at
]

export const make = ({ compile, tables: t }: Pick<Database.Prepared, "compile" | "tables">) => {
  const columns = TaskRow.columns
  const head = `${holdCtes(t)}, task AS (
       INSERT INTO "${t.tasks}" (${columns.join(", ")}) SELECT ${columns.map(() => "?").join(", ")} FROM opened RETURNING id
     )`
  /** The statement for a task with `count` callback rows, compiled once per count. */
  const statements = new Map<number, string>()
  const statement = (count: number) => {
    let text = statements.get(count)
    if (text === undefined) {
      text = compile(`${head}${callbackInserts(t.callbacks, "task", count)} SELECT id FROM task`)
      statements.set(count, text)
    }
    return text
  }

  /** The statement and its parameters, or undefined where the transaction must write the hold. */
  return (task: TaskRow.Row, callbacks: ReadonlyArray<TaskStore.CallbackRow>, hold: Ledger.Hold) => {
    if (hold.amount <= 0 || (hold.keyId != null && hold.monthlyCapMicroUsd != null)) return undefined
    return {
      text: statement(callbacks.length),
      params: [...holdValues(hold), ...TaskRow.values(task), ...callbackValues(callbacks)]
    }
  }
}
