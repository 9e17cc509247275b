/**
 * A submit whose task write dies after its price was held (issue 33: PostgreSQL connections
 * killed under load left 70 submits' holds open until the settlement sweep, 856 s later).
 * The standalone composition on SQLite and PostgreSQL, with a trigger on the tasks table
 * that makes the task's insert fail: on PostgreSQL it terminates its own connection, as
 * `pg_terminate_backend` did in the load test; on SQLite it fails the statement. With the
 * task store and the ledger on one database, the hold and the task are written in one
 * transaction, so the failed submit holds nothing at once. With the ledger elsewhere (in
 * memory here), the hold is given back within seconds by the submit itself. Database I/O is
 * real, so real time passes there: every wait polls with a bound. The memory stores, whose
 * task write is made to fail here, run on the TestClock.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import type { Accounts } from "@mediagate/core"
import {
  IdempotencyKeys,
  Ids,
  Ledger,
  ModelCatalog,
  Moderation,
  StoreError,
  TaskChanges,
  TaskEvents,
  TaskService,
  TaskServiceAlone,
  TaskStore,
  TaskWrites
} from "@mediagate/core"
import { Deployment } from "@mediagate/server"
import { SqlBackends } from "@mediagate/server/sql"
import { MemoryLedger, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlLedger, SqlTaskStore } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { Context, Effect, Exit, Layer, Logger, Option, TestClock } from "effect"
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
        console.log(`ledger-unstored-hold (${database.name}): the hold of a task not stored was released ${Date.now() - started} ms after the submit began`)
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

describe("memory stores: a submit whose task write fails", () => {
  /**
   * TaskService over the memory stores, the task store's `create` failing with a StoreError
   * (`"fails"`), or failing after it stored the task (`"stores, then fails"`: the answer was
   * lost), and its first `unreadable` reads failing too.
   */
  const compose = (create: "fails" | "stores, then fails", unreadable = 0) =>
    Effect.gen(function*() {
      const ledger = MemoryLedger.make()
      yield* ledger.credit({ id: "start", accountId: owner.id, amount: credits, at: 0, note: null })
      const inner = yield* MemoryTaskStore.make
      let reads = 0
      const store: TaskStore.TaskStore["Type"] = {
        ...inner,
        create: (task, callbacks) =>
          Effect.zipRight(create === "fails" ? Effect.void : inner.create(task, callbacks), new StoreError({ message: "the connection was lost" })),
        get: (id) => Effect.suspend(() => (++reads <= unreadable ? new StoreError({ message: "the database does not answer" }) : inner.get(id)))
      }
      const context = yield* Layer.build(TaskService.Default.pipe(
        Layer.provide(TaskWrites.layer),
        Layer.provide([TaskChanges.layer, IdempotencyKeys.layerMemory, TaskEvents.TaskWakeup.layerNone, TaskEvents.CallbackWakeup.layerNone]),
        Layer.provide(Layer.mergeAll(
          Layer.succeed(TaskStore.TaskStore, store),
          Layer.succeed(Ledger.Ledger, ledger),
          Ids.layerTest,
          ModelCatalog.layer,
          Moderation.layerAllowAll,
          TaskServiceAlone.noUpstream
        ))
      ))
      const failed = yield* Effect.flip(Context.get(context, TaskService).submit(owner, request))
      expect(failed._tag).toBe("StoreError")
      return { ledger, inner }
    })

  /** The background release's turn (no time passes). */
  const settle = Effect.repeatN(TestClock.adjust(0), 5)

  it.scoped("its hold is released at once, the task being absent", () =>
    Effect.gen(function*() {
      const { ledger } = yield* compose("fails")
      yield* settle
      expect(yield* ledger.balance(owner.id)).toEqual({ balance: credits, reserved: 0 })
      expect((yield* ledger.entries(owner.id, 10)).map((entry) => entry.kind)).toEqual(["release", "reserve", "credit"])
    }).pipe(Effect.provide(quietLogger)))

  it.scoped("a task stored although its write failed keeps its hold", () =>
    Effect.gen(function*() {
      const { ledger } = yield* compose("stores, then fails")
      yield* settle
      expect((yield* ledger.entries(owner.id, 10)).map((entry) => entry.kind)).toEqual(["reserve", "credit"])
      expect((yield* ledger.balance(owner.id)).reserved).toBeGreaterThan(0)
    }).pipe(Effect.provide(quietLogger)))

  it.scoped("with the store unreadable for a while, the hold is released within 2 seconds of it answering", () =>
    Effect.gen(function*() {
      const { ledger } = yield* compose("fails", 4)
      yield* settle
      // Tries at 0, 100, 300 and 700 ms fail; the one at 1.5 s reads that the task is absent.
      yield* TestClock.adjust("1400 millis")
      expect((yield* ledger.balance(owner.id)).reserved).toBeGreaterThan(0)
      yield* TestClock.adjust("200 millis")
      yield* settle
      expect(yield* ledger.balance(owner.id)).toEqual({ balance: credits, reserved: 0 })
    }).pipe(Effect.provide(quietLogger)))
})

describe("SQL: which task store and ledger share a transaction", () => {
  /** The `databaseId` of a task store and a ledger, each on a client of its own to `url`, with these table prefixes. */
  const ids = (url: string, storePrefix: string, ledgerPrefix: string) =>
    Effect.gen(function*() {
      const store = yield* Layer.build(SqlTaskStore.layerWith({ tablePrefix: storePrefix }).pipe(Layer.provide(Database.layerFromUrl(url))))
      const ledger = yield* Layer.build(SqlLedger.layerWith({ tablePrefix: ledgerPrefix }).pipe(Layer.provide(Database.layerFromUrl(url))))
      return [Context.get(store, TaskStore.TaskStore).databaseId, Context.get(ledger, Ledger.Ledger).databaseId] as const
    })

  for (const database of databases) {
    it.live(`${database.name}: the same tables share an id; another prefix has another`, () =>
      Effect.gen(function*() {
        const url = yield* database.url
        const [store, ledger] = yield* ids(url, "a_", "a_")
        expect(store).toBeDefined()
        expect(store).toBe(ledger)
        // Read again (a restart, another node): the same.
        expect(yield* ids(url, "a_", "a_")).toEqual([store, ledger])
        const [other] = yield* ids(url, "b_", "a_")
        expect(other).not.toBe(ledger)
      }).pipe(Effect.scoped), { timeout: 30_000 })
  }

  it.live("SQLite: two :memory: clients are two databases", () =>
    Effect.gen(function*() {
      const [store, ledger] = yield* ids("sqlite::memory:", "a_", "a_")
      expect(store).not.toBe(ledger)
    }).pipe(Effect.scoped))
})
