import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { Cause, Duration, Effect, Exit, Fiber, Layer, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Worker } from "node:worker_threads"
import * as SqliteWorker from "../src/SqliteWorker.js"

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
})
