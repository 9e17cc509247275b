/**
 * A submit whose task write dies after its price was held (issue 33: PostgreSQL connections
 * killed under load left 70 submits' holds open until the settlement sweep, 856 s later).
 * The standalone composition on SQLite and PostgreSQL, with a trigger on the tasks table
 * that makes the task's insert fail: on PostgreSQL it terminates its own connection, as
 * `pg_terminate_backend` did in the load test; on SQLite it fails the statement. With the
 * task store and the ledger on one database, the hold and the task are written in one
 * transaction, so the failed submit holds nothing at once. With the ledger elsewhere (in
 * memory here), the hold is given back within seconds by the submit itself. Database I/O is
 * real, so real time passes here: every wait polls with a bound.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import type { Accounts } from "@mediagate/core"
import { Ids, Ledger, TaskService, TaskStore } from "@mediagate/core"
import { Deployment } from "@mediagate/server"
import { SqlBackends } from "@mediagate/server/sql"
import { MemoryLedger } from "@mediagate/store-memory"
import { Database } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { Context, Effect, Exit, Layer, Logger, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const dir = mkdtempSync(join(tmpdir(), "mediagate-ledger-unstored-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
pgSkipReason("ledger-unstored-hold")

const owner: Accounts.Account = { id: Ids.AccountId.make("acct_unstored"), name: "unstored" }
const credits = 10_000_000
const request = { model: "dream-4", input: { prompt: "a lighthouse at dusk", n: 1 } }
/** How long a hold whose task was not stored may stay when the ledger is in another database. */
const lapseWithin = 5_000

/** A trigger that makes every insert of a task fail: PostgreSQL's terminates its own connection. */
const breakTaskInserts = (isPg: boolean) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    if (isPg) {
      yield* sql.unsafe(`CREATE FUNCTION test_die_on_task() RETURNS trigger AS $$
        BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END $$ LANGUAGE plpgsql`)
      yield* sql.unsafe(`CREATE TRIGGER test_die BEFORE INSERT ON mediagate_tasks FOR EACH ROW EXECUTE FUNCTION test_die_on_task()`)
    } else {
      // json() of something that is not JSON fails the statement (SQLITE_ERROR, not a constraint).
      yield* sql.unsafe(`CREATE TRIGGER test_die BEFORE INSERT ON mediagate_tasks BEGIN SELECT json('not json'); END`)
    }
  })

const mendTaskInserts = Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP TRIGGER test_die ON mediagate_tasks`))
const mendTaskInsertsSqlite = Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`DROP TRIGGER test_die`))

/** The store's log lines (the failed insert is logged), kept out of the output. */
const quietLogger = Logger.replace(Logger.defaultLogger, Logger.none)

const databases: ReadonlyArray<{ readonly name: string; readonly isPg: boolean; readonly url: Effect.Effect<string, never, import("effect").Scope.Scope> }> = [
  { name: "SQLite", isPg: false, url: Effect.sync(() => `sqlite:${join(mkdtempSync(join(dir, "db-")), "mediagate.db")}`) },
  ...(pgUrl === undefined ? [] : [{ name: "PostgreSQL", isPg: true, url: freshPgDatabase(pgUrl, "unstored_hold") }])
]

for (const database of databases) {
  describe(`${database.name}: a submit whose task write dies`, () => {
    /** The composition on a fresh database, ledger and all there (or `ledger` instead), with the owner's credits. */
    const compose = (ledger?: "memory") =>
      Effect.gen(function*() {
        const url = yield* database.url
        const backends = SqlBackends.make({ publicUrl: "http://127.0.0.1:1", databaseUrl: url, mediaDir: join(dir, "media") })
        const context = yield* Layer.build(Deployment.services({
          simulatorProfile: "demo",
          allowPrivateUrls: true,
          backends: ledger === undefined ? backends : { ...backends, ledger: MemoryLedger.layer }
        }))
        const client = yield* Layer.build(Database.layerFromUrl(url))
        yield* Context.get(context, Ledger.Ledger).credit({ id: "start", accountId: owner.id, amount: credits, at: 0, note: null })
        return {
          ledger: Context.get(context, Ledger.Ledger),
          store: Context.get(context, TaskStore.TaskStore),
          tasks: Context.get(context, TaskService),
          sql: <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) => Effect.provide(effect, client)
        }
      })

    /** The ledger holds nothing for the owner and has no open reservation. */
    const holdsNothing = (ledger: Ledger.Ledger["Type"]) =>
      Effect.gen(function*() {
        expect(yield* ledger.balance(owner.id)).toEqual({ balance: credits, reserved: 0 })
        expect(yield* ledger.open({ before: Number.MAX_SAFE_INTEGER, limit: 10 })).toEqual([])
      })

    it.live("its hold is not written: the hold and the task are one transaction", () =>
      Effect.gen(function*() {
        const { ledger, sql, store, tasks } = yield* compose()
        yield* sql(breakTaskInserts(database.isPg))
        const failed = yield* Effect.exit(tasks.submit(owner, request))
        expect(Exit.isFailure(failed)).toBe(true)
        // At once, not at the settlement sweep: nothing is held, and no entry was written.
        yield* holdsNothing(ledger)
        expect((yield* ledger.entries(owner.id, 10)).map((entry) => entry.kind)).toEqual(["credit"])

        // With the table mended, a submit holds its price with its task.
        yield* sql(database.isPg ? mendTaskInserts : mendTaskInsertsSqlite)
        const { taskId } = yield* tasks.submit(owner, request)
        const task = Option.getOrThrow(yield* store.get(taskId))
        expect(task.job.priceMicroUsd).toBeGreaterThan(0)
        expect(Option.map(yield* ledger.reservation(taskId), (entry) => entry.held)).toEqual(Option.some(task.job.priceMicroUsd))
      }).pipe(Effect.scoped, Effect.provide(quietLogger)), { timeout: 30_000 })

    it.live(`with the ledger in another database, its hold is given back within ${lapseWithin / 1000} s`, () =>
      Effect.gen(function*() {
        const { ledger, sql, store, tasks } = yield* compose("memory")
        yield* sql(breakTaskInserts(database.isPg))
        const started = Date.now()
        expect(Exit.isFailure(yield* Effect.exit(tasks.submit(owner, request)))).toBe(true)
        while (Date.now() - started < lapseWithin && (yield* ledger.balance(owner.id)).reserved > 0) yield* Effect.sleep("20 millis")
        yield* holdsNothing(ledger)
        expect((yield* ledger.entries(owner.id, 10)).map((entry) => entry.kind)).toEqual(["release", "reserve", "credit"])

        // A task that was stored keeps its hold.
        yield* sql(database.isPg ? mendTaskInserts : mendTaskInsertsSqlite)
        const { taskId } = yield* tasks.submit(owner, request)
        expect(Option.isSome(yield* store.get(taskId))).toBe(true)
        expect(Option.isSome(yield* ledger.reservation(taskId))).toBe(true)
      }).pipe(Effect.scoped, Effect.provide(quietLogger)), { timeout: 30_000 })
  })
}
