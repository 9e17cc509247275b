/**
 * `TaskStore.recordCallbackAttempts` on SQL: each attempt's row and its callback's next
 * state, all or nothing.
 *
 * - SQLite: one transaction, its statements sent with the COMMIT in one round trip to the
 *   worker (`Executor.later`).
 * - PostgreSQL: one statement for the whole batch, atomic on its own: the attempts' columns
 *   as arrays (`unnest`), their rows inserted and their callbacks updated from the same
 *   rows. Each statement costs the node a round trip and a socket write (the largest
 *   single cost of a task on PostgreSQL in a profile of bench:e2e); the transaction took two
 *   per attempt and a BEGIN and a COMMIT. A batch naming one callback twice (its updates
 *   would race in one statement) takes the transaction.
 */
import type { SqlError } from "@effect/sql"
import type { TaskStore } from "@mediagate/core"
import { Effect } from "effect"
import type { Prepared } from "../Database.js"
import * as Executor from "./Executor.js"

/** The recording of attempts, its statements compiled once. */
export const make = (
  executor: Executor.Executor,
  { compile, isPg, tables }: Pick<Prepared, "compile" | "isPg" | "tables">
): (attempts: ReadonlyArray<TaskStore.CallbackAttempt>) => Effect.Effect<void, SqlError.SqlError> => {
  const insertAttempt = compile(
    `INSERT INTO "${tables.callbackAttempts}" (callback_id, attempt, at, status, error, duration_ms, outcome, retry_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
  )
  const afterAttempt = compile(
    `UPDATE "${tables.callbacks}" SET attempts = ?, lease_until = NULL, next_attempt_at = ?, delivered_at = ?, failed_at = ? WHERE id = ?`
  )
  const recordAll = compile(
    `WITH v AS (
       SELECT * FROM unnest(?::text[], ?::integer[], ?::bigint[], ?::integer[], ?::text[], ?::integer[], ?::text[], ?::bigint[])
         AS v (callback_id, attempt, at, status, error, duration_ms, outcome, retry_at)
     ), inserted AS (
       INSERT INTO "${tables.callbackAttempts}" (callback_id, attempt, at, status, error, duration_ms, outcome, retry_at) SELECT * FROM v
     )
     UPDATE "${tables.callbacks}" c SET attempts = v.attempt, lease_until = NULL,
       next_attempt_at = CASE WHEN v.outcome = 'Retry' THEN v.retry_at END,
       delivered_at = CASE WHEN v.outcome = 'Delivered' THEN v.at END,
       failed_at = CASE WHEN v.outcome = 'GaveUp' THEN v.at END
     FROM v WHERE c.id = v.callback_id`
  )
  /** An attempt's row, in the columns' order. */
  const row = (attempt: TaskStore.CallbackAttempt) => [
    attempt.callbackId,
    attempt.attempt,
    attempt.at,
    attempt.status,
    attempt.error,
    Math.round(attempt.durationMs),
    attempt.outcome._tag,
    attempt.outcome._tag === "Retry" ? attempt.outcome.retryAt : null
  ] as const
  const inTransaction = (attempts: ReadonlyArray<TaskStore.CallbackAttempt>) =>
    executor.transaction((run) =>
      Effect.forEach(attempts, (attempt) =>
        Effect.zipRight(
          Executor.later(run)(insertAttempt, row(attempt)),
          Executor.later(run)(afterAttempt, [
            attempt.attempt,
            attempt.outcome._tag === "Retry" ? attempt.outcome.retryAt : null,
            attempt.outcome._tag === "Delivered" ? attempt.at : null,
            attempt.outcome._tag === "GaveUp" ? attempt.at : null,
            attempt.callbackId
          ])
        ), { discard: true })
    )
  return (attempts) => {
    if (attempts.length === 0) return Effect.void
    if (!isPg || new Set(attempts.map((attempt) => attempt.callbackId)).size < attempts.length) return inTransaction(attempts)
    const rows = attempts.map(row)
    return Effect.asVoid(executor.run(recordAll, Array.from({ length: 8 }, (_, column) => rows.map((values) => values[column]))))
  }
}
