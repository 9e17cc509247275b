import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { Duration, Effect, Exit, Fiber, Layer, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqliteWorker from "../src/SqliteWorker.js"

/** The client of a `SqliteWorker.layer`, built in the scope. */
const client = (filename: string) =>
  Effect.map(Layer.build(SqliteWorker.layer({ filename })), (context) => context.unsafeMap.get(SqlClient.SqlClient.key) as SqlClient.SqlClient)

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
})
