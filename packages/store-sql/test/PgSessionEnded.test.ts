/**
 * A PostgreSQL session the server ends (pg_terminate_backend, a restart, an idle timeout)
 * answers its statement with a FATAL error and then closes the socket. pg hands the
 * statement its error before it sees the socket close, and @effect/sql-pg gives the
 * connection back to the pool then: the pool kept a dead connection, and the next statement
 * that took it failed ("Connection terminated unexpectedly"). CI met it as a submit that
 * failed right after another submit's connection was terminated (ledger-unstored-hold).
 * Each statement here ends its own session, and the next one, on the same client at once,
 * must run: through the query builder and through a reserved connection (the stores'
 * executor), which both failed so at the first round; and in a transaction, whose ROLLBACK
 * already found the connection dead and dropped it.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Redacted } from "effect"
import { Database } from "../src/index.js"
import { freshPgDatabase, pgSkipReason, pgUrl } from "../src/TestDatabases.js"

const rounds = 20

describe.skipIf(pgUrl === undefined)(`a PostgreSQL session the server ends${pgSkipReason("PgSessionEnded")}`, () => {
  it.live("leaves the pool with its statement's error: the next statement, at once, runs on a live connection", () =>
    Effect.gen(function*() {
      const url = yield* freshPgDatabase(pgUrl!, "session_ended")
      const sql = Context.get(yield* Layer.build(Database.layerPg(Redacted.make(url))), SqlClient.SqlClient)
      const endOwnSession = "SELECT pg_terminate_backend(pg_backend_pid())"
      const ways: ReadonlyArray<readonly [string, Effect.Effect<unknown, unknown>]> = [
        ["the query builder", sql.unsafe(endOwnSession)],
        ["a reserved connection", Effect.scoped(Effect.flatMap(sql.reserve, (connection) => connection.execute(endOwnSession, [], undefined)))],
        ["a transaction", sql.withTransaction(sql.unsafe(endOwnSession))]
      ]
      for (const [way, ending] of ways) {
        for (let round = 0; round < rounds; round++) {
          const ended = yield* Effect.exit(ending)
          expect(Exit.isFailure(ended), way).toBe(true)
          const next = yield* Effect.exit(sql.unsafe<{ readonly one: number }>("SELECT 1 AS one"))
          expect(next, `${way}, round ${round}: the statement after a session ended`).toEqual(Exit.succeed([{ one: 1 }]))
        }
      }
    }).pipe(Effect.scoped), 60_000)
})
