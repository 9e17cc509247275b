/**
 * Several statements in one round trip to the SQLite worker (`SqliteWorker`): a connection
 * that can run them so carries this function under `TypeId`. The executor sends a
 * transaction's BEGIN with its first statement and its COMMIT with the writes queued before
 * it (`Executor`), each round trip to the worker costing more CPU than SQLite takes to
 * answer (docs/benchmarks.md).
 */
import type { SqlError } from "@effect/sql"
import type { Effect } from "effect"
import type { Row } from "./Rows.js"

export const TypeId: unique symbol = Symbol.for("@mediagate/store-sql/Batch")

/**
 * Statements with their parameters, run in order. One marked "guard" that answers no rows
 * stops the batch there and rolls back the transaction it runs in.
 */
export type Statements = ReadonlyArray<readonly [string, ReadonlyArray<unknown>, "guard"?]>

/** The first statement of a batch that failed (those before it ran, those after it did not), and its error. */
export interface Failure {
  readonly index: number
  readonly error: SqlError.SqlError
}

/**
 * Runs `statements` in order, each one's rows back, stopping at the first that fails; an
 * answer shorter than `statements` was stopped by a guard, the last rows its (empty) rows.
 */
export type Batch = (statements: Statements) => Effect.Effect<ReadonlyArray<ReadonlyArray<Row>>, Failure>

/** The batch function of `connection`, when it has one. */
export const of = (connection: object): Batch | undefined => (connection as { readonly [TypeId]?: Batch })[TypeId]
