/**
 * A SQLite worker client's one connection and the lock that hands it to one operation at a
 * time (`SqliteWorker`), carried by the client under `TypeId`. The task store's executor takes
 * the lock for each operation directly; a reservation through the client (`sql.reserve`)
 * would make and close a scope around every statement, which cost a query on SQLite a quarter
 * more CPU (docs/benchmarks.md, "Issue 37: statements per task on PostgreSQL, one SQLite
 * connection").
 */
import type { SqlConnection } from "@effect/sql"
import type { Effect } from "effect"

export const TypeId: unique symbol = Symbol.for("@mediagate/store-sql/Exclusive")

export interface Exclusive {
  /** The connection for a holder of the lock (`withLock`). */
  readonly connection: SqlConnection.Connection
  /** The connection for a statement on its own: sent once no holder has the lock, without taking it. */
  readonly free: SqlConnection.Connection
  /** Runs `self` holding the connection; a caller interrupted while it waits stops waiting. */
  readonly withLock: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

/** The connection and lock of `client`, when it carries them. */
export const of = (client: object): Exclusive | undefined => (client as { readonly [TypeId]?: Exclusive })[TypeId]
