import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { Cause, Duration, Effect, Exit, Fiber, Layer, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
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
})
