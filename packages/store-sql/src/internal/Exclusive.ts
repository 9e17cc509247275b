/**
 * A SQLite worker client's one connection and the lock that hands it to one operation at a
 * time (`SqliteWorker`), carried by the client under `TypeId`. The task store's executor takes
 * the lock for each operation directly; a reservation through the client (`sql.reserve`)
 * would make and close a scope around every statement, which cost a query on SQLite a quarter
 * more CPU (docs/benchmarks.md, "Issue 37: statements per task on PostgreSQL, one SQLite
 * connection").
 */
import type { SqlConnection, SqlError } from "@effect/sql"
import type { Effect } from "effect"
import type * as Batch from "./Batch.js"
import type { ProcedureName } from "./SqliteWorkerProgram.js"

export const TypeId: unique symbol = Symbol.for("@mediagate/store-sql/Exclusive")

export interface Exclusive {
  /** The connection for a holder of the lock (`acquire`). */
  readonly connection: SqlConnection.Connection
  /** Statements in one round trip on `connection`, for a holder of the lock. */
  readonly batch: Batch.Batch
  /** The connection for a statement on its own: sent once no holder has the lock, without taking it. */
  readonly free: SqlConnection.Connection
  /**
   * A transaction sent whole, its BEGIN first and its COMMIT last, in one round trip: sent once
   * no holder has the lock, without taking it. Whatever happens, it leaves no transaction open
   * (one that fails is rolled back where it runs). A caller interrupted stops waiting, in
   * line or for the answer: once sent, the transaction runs all the same, as a caller's
   * interrupted after its COMMIT was sent does (a stalled file must not hold the caller).
   */
  readonly whole: Batch.Batch
  /** One of the worker's procedures with its input, sent as `whole` sends a transaction; its answer. */
  readonly procedure: (name: ProcedureName, input: unknown) => Effect.Effect<unknown, SqlError.SqlError>
  /** Takes the connection until `release`; a caller interrupted while it waits stops waiting. */
  readonly acquire: Effect.Effect<void>
  readonly release: Effect.Effect<void>
}

/** The connection and lock of `client`, when it carries them. */
export const of = (client: object): Exclusive | undefined => (client as { readonly [TypeId]?: Exclusive })[TypeId]
