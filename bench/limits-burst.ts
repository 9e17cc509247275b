/**
 * The cluster-wide rate limit under a burst (issue 33): three node processes on one fresh
 * PostgreSQL database, each with its own pool of 10 connections (as the standalone server
 * has), fire 100 takes of one key at once. For each take: how long it waited for an answer
 * (wall time), and whether it was allowed; and the statements the nodes sent, how many and
 * how long each took. Two ways to take, in this order:
 *
 * - `store`: each request its own statement on the database (`SharedLimits.take` of one
 *   token), as every request did before issue 33;
 * - `node`: through the rate limit as a node runs it (`RateLimit.makeShared` with its
 *   default fall-back threshold of 1 s), which asks the database once at a time per key.
 *
 *   npm run bench:limits-burst
 *   (PostgreSQL from MEDIAGATE_BENCH_PG_URL or MEDIAGATE_TEST_PG_URL, else 127.0.0.1:5432/test;
 *   BENCH_NODES, BENCH_PER_NODE, BENCH_ROUNDS change the shape)
 */
import { RateLimit } from "@mediagate/http"
import { Database, PgLimits } from "@mediagate/store-sql"
import { freshPgDatabase } from "@mediagate/store-sql/testing"
import { Effect, Exit, Layer, Logger, LogLevel, Redacted, Scope } from "effect"
import { fork } from "node:child_process"
import { fileURLToPath } from "node:url"

const NODES = Number(process.env["BENCH_NODES"] ?? 3)
const PER_NODE = Number(process.env["BENCH_PER_NODE"] ?? 100)
const ROUNDS = Number(process.env["BENCH_ROUNDS"] ?? 3)
const rate = { perSecond: 5, burst: 10 }
const modes = ["store", "node"] as const
type Mode = (typeof modes)[number]

/** What one node measured in a round: each take's wait (ms) and how many were allowed. */
interface Report {
  readonly waits: ReadonlyArray<number>
  readonly allowed: number
  readonly fellBack: boolean
  readonly statements: ReadonlyArray<{ readonly count: number; readonly ms: number }>
}

/** A node: builds its limits on `url`, then runs a round of `PER_NODE` takes each time the parent says `go`. */
const child = async (url: string) => {
  const scope = Effect.runSync(Scope.make())
  const warnings: Array<string> = []
  const logger = Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => void warnings.push(String(message))))
  const shared = await Effect.runPromise(
    Effect.gen(function*() {
      const client = yield* Layer.build(Database.layerPg(Redacted.make(url)))
      return yield* PgLimits.make().pipe(Effect.provide(client))
    }).pipe(Scope.extend(scope), Logger.withMinimumLogLevel(LogLevel.Error))
  )
  // Each statement the node sent: its count of tokens and how long it took.
  const statements: Array<{ readonly count: number; readonly ms: number }> = []
  const timed = {
    ...shared,
    take: (digest: string, r: typeof rate, count: number) =>
      Effect.suspend(() => {
        const started = performance.now()
        return Effect.tap(shared.take(digest, r, count), () => void statements.push({ count, ms: performance.now() - started }))
      })
  }
  process.on("message", async (message: { readonly mode: Mode; readonly key: string }) => {
    warnings.length = 0
    statements.length = 0
    const limit = RateLimit.makeShared(rate, timed)
    const digest = RateLimit.keyDigest(message.key)
    const one: Effect.Effect<boolean, unknown> = message.mode === "store"
      ? Effect.map(timed.take(digest, rate, 1), (taken) => taken.granted === 1)
      : Effect.map(limit.take(message.key), (decision) => decision._tag === "Allowed")
    const results = await Promise.all(Array.from({ length: PER_NODE }, async () => {
      const started = performance.now()
      const allowed = await Effect.runPromise(one.pipe(Effect.provide(logger)))
      return { wait: performance.now() - started, allowed }
    }))
    const report: Report = {
      waits: results.map((result) => result.wait),
      allowed: results.filter((result) => result.allowed).length,
      fellBack: warnings.some((line) => line.includes("cannot be reached")),
      statements: [...statements]
    }
    process.send!(report)
  })
  process.send!("ready")
}

const percentile = (sorted: ReadonlyArray<number>, p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!

const parent = async () => {
  const base = process.env["MEDIAGATE_BENCH_PG_URL"] ?? process.env["MEDIAGATE_TEST_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"
  const scope = Effect.runSync(Scope.make())
  const url = await Effect.runPromise(freshPgDatabase(base, "bench_burst").pipe(Scope.extend(scope)))
  const file = fileURLToPath(import.meta.url)
  const children = []
  // One at a time: the first migrates the database.
  for (let i = 0; i < NODES; i++) {
    const node = fork(file, ["child", url], { execArgv: process.execArgv })
    await new Promise<void>((resolve) => node.once("message", () => resolve()))
    children.push(node)
  }
  console.log(`${NODES} nodes x ${PER_NODE} takes of one key at once, ${rate.perSecond}/s with a burst of ${rate.burst}; each of ${ROUNDS} rounds a row`)
  console.log("| takes | wait p50 ms | p90 | p99 | max | allowed | nodes that fell back | statements | their time p50 ms | max |")
  console.log("|---|---|---|---|---|---|---|---|---|---|")
  for (const mode of modes) {
    const rows: Array<string> = []
    for (let round = 0; round < ROUNDS; round++) {
      // A key of its own each round: a full bucket.
      const key = `bench-${mode}-${round}`
      const reports = await Promise.all(children.map((node) =>
        new Promise<Report>((resolve) => {
          node.once("message", (report: Report) => resolve(report))
          node.send({ mode, key })
        })
      ))
      const waits = reports.flatMap((report) => report.waits).sort((a, b) => a - b)
      const allowed = reports.reduce((sum, report) => sum + report.allowed, 0)
      const statements = reports.flatMap((report) => report.statements.map((statement) => statement.ms)).sort((a, b) => a - b)
      rows.push(
        `| ${mode} | ${[0.5, 0.9, 0.99].map((p) => percentile(waits, p).toFixed(0)).join(" | ")} | ${waits.at(-1)!.toFixed(0)} | ${allowed} | ${
          reports.filter((report) => report.fellBack).length
        } | ${statements.length} | ${percentile(statements, 0.5).toFixed(0)} | ${statements.at(-1)!.toFixed(0)} |`
      )
    }
    for (const row of rows) console.log(row)
  }
  for (const node of children) node.kill()
  await Effect.runPromise(Scope.close(scope, Exit.void))
}

if (process.argv[2] === "child") await child(process.argv[3]!)
else await parent()
