import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { Cause, Duration, Effect, Either, Exit, Fiber, Layer, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Worker } from "node:worker_threads"
import * as Exclusive from "../src/internal/Exclusive.js"
import * as Executor from "../src/internal/Executor.js"
import * as SqliteWorker from "../src/SqliteWorker.js"

/** Counts the messages sent to workers until the scope closes. */
const countMessages = Effect.gen(function*() {
  const post = Worker.prototype.postMessage
  const count = { messages: 0 }
  Worker.prototype.postMessage = function(this: Worker, ...args: Parameters<Worker["postMessage"]>) {
    count.messages++
    return post.apply(this, args)
  }
  yield* Effect.addFinalizer(() => Effect.sync(() => (Worker.prototype.postMessage = post)))
  return count
})

/** A client on a fresh file in a folder removed with the scope. */
const fresh = (name: string) =>
  Effect.gen(function*() {
    const dir = mkdtempSync(join(tmpdir(), "mediagate-sqlite-worker-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    return yield* client(join(dir, name))
  })

/** The client of a `SqliteWorker.layer`, built in the scope. */
const client = (filename: string, options: Omit<SqliteWorker.Options, "filename"> = {}) =>
  Effect.map(Layer.build(SqliteWorker.layer({ filename, ...options })), (context) => context.unsafeMap.get(SqlClient.SqlClient.key) as SqlClient.SqlClient)

describe("SqliteWorker", () => {
  // Real time: the other connection is a real lock that the open must wait out, as it does
  // for another process starting on the same fresh file.
  it.live("opening a fresh file that another connection holds in the rollback journal's mode waits for it, then switches to WAL", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "mediagate-sqlite-worker-"))
      const filename = join(dir, "fresh.db")
      const other = new Sqlite(filename)
      try {
        other.exec("BEGIN IMMEDIATE")
        other.exec("CREATE TABLE other (id INTEGER)")
        const opening = yield* Effect.fork(Effect.scoped(Effect.flatMap(client(filename), (sql) => sql.unsafe<{ journal_mode: string }>("PRAGMA journal_mode"))))
        // Before, the open failed at once: "database is locked". It is still waiting after 500 ms.
        const early = yield* Fiber.await(opening).pipe(Effect.timeout(Duration.millis(500)), Effect.option)
        expect(Option.map(early, Exit.isSuccess)).toEqual(Option.none())
        other.exec("COMMIT")
        expect(yield* Fiber.join(opening)).toEqual([{ journal_mode: "wal" }])
      } finally {
        other.close()
        rmSync(dir, { recursive: true, force: true })
      }
    }), { timeout: 30_000 })

  // Real time: the other connection holds the write lock past the client's busy timeout (200 ms).
  it.live("a transaction whose BEGIN cannot take the lock fails with SQLITE_BUSY, not with its rollback's 'no transaction is active'", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "mediagate-sqlite-worker-"))
      const filename = join(dir, "busy.db")
      const other = new Sqlite(filename)
      try {
        other.pragma("journal_mode = WAL")
        other.exec("CREATE TABLE items (id INTEGER)")
        const exit = yield* Effect.scoped(Effect.gen(function*() {
          const sql = yield* client(filename, { busyTimeout: 200 })
          other.exec("BEGIN IMMEDIATE")
          const failed = yield* Effect.exit(sql.withTransaction(sql.unsafe("INSERT INTO items VALUES (1)")))
          other.exec("ROLLBACK")
          // The client is still usable: its next transaction commits.
          yield* sql.withTransaction(sql.unsafe("INSERT INTO items VALUES (2)"))
          return failed
        }))
        expect(Exit.isFailure(exit)).toBe(true)
        const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) as { cause?: { code?: string; message?: string } } : undefined
        expect(error?.cause?.code).toBe("SQLITE_BUSY")
        expect(other.prepare("SELECT id FROM items").all()).toEqual([{ id: 2 }])
      } finally {
        other.close()
        rmSync(dir, { recursive: true, force: true })
      }
    }), { timeout: 30_000 })

  it.scoped("the statements of one turn of the event loop go to the worker as one message, each answered as its own", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "mediagate-sqlite-worker-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const sql = yield* client(join(dir, "turn.db"))
      yield* sql.unsafe("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
      yield* sql.unsafe("INSERT INTO items VALUES (1, 'one'), (2, 'two')")
      const post = Worker.prototype.postMessage
      let messages = 0
      Worker.prototype.postMessage = function(this: Worker, ...args: Parameters<Worker["postMessage"]>) {
        messages++
        return post.apply(this, args)
      }
      yield* Effect.addFinalizer(() => Effect.sync(() => (Worker.prototype.postMessage = post)))
      const answers = yield* Effect.forEach(
        Array.from({ length: 20 }, (_, n) => n),
        (n) => sql.unsafe<{ name: string }>("SELECT name FROM items WHERE id = ?", [n % 2 + 1]),
        { concurrency: "unbounded" }
      )
      expect(answers.map((rows) => rows[0]?.name)).toEqual(Array.from({ length: 20 }, (_, n) => n % 2 === 0 ? "one" : "two"))
      // One a statement before; the 20 fibers start in one turn.
      expect(messages).toBe(1)
      // One that cannot be copied to the worker (a function as a parameter) fails alone, with
      // the structured clone's words; the others of its turn are answered.
      const mixed = yield* Effect.forEach(
        [[1], [() => 1], [2]] as const,
        (params) => Effect.either(sql.unsafe<{ name: string }>("SELECT name FROM items WHERE id = ?", params as ReadonlyArray<unknown>)),
        { concurrency: "unbounded" }
      )
      expect(mixed.map((answer) => answer._tag === "Right" ? answer.right[0]?.name : "failed")).toEqual(["one", "failed", "two"])
      const failed = mixed[1]!
      expect(failed._tag === "Left" ? String((failed.left.cause as Error).message) : "").toMatch(/could not be cloned/)
    }), { timeout: 30_000 })

  it.scoped("a transaction sent whole is rolled back where it runs when a statement fails, or when it does not end; the connection is free after it", () =>
    Effect.gen(function*() {
      const sql = yield* fresh("whole.db")
      const { whole } = Exclusive.of(sql)!
      yield* sql.unsafe("CREATE TABLE items (id INTEGER PRIMARY KEY)")
      const failed = yield* Effect.flip(whole([["BEGIN IMMEDIATE", []], ["INSERT INTO items VALUES (1)", []], ["INSERT INTO items VALUES (1)", []], ["COMMIT", []]]))
      expect(failed.index).toBe(2)
      expect(String((failed.error.cause as Error).message)).toMatch(/UNIQUE/)
      const unended = yield* Effect.flip(whole([["BEGIN IMMEDIATE", []], ["INSERT INTO items VALUES (2)", []]]))
      expect(unended.error.message).toBe("Failed to execute statement")
      expect(String((unended.error.cause as Error).message)).toBe("a transaction sent whole did not end")
      // Neither left a transaction open (a BEGIN would fail inside one) nor a row behind.
      yield* sql.withTransaction(sql.unsafe("INSERT INTO items VALUES (3)"))
      expect(yield* sql.unsafe("SELECT id FROM items")).toEqual([{ id: 3 }])
    }), { timeout: 30_000 })

  it.scoped("transactions sent whole do not hold the connection across their round trip: several go to the worker in one message, beside a statement", () =>
    Effect.gen(function*() {
      const sql = yield* fresh("together.db")
      yield* sql.unsafe("CREATE TABLE items (id INTEGER PRIMARY KEY)")
      const executor = yield* Executor.make(sql, false)
      const count = yield* countMessages
      const insert = (id: number) => executor.atOnce!([["INSERT INTO items VALUES (?)", [id]]])
      // Only writes queued for the COMMIT: sent whole too, not holding the connection.
      const queued = (id: number) => executor.transaction((run) => Executor.later(run)("INSERT INTO items VALUES (?)", [id]))
      const answers = yield* Effect.all([insert(1), insert(2), queued(3), queued(4), sql.unsafe<{ n: number }>("SELECT count(*) AS n FROM items")], {
        concurrency: "unbounded"
      })
      // Before, each waited for the answer to the one before it: four messages and a fifth.
      expect(count.messages).toBe(1)
      expect(answers[0]._tag).toBe("Committed")
      // The worker runs them in the order they were sent: the count after the four.
      expect(answers[4]).toEqual([{ n: 4 }])
      expect(yield* sql.unsafe("SELECT id FROM items ORDER BY id")).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }, { id: 4 }])
      // A transaction that reads its answers takes the connection: what comes after it waits.
      count.messages = 0
      const [read] = yield* Effect.all([
        executor.transaction((run) => Effect.flatMap(run("SELECT count(*) AS n FROM items", []), (rows) => run("INSERT INTO items VALUES (?)", [Number(rows[0]!["n"]) + 10]))),
        insert(5)
      ], { concurrency: "unbounded" })
      expect(read).toEqual([])
      // BEGIN with the count, the insert, the COMMIT; then the one sent whole.
      expect(count.messages).toBe(4)
      expect(yield* sql.unsafe("SELECT id FROM items ORDER BY id")).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }, { id: 4 }, { id: 5 }, { id: 14 }])
    }), { timeout: 30_000 })

  it.scoped("a procedure that fails halfway is rolled back where it runs, and the connection is free after it", () =>
    Effect.gen(function*() {
      const sql = yield* fresh("procedure.db")
      yield* sql.unsafe("CREATE TABLE leased (a TEXT, b INTEGER, c INTEGER, d INTEGER, e INTEGER)")
      const statements = {
        anyDue: "SELECT 1 AS found WHERE ? AND ?",
        anyInFlight: "SELECT 1 AS found WHERE ? AND ?",
        waitingOwners: "SELECT 'owner' AS owner_id WHERE ? AND ?",
        runningByOwner: "SELECT 'owner' AS owner_id, NULL AS provider, 0 AS n WHERE ? < 0",
        // A write that the failure after it must take back.
        claimInFlight: "INSERT INTO leased VALUES (?, ?, ?, ?, ?) RETURNING *",
        line: "SELECT 'task' AS id, 'owner' AS owner_id, 1 AS due_at, NULL AS provider WHERE ? IS NOT NULL AND ? AND ? AND ? IS NOT NULL AND ?",
        lease: "UPDATE no_such_table SET x = 1"
      }
      const input = { now: 1, limit: 4, worker: "w", leaseUntil: 2, statements }
      const failed = yield* Effect.flip(Exclusive.of(sql)!.procedure("claim", input))
      expect(String((failed.cause as Error).message)).toMatch(/no such table/)
      expect(yield* sql.unsafe("SELECT count(*) AS n FROM leased")).toEqual([{ n: 0 }])
      yield* sql.withTransaction(sql.unsafe("INSERT INTO leased VALUES ('x', 1, 1, 1, 1)"))
      // The same claim with a lease that works commits what it did.
      const done = yield* Exclusive.of(sql)!.procedure("claim", { ...input, statements: { ...statements, lease: "SELECT ? AS worker, ? AS lease_until, ? AS now, ? AS ids" } })
      expect(done).toEqual({ inFlight: [{ a: "w", b: 2, c: 1, d: 1, e: 4 }], leased: [{ worker: "w", lease_until: 2, now: 1, ids: "[\"task\"]" }] })
      expect(yield* sql.unsafe("SELECT count(*) AS n FROM leased")).toEqual([{ n: 2 }])
    }), { timeout: 30_000 })

  it.scoped("transactions sent whole that arrive together commit together, each still all or nothing: a failure or a guard rolls back that one alone", () =>
    Effect.gen(function*() {
      const sql = yield* fresh("together.db")
      const { whole } = Exclusive.of(sql)!
      yield* sql.unsafe("CREATE TABLE items (id INTEGER PRIMARY KEY)")
      const count = yield* countMessages
      const insert = (id: number) => ["INSERT INTO items VALUES (?) RETURNING id", [id]] as const
      const sent = (statements: ReadonlyArray<readonly [string, ReadonlyArray<unknown>, "guard"?]>) =>
        Effect.either(whole([["BEGIN IMMEDIATE", []], ...statements, ["COMMIT", []]]))
      const [first, failed, stopped, last] = yield* Effect.all([
        sent([insert(1)]),
        // Its second insert breaks the key: its first is rolled back with it.
        sent([insert(2), insert(1)]),
        // The guard answers no rows: rolled back, the answer stops there.
        sent([insert(3), ["SELECT id FROM items WHERE id = 99", [], "guard"]]),
        sent([insert(4)])
      ], { concurrency: "unbounded" })
      expect(count.messages).toBe(1)
      expect(first).toEqual(Either.right([[], [{ id: 1 }], []]))
      expect(Either.isLeft(failed) && failed.left.index).toBe(2)
      expect(stopped).toEqual(Either.right([[], [{ id: 3 }], []]))
      expect(last).toEqual(Either.right([[], [{ id: 4 }], []]))
      expect(yield* sql.unsafe("SELECT id FROM items ORDER BY id")).toEqual([{ id: 1 }, { id: 4 }])
      // Nothing is left open: a transaction of the client's own commits.
      yield* sql.withTransaction(sql.unsafe("INSERT INTO items VALUES (5)"))
      expect(yield* sql.unsafe("SELECT count(*) AS n FROM items")).toEqual([{ n: 3 }])
    }), { timeout: 30_000 })
})
