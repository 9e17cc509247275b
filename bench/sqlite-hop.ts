/**
 * `npx tsx --conditions=@mediagate/source bench/sqlite-hop.ts`: what a statement costs through
 * SQLite's worker-thread client (`SqliteWorker`, the store's) against @effect/sql-sqlite-node's
 * client on the main thread, on the task store's path (a reserved connection's `execute`).
 * `BENCH_STATEMENTS` (default 20000) statements one after another (the executor's lock around each), half an INSERT of one row,
 * half a SELECT of it by key, on a WAL file in a temporary folder; then the same number with
 * `BENCH_CONCURRENCY` (default 8) fibers sharing the connection, as the engine's fibers do;
 * then as many SELECTs by key from that many fibers through the client itself, no lock
 * (the task store's statements on their own: a query's read), which the worker's client
 * sends to the worker together when they come in the same turn of the event loop.
 * Wall and CPU (the whole process, every thread) per statement, the better of
 * `BENCH_ROUNDS` (default 3) rounds per side, the sides alternating.
 */
import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Mutex from "../packages/store-sql/src/internal/Mutex.js"
import * as SqliteWorker from "../packages/store-sql/src/SqliteWorker.js"

const statements = Number(process.env["BENCH_STATEMENTS"] ?? "20000")
const concurrency = Number(process.env["BENCH_CONCURRENCY"] ?? "8")
const rounds = Number(process.env["BENCH_ROUNDS"] ?? "3")
const dir = mkdtempSync(join(tmpdir(), "mediagate-sqlite-hop-"))

const sides: Record<string, (filename: string) => Layer.Layer<SqlClient.SqlClient, unknown>> = {
  "main thread (sql-sqlite-node)": (filename) => SqliteClient.layer({ filename }),
  "worker thread (SqliteWorker)": (filename) => SqliteWorker.layer({ filename })
}

/** Wall and CPU per statement of `statements` statements from `fibers` fibers, numbered from `base`. */
const timed = (base: number, fibers: number, statement: (n: number) => Effect.Effect<unknown, unknown>) =>
  Effect.gen(function*() {
    const cpu = process.cpuUsage()
    const started = performance.now()
    yield* Effect.forEach(Array.from({ length: statements }, (_, i) => base + i), statement, { concurrency: fibers, discard: true })
    const wall = performance.now() - started
    const used = process.cpuUsage(cpu)
    return { wall: (wall * 1000) / statements, cpu: (used.user + used.system) / statements }
  })

const measure = (side: string, round: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // The reserved connection is given back before the reads, which would wait for it.
    const { serial, shared } = yield* Effect.scoped(Effect.gen(function*() {
      const connection = yield* sql.reserve
      yield* connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)", [], undefined)
      const lock = Mutex.make().withLock
      const one = (n: number) =>
        lock(n % 2 === 0
          ? connection.execute("INSERT INTO t (id, body) VALUES (?, ?)", [n, `task ${n} with a body of some length`], undefined)
          : connection.execute("SELECT id, body FROM t WHERE id = ?", [n - 1], undefined))
      return { serial: yield* timed(0, 1, one), shared: yield* timed(statements * 2, concurrency, one) }
    }))
    const reads = yield* timed(0, concurrency, (n) => sql.unsafe("SELECT id, body FROM t WHERE id = ?", [2 * (n % statements)]))
    console.log(
      `  ${side} round ${round}: one at a time ${serial.wall.toFixed(1)} µs wall, ${serial.cpu.toFixed(1)} µs CPU; ${concurrency} fibers ${shared.wall.toFixed(1)} / ${
        shared.cpu.toFixed(1)
      }; reads on their own ${reads.wall.toFixed(1)} / ${reads.cpu.toFixed(1)}`
    )
    return { serial, shared, reads }
  }).pipe(Effect.provide(sides[side]!(join(dir, `${side.split(" ")[0]}-${round}.db`))))

const main = Effect.gen(function*() {
  type Figure = { readonly wall: number; readonly cpu: number }
  const best: Record<string, { serial: Figure; shared: Figure; reads: Figure }> = {}
  for (let round = 1; round <= rounds; round++) {
    for (const side of Object.keys(sides)) {
      const result = yield* measure(side, round)
      const kept = best[side]
      if (kept === undefined || result.serial.wall < kept.serial.wall) best[side] = result
    }
  }
  console.log(`\n| client | one at a time: µs wall / CPU per statement | ${concurrency} fibers: µs wall / CPU | reads on their own, ${concurrency} fibers |\n|---|---|---|---|`)
  for (const [side, { reads, serial, shared }] of Object.entries(best)) {
    const figure = ({ cpu, wall }: Figure) => `${wall.toFixed(1)} / ${cpu.toFixed(1)}`
    console.log(`| ${side} | ${figure(serial)} | ${figure(shared)} | ${figure(reads)} |`)
  }
})

Effect.runPromise(main).catch((error) => {
  console.error(error)
  process.exitCode = 1
}).finally(() => rmSync(dir, { recursive: true, force: true }))
