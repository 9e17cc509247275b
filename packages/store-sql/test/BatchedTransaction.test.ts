import { SqlClient, SqlError } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import type { SqlConnection } from "@effect/sql"
import { Cause, Deferred, Effect, Exit, Fiber, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Batch from "../src/internal/Batch.js"
import * as Executor from "../src/internal/Executor.js"
import * as SqliteWorker from "../src/SqliteWorker.js"

/** A worker client on a fresh file with a table `t (id PRIMARY KEY)`, in the scope. */
const fresh = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "mediagate-batch-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const context = yield* Layer.build(SqliteWorker.layer({ filename: join(dir, "db.sqlite") }))
  const sql = context.unsafeMap.get(SqlClient.SqlClient.key) as SqlClient.SqlClient
  yield* sql.unsafe("CREATE TABLE t (id TEXT PRIMARY KEY)")
  return sql
})

const ids = (sql: SqlClient.SqlClient) => Effect.map(sql.unsafe<{ id: string }>("SELECT id FROM t ORDER BY id"), (rows) => rows.map((row) => row.id))

/** A connection that records each batch it is sent and answers each statement with `[{ n }]`, failing where `failAt` says. */
const recording = (failAt?: (statements: Batch.Statements) => number | undefined) => {
  const sent: Array<Array<string>> = []
  const executed: Array<string> = []
  const batch: Batch.Batch = (statements) => {
    sent.push(statements.map(([text]) => text))
    const index = failAt?.(statements)
    if (index !== undefined) return Effect.fail({ index, error: new SqlError.SqlError({ cause: new Error(`failed: ${statements[index]![0]}`) }) })
    return Effect.succeed(statements.map((_, n) => [{ n }]))
  }
  const connection = {
    execute: (text: string) => Effect.sync(() => void executed.push(text)).pipe(Effect.as([]))
  } as unknown as SqlConnection.Connection
  Object.defineProperty(connection, Batch.TypeId, { value: batch })
  const sql = { reserve: Effect.succeed(connection) } as unknown as SqlClient.SqlClient
  return { executor: Executor.perOperation(sql, "BEGIN IMMEDIATE"), sent, executed }
}

/** Fails the batch at the statement `text`, when it has one. */
const at = (text: string) => (statements: Batch.Statements) => {
  const index = statements.findIndex(([sql]) => sql === text)
  return index === -1 ? undefined : index
}

describe("a transaction on the SQLite worker, in batches", () => {
  it.effect("sends BEGIN with the first statement, and the queued writes with the COMMIT", () =>
    Effect.gen(function*() {
      const { executed, executor, sent } = recording()
      const answer = yield* executor.transaction((run) =>
        Effect.gen(function*() {
          yield* Executor.later(run)("INSERT a", [])
          const rows = yield* run("SELECT b", [])
          yield* Executor.later(run)("INSERT c", [])
          yield* Executor.later(run)("INSERT d", [])
          return rows
        })
      )
      expect(answer).toEqual([{ n: 2 }])
      expect(sent).toEqual([["BEGIN IMMEDIATE", "INSERT a", "SELECT b"], ["INSERT c", "INSERT d", "COMMIT"]])
      expect(executed).toEqual([])
    }))

  it.effect("a transaction of writes alone is one round trip; one that runs nothing sends nothing", () =>
    Effect.gen(function*() {
      const { executor, sent } = recording()
      yield* executor.transaction((run) => Executor.later(run)("INSERT a", []))
      yield* executor.transaction(() => Effect.void)
      yield* Effect.exit(executor.transaction((run) => Effect.zipRight(Executor.later(run)("INSERT a", []), Effect.fail("no"))))
      expect(sent).toEqual([["BEGIN IMMEDIATE", "INSERT a", "COMMIT"]])
    }))

  it.effect("a failing BEGIN rolls nothing back; a failing statement after it, or a failing body, rolls back; a failing COMMIT is the answer", () =>
    Effect.gen(function*() {
      const begin = recording(at("BEGIN IMMEDIATE"))
      expect(Exit.isFailure(yield* Effect.exit(begin.executor.transaction((run) => run("SELECT 1", []))))).toBe(true)
      expect(begin.executed).toEqual([])

      const write = recording(at("INSERT a"))
      const failed = yield* Effect.exit(write.executor.transaction((run) => Effect.zipRight(Executor.later(run)("INSERT a", []), run("SELECT b", []))))
      expect(failed).toEqual(Exit.fail(expect.objectContaining({ cause: new Error("failed: INSERT a") })))
      expect(write.executed).toEqual(["ROLLBACK"])

      const queued = recording(at("INSERT c"))
      yield* Effect.exit(queued.executor.transaction((run) => Effect.zipRight(run("SELECT b", []), Executor.later(run)("INSERT c", []))))
      expect(queued.sent).toEqual([["BEGIN IMMEDIATE", "SELECT b"], ["INSERT c", "COMMIT"]])
      expect(queued.executed).toEqual(["ROLLBACK"])

      const body = recording()
      expect(yield* Effect.exit(body.executor.transaction((run) => Effect.zipRight(run("SELECT b", []), Effect.fail("no"))))).toEqual(Exit.fail("no"))
      expect(body.executed).toEqual(["ROLLBACK"])

      const commit = recording(at("COMMIT"))
      expect(Exit.isFailure(yield* Effect.exit(commit.executor.transaction((run) => Executor.later(run)("INSERT a", []))))).toBe(true)
      expect(commit.executed).toEqual([])
    }))

  it.effect("many: several statements in one round trip, the COMMIT with them when asked, and nothing after it", () =>
    Effect.gen(function*() {
      const { executed, executor, sent } = recording()
      const answer = yield* executor.transaction((run) =>
        Effect.gen(function*() {
          yield* Executor.later(run)("INSERT a", [])
          const first = yield* run.many!([["SELECT b", []], ["SELECT c", []]])
          const last = yield* run.many!([["UPDATE d", []]], "commit")
          return [first, last]
        })
      )
      expect(answer).toEqual([[[{ n: 2 }], [{ n: 3 }]], [[{ n: 0 }]]])
      expect(sent).toEqual([["BEGIN IMMEDIATE", "INSERT a", "SELECT b", "SELECT c"], ["UPDATE d", "COMMIT"]])
      expect(executed).toEqual([])
      const after = yield* Effect.exit(executor.transaction((run) => Effect.zipRight(run.many!([["SELECT a", []]], "commit"), run("SELECT b", []))))
      expect(Exit.isFailure(after) && Cause.isDie(after.cause)).toBe(true)
    }))

  it.effect("many with the COMMIT: a statement before it that fails rolls back; the COMMIT failing is the answer", () =>
    Effect.gen(function*() {
      const write = recording(at("UPDATE d"))
      expect(Exit.isFailure(yield* Effect.exit(write.executor.transaction((run) => run.many!([["SELECT b", []], ["UPDATE d", []]], "commit"))))).toBe(true)
      expect(write.executed).toEqual(["ROLLBACK"])
      const commit = recording(at("COMMIT"))
      expect(Exit.isFailure(yield* Effect.exit(commit.executor.transaction((run) => run.many!([["UPDATE d", []]], "commit"))))).toBe(true)
      expect(commit.sent).toEqual([["BEGIN IMMEDIATE", "UPDATE d", "COMMIT"]])
      expect(commit.executed).toEqual([])
    }))

  it.scoped("on the worker: many's guard with no rows ends the transaction, rolled back; its COMMIT commits", () =>
    Effect.gen(function*() {
      const sql = yield* fresh
      const executor = yield* Executor.make(sql, false)
      const stopped = yield* executor.transaction((run) =>
        Effect.gen(function*() {
          yield* Executor.later(run)("INSERT INTO t (id) VALUES ('a')", [])
          return yield* run.many!([["SELECT id FROM t WHERE id = 'nothing'", [], "guard"], ["INSERT INTO t (id) VALUES ('b')", []]])
        })
      )
      expect(stopped).toEqual([[]])
      expect(yield* ids(sql)).toEqual([])
      const done = yield* executor.transaction((run) =>
        Effect.gen(function*() {
          const [found] = yield* run.many!([["INSERT INTO t (id) VALUES ('a') RETURNING id", [], "guard"], ["SELECT count(*) AS n FROM t", []]])
          const [written] = yield* run.many!([["INSERT INTO t (id) VALUES ('b') RETURNING id", []]], "commit")
          return [found, written]
        })
      )
      expect(done).toEqual([[{ id: "a" }], [{ id: "b" }]])
      expect(yield* ids(sql)).toEqual(["a", "b"])
      // Nothing left open: the next transaction begins.
      yield* executor.transaction((run) => run("INSERT INTO t (id) VALUES ('c')", []))
      expect(yield* ids(sql)).toEqual(["a", "b", "c"])
    }))

  it.scoped("on the worker: all or nothing when a queued write fails, and the connection is free after", () =>
    Effect.gen(function*() {
      const sql = yield* fresh
      const executor = Executor.perOperation(sql, "BEGIN IMMEDIATE")
      yield* executor.transaction((run) => Executor.later(run)("INSERT INTO t (id) VALUES (?)", ["a"]))
      const failed = yield* Effect.exit(executor.transaction((run) =>
        Effect.gen(function*() {
          yield* run("INSERT INTO t (id) VALUES (?)", ["b"])
          yield* Executor.later(run)("INSERT INTO t (id) VALUES (?)", ["c"])
          // Already there: the COMMIT's batch stops here, and the transaction rolls back.
          yield* Executor.later(run)("INSERT INTO t (id) VALUES (?)", ["a"])
        })
      ))
      expect(Exit.isFailure(failed)).toBe(true)
      expect(yield* ids(sql)).toEqual(["a"])
      const rows = yield* executor.transaction((run) =>
        Effect.zipRight(Executor.later(run)("INSERT INTO t (id) VALUES (?)", ["d"]), run("SELECT count(*) AS n FROM t", []))
      )
      expect(rows).toEqual([{ n: 2 }])
      expect(yield* ids(sql)).toEqual(["a", "d"])
    }))

  it.scoped("on the worker: a BEGIN that fails leaves the open transaction it met alone", () =>
    Effect.gen(function*() {
      const sql = yield* fresh
      const executor = Executor.perOperation(sql, "BEGIN IMMEDIATE")
      yield* sql.unsafe("BEGIN")
      yield* sql.unsafe("INSERT INTO t (id) VALUES ('x')")
      const failed = yield* Effect.exit(executor.transaction((run) => run("INSERT INTO t (id) VALUES (?)", ["y"])))
      expect(Exit.isFailure(failed)).toBe(true)
      // Still open (a ROLLBACK from the executor would have ended it): this one commits 'x'.
      yield* sql.unsafe("COMMIT")
      expect(yield* ids(sql)).toEqual(["x"])
    }))

  it.scoped("on the worker: a statement on its own waits for an open transaction, never runs in it, and does not wait for another's answer", () =>
    Effect.gen(function*() {
      const sql = yield* fresh
      const executor = yield* Executor.make(sql, false)
      const inside = yield* Deferred.make<void>()
      const finish = yield* Deferred.make<void>()
      // A transaction that writes, then waits with the connection held.
      const open = yield* Effect.fork(executor.transaction((run) =>
        run("INSERT INTO t (id) VALUES ('uncommitted') RETURNING id", []).pipe(
          Effect.zipRight(Deferred.succeed(inside, undefined)),
          Effect.zipRight(Deferred.await(finish)),
          Effect.zipRight(Effect.fail("rolled back"))
        )
      ))
      yield* Deferred.await(inside)
      // Sent now, it would run inside the open transaction and see its row.
      const count = yield* Effect.fork(executor.run("SELECT COUNT(*) AS n FROM t", []))
      yield* Effect.forEach(Array.from({ length: 20 }), () => Effect.yieldNow(), { discard: true })
      expect(count.unsafePoll()).toBeNull()
      yield* Deferred.succeed(finish, undefined)
      expect(yield* Effect.exit(Fiber.join(open))).toEqual(Exit.fail("rolled back"))
      expect(yield* Fiber.join(count)).toEqual([{ n: 0 }])
      // With no transaction open, statements on their own go out together: a hundred, each its own answer.
      const answers = yield* Effect.forEach(Array.from({ length: 100 }, (_, n) => n), (n) => executor.run("SELECT ? AS n", [n]), { concurrency: "unbounded" })
      expect(answers.map((rows) => rows[0]!["n"])).toEqual(Array.from({ length: 100 }, (_, n) => n))
    }))

  it.scoped("on the worker: atOnce commits a transaction sent whole; a guard with no rows rolls it back; a failure rolls it back", () =>
    Effect.gen(function*() {
      const sql = yield* fresh
      const executor = yield* Executor.make(sql, false)
      const done = yield* executor.atOnce!([["INSERT INTO t (id) VALUES ('a') RETURNING id", [], "guard"], ["INSERT INTO t (id) VALUES ('b') RETURNING id", []]])
      expect(done).toEqual({ _tag: "Committed", rows: [[{ id: "a" }], [{ id: "b" }]] })
      // The guard finds nothing: what ran before it is rolled back, what follows it does not run.
      const stopped = yield* executor.atOnce!([
        ["INSERT INTO t (id) VALUES ('c')", []],
        ["SELECT id FROM t WHERE id = 'nothing'", [], "guard"],
        ["INSERT INTO t (id) VALUES ('d')", []]
      ])
      expect(stopped).toEqual({ _tag: "Stopped", stoppedAt: 1 })
      expect(yield* ids(sql)).toEqual(["a", "b"])
      // A statement that fails after others ran: all rolled back, the error the answer.
      const failed = yield* Effect.exit(executor.atOnce!([["INSERT INTO t (id) VALUES ('e')", []], ["INSERT INTO t (id) VALUES ('a')", []]]))
      expect(Exit.isFailure(failed)).toBe(true)
      expect(yield* ids(sql)).toEqual(["a", "b"])
      // The connection is free, with no transaction left open.
      yield* executor.transaction((run) => run("INSERT INTO t (id) VALUES ('f')", []))
      expect(yield* ids(sql)).toEqual(["a", "b", "f"])
    }))
})
