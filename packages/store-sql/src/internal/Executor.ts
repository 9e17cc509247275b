/**
 * How the task store talks to its database. Statements are compiled once, when the store is
 * made, and run on a connection directly: the per-statement machinery of the query builder
 * costs more than SQLite itself takes to answer (docs/benchmarks.md).
 */
import type { SqlClient, SqlConnection, SqlError } from "@effect/sql"
import { StoreError } from "@mediagate/core"
import { Effect, Exit } from "effect"
import * as Batch from "./Batch.js"
import * as Exclusive from "./Exclusive.js"
import type { Row } from "./Rows.js"
import type { ProcedureName } from "./SqliteWorkerProgram.js"

/**
 * Runs one compiled statement with its parameters. In a transaction on the SQLite worker it
 * also has `later`: a write whose answer nobody reads, queued and sent with the
 * transaction's next statement or with its COMMIT, in one round trip (`Batch`). Its failure
 * fails that statement or the COMMIT instead, and the transaction rolls back all the same.
 */
export type Run = ((text: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<Row>, SqlError.SqlError>) & {
  readonly later?: (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<void>
  /**
   * Several statements in one round trip, each one's rows back (with the writes queued by
   * `later` before them). A statement marked "guard" that answers no rows ends the
   * transaction there, rolled back: the answer is then shorter, its last rows the guard's.
   * With `commit`, the transaction's COMMIT goes with them and the body runs no statement
   * after. Where there is `later`.
   */
  readonly many?: (statements: Batch.Statements, commit?: "commit") => Effect.Effect<ReadonlyArray<ReadonlyArray<Row>>, SqlError.SqlError>
}

/** `run.later` where the executor has it, else `run` itself: the statement at once. */
export const later = (run: Run): (text: string, params: ReadonlyArray<unknown>) => Effect.Effect<unknown, SqlError.SqlError> =>
  run.later ?? run

export interface Executor {
  /** One statement: atomic on its own (an implicit transaction), so it needs no BEGIN. */
  readonly run: Run
  /** Several statements in one write transaction, all or nothing. */
  readonly transaction: <A, E>(body: (run: Run) => Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError.SqlError>
  /**
   * The SQLite worker: a write transaction whose statements need no answer before the next,
   * sent whole (BEGIN IMMEDIATE, the statements, COMMIT) in one round trip, once no other
   * transaction holds the connection, without holding it across the round trip: the worker
   * runs it alone and rolls it back itself when it fails. A statement marked "guard" that answers no rows stops it,
   * rolled back: the answer is then `stoppedAt`, that statement's index, and the caller takes
   * the longer way. Absent elsewhere.
   */
  readonly atOnce?: (statements: Batch.Statements) => Effect.Effect<AtOnce, SqlError.SqlError>
  /**
   * The SQLite worker: one of its procedures, a whole transaction run where the connection is
   * (`SqliteWorkerProgram`), sent as `atOnce` sends one. Absent elsewhere.
   */
  readonly procedure?: (name: ProcedureName, input: unknown) => Effect.Effect<unknown, SqlError.SqlError>
}

/** What `atOnce` did: committed, each statement's rows; or stopped by the guard at `stoppedAt`, rolled back. */
export type AtOnce = { readonly _tag: "Committed"; readonly rows: ReadonlyArray<ReadonlyArray<Row>> } | { readonly _tag: "Stopped"; readonly stoppedAt: number }

const transaction = <A, E>(
  connection: SqlConnection.Connection,
  begin: string,
  body: (run: Run) => Effect.Effect<A, E>
): Effect.Effect<A, E | SqlError.SqlError> => {
  const batch = Batch.of(connection)
  if (batch !== undefined) return batched(connection, batch, begin, body)
  return Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      yield* connection.execute(begin, [], undefined)
      const exit = yield* Effect.exit(restore(body((text, params) => connection.execute(text, params, undefined))))
      yield* connection.execute(Exit.isSuccess(exit) ? "COMMIT" : "ROLLBACK", [], undefined)
      return yield* exit
    })
  )
}

/**
 * A transaction on a connection that runs batches (the SQLite worker): BEGIN goes with the
 * body's first statement, and the writes queued by `later` go with the next statement or
 * with the COMMIT. BEGIN still runs first, so `BEGIN IMMEDIATE` takes the write lock before
 * anything is read. A batch stops at its first failing statement: when that is BEGIN, no
 * transaction is open and none is rolled back; when it is a statement after BEGIN, the
 * transaction is rolled back, as when the body fails; when it is COMMIT, its error is the
 * answer, as it was without batches. A body that ran no statement and queued none sends
 * nothing; one that ended the transaction itself (`many`'s guard or its `commit`) is not
 * committed again.
 *
 * With `lazily` (the SQLite worker's own client), the connection is taken only when the body
 * sends its first statement, and a body that only queued writes (`later`) sends them whole
 * (`Exclusive.whole`), not holding the connection across the round trip at all.
 */
const batched = <A, E>(
  connection: SqlConnection.Connection,
  batch: Batch.Batch,
  begin: string,
  body: (run: Run) => Effect.Effect<A, E>,
  lazily?: Pick<Exclusive.Exclusive, "acquire" | "release" | "whole">
): Effect.Effect<A, E | SqlError.SqlError> =>
  Effect.uninterruptibleMask((restore) => {
    let begun = false
    let ended = false
    let holding = lazily === undefined
    let queued: Array<readonly [string, ReadonlyArray<unknown>]> = []
    /**
     * Takes the connection before the first statement goes (lazily), in line: interruptible
     * while it waits, and once taken, known to be held (for its release) before anything else.
     */
    const hold = lazily === undefined
      ? Effect.void
      : Effect.suspend(() =>
        holding ? Effect.void : Effect.uninterruptibleMask((waiting) => Effect.map(waiting(lazily.acquire), () => void (holding = true)))
      )
    /** Sends the queue and `statements` (BEGIN first, if not yet sent); the rows of `statements`. */
    const send = (statements: Batch.Statements) =>
      Effect.suspend(() => {
        if (ended) return Effect.dieMessage("a statement after its transaction ended")
        const head = begun ? queued : [[begin, []] as const, ...queued]
        const all = [...head, ...statements]
        queued = []
        return batch(all).pipe(
          Effect.map((results) => {
            begun = true
            // Shorter: a guard stopped it, and the worker rolled the transaction back.
            if (results.length < all.length || statements[statements.length - 1]?.[0] === "COMMIT") ended = true
            return results.slice(head.length)
          }),
          Effect.catchAll((failure) => {
            if (failure.index >= (begun ? 0 : 1)) begun = true
            const commit = failure.index === all.length - 1 && statements[statements.length - 1]?.[0] === "COMMIT"
            if (commit) ended = true
            return Effect.fail({ failure, commit })
          })
        )
      })
    const run: Run = Object.assign(
      (text: string, params: ReadonlyArray<unknown>) =>
        Effect.zipRight(hold, send([[text, params]])).pipe(Effect.map((results) => results[0]!), Effect.mapError(({ failure }) => failure.error)),
      {
        later: (text: string, params: ReadonlyArray<unknown>) => Effect.sync(() => void queued.push([text, params])),
        many: (statements: Batch.Statements, commit?: "commit") =>
          Effect.zipRight(hold, send(commit === undefined ? statements : [...statements, ["COMMIT", []]])).pipe(
            Effect.map((results) => results.slice(0, statements.length)),
            Effect.mapError(({ failure }) => failure.error)
          )
      }
    )
    const rollback = Effect.suspend(() => (begun && !ended ? Effect.asVoid(connection.execute("ROLLBACK", [], undefined)) : Effect.void))
    const ran = Effect.flatMap(Effect.exit(restore(body(run))), (exit) => {
      if (Exit.isFailure(exit)) return Effect.zipRight(rollback, exit)
      if (ended || (!begun && queued.length === 0)) return exit
      // Only queued writes, the connection not taken: the whole transaction in one go.
      if (!holding && lazily !== undefined) {
        return lazily.whole([[begin, []], ...queued, ["COMMIT", []]]).pipe(
          Effect.mapError((failure) => failure.error),
          Effect.zipRight(exit)
        )
      }
      return send([["COMMIT", []]]).pipe(
        Effect.catchAll(({ commit, failure }) => commit ? Effect.fail(failure.error) : Effect.zipRight(rollback, Effect.fail(failure.error))),
        Effect.zipRight(exit)
      )
    })
    return lazily === undefined ? ran : Effect.ensuring(ran, Effect.suspend(() => holding ? lazily.release : Effect.void))
  })

/**
 * SQLite has one connection per client. Each operation reserves it through the client's lock,
 * so the task store shares its client with the ledger, the accounts and
 * the rest: a transaction runs from `BEGIN IMMEDIATE` to `COMMIT` with no other fiber's
 * statement in between (it would otherwise commit or roll back with someone else's
 * transaction), and a single statement waits while a transaction is open. One connection
 * for the whole process, not one for the store and one for the rest: two connections of one
 * file wait for each other's write lock in SQLite's busy handler, which sleeps 1, 2, 5 ms
 * and more between tries, while the lock orders fibers at once (docs/decisions.md, "SQLite:
 * one connection"). `BEGIN IMMEDIATE` takes the write lock up front, so a writer never fails
 * halfway when another process writes the same file.
 */
const sqlite = (sql: SqlClient.SqlClient): Effect.Effect<Executor, SqlError.SqlError> =>
  Effect.gen(function*() {
    // Unlike `perOperation`, a caller interrupted while it waits for the connection (a
    // readiness check's time limit, a client gone) stops waiting: a stalled file must not hold
    // it. A transaction, once begun, still runs to its COMMIT or ROLLBACK (`transaction`).
    // The SQLite worker's client hands over its connection and lock (`Exclusive`); another
    // client (@effect/sql-sqlite-node's, a host's) is reserved through its `reserve`.
    const exclusive = Exclusive.of(sql)
    const reserved = <A, E>(use: (connection: SqlConnection.Connection) => Effect.Effect<A, E>) => Effect.scoped(Effect.flatMap(sql.reserve, use))
    const atOnce = exclusive === undefined ? undefined : (statements: Batch.Statements) =>
      exclusive.whole([["BEGIN IMMEDIATE", []], ...statements, ["COMMIT", []]]).pipe(
        Effect.map((results): AtOnce =>
          results.length < statements.length + 2
            ? { _tag: "Stopped", stoppedAt: results.length - 2 }
            : { _tag: "Committed", rows: results.slice(1, -1) }
        ),
        Effect.mapError((failure) => failure.error)
      )
    const executor: Executor = {
      ...(atOnce === undefined ? {} : { atOnce }),
      ...(exclusive === undefined ? {} : { procedure: exclusive.procedure }),
      // A statement on its own waits for no other's answer: only for an open transaction to end.
      run: exclusive === undefined
        ? (text, params) => reserved((connection) => connection.execute(text, params, undefined))
        : (text, params) => exclusive.free.execute(text, params, undefined),
      transaction: exclusive === undefined
        ? (body) => reserved((connection) => transaction(connection, "BEGIN IMMEDIATE", body))
        : (body) => batched(exclusive.connection, exclusive.batch, "BEGIN IMMEDIATE", body, exclusive)
    }
    yield* executor.run("PRAGMA busy_timeout = 5000", [])
    return executor
  })

/**
 * PostgreSQL: a pooled connection per operation; row locks order concurrent writers.
 *
 * The whole operation is uninterruptible. @effect/sql-pg's `reserve` never gives back a
 * connection that the pool hands over after the waiting fiber was interrupted, so every
 * request whose client went away while it waited for the pool leaked a connection, until
 * none was left and the node answered nothing that needed the database. And an interrupted
 * statement is cancelled with `pg_cancel_backend` through the same exhausted pool. The
 * statements are short: an interrupted caller waits for its statement, not for the pool to
 * leak.
 */
const pg = (sql: SqlClient.SqlClient): Executor => perOperation(sql, "BEGIN")

/**
 * A connection reserved for each operation and given back after it, the operation run
 * uninterruptibly (see `pg`). On PostgreSQL a pooled connection; on SQLite the client's one
 * connection, which a client shared by several backends (the ledger, accounts, idempotency
 * keys) hands to one operation at a time. Inside a transaction every statement must go
 * through its `run`: the client's own statements would wait for the connection it holds.
 */
export const perOperation = (sql: SqlClient.SqlClient, begin: "BEGIN" | "BEGIN IMMEDIATE"): Executor => ({
  run: (text, params) => Effect.uninterruptible(Effect.scoped(Effect.flatMap(sql.reserve, (connection) => connection.execute(text, params, undefined)))),
  transaction: (body) => Effect.uninterruptible(Effect.scoped(Effect.flatMap(sql.reserve, (connection) => transaction(connection, begin, body))))
})

/** The executor for `sql`'s dialect. */
export const make = (sql: SqlClient.SqlClient, isPg: boolean): Effect.Effect<Executor, StoreError> =>
  isPg ? Effect.succeed(pg(sql)) : sqlite(sql).pipe(StoreError.refail("opening the store"))
