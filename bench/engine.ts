/**
 * The engine alone: how many tasks a second one process takes from PENDING to SUCCESS, with
 * an upstream that answers at once, on each store. No HTTP, no simulator files, no
 * callbacks: claims, steps and writes only. `BENCH_TASKS` tasks (default 4,000) are stored
 * first, then the engine starts; the figure is tasks over the time until the last is done.
 * Async tasks take two steps (submit, then one poll 50 ms later); sync tasks one call.
 * PostgreSQL runs when MEDIAGATE_TEST_PG_URL is set, in a database of its own. Each figure
 * comes with this process's CPU per task over the engine's run.
 *
 * `BENCH_COUNT=1`: instead, per task, the Effect fibers the engine forked, the Effect steps
 * it ran, its FiberRef writes (`scripts/effect-counts.ts`) and the SQL statements it ran
 * (SQLite and PostgreSQL), with its CPU per task (the counting slows the steps, so no rate
 * and nothing written to docs/benchmarks.md). `BENCH_STORES` (memory,SQLite,PostgreSQL)
 * and `BENCH_KINDS` (async,sync) choose what runs.
 *
 *   npm run bench:engine
 */
import { Ids, ModelCatalog, TaskServiceAlone, TaskStore, Upstream } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { Engine } from "@mediagate/scheduler"
import { MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlTaskStore } from "@mediagate/store-sql"
import { freshPgDatabase, pgUrl } from "@mediagate/store-sql/testing"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { writeSection } from "../scripts/benchmarks-doc.js"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Worker } from "node:worker_threads"
import * as EffectCounts from "../scripts/effect-counts.js"

const tasks = Number(process.env["BENCH_TASKS"] ?? 4_000)
const counting = process.env["BENCH_COUNT"] === "1"
const chosen = (name: string, fallback: string) => (process.env[name] ?? fallback).split(",").map((item) => item.trim())
const stores = chosen("BENCH_STORES", "memory,SQLite,PostgreSQL")
const kinds = chosen("BENCH_KINDS", "async,sync")

/** SQL statements run (SQLite's, each a message to its worker thread; node-postgres's queries), counted from here on. */
const statements = (() => {
  const require = createRequire(import.meta.url)
  const counter = { count: 0 }
  const post = Worker.prototype.postMessage
  Worker.prototype.postMessage = function(this: Worker, ...args: Parameters<Worker["postMessage"]>) {
    counter.count++
    return post.apply(this, args)
  }
  const Pg = require("pg")
  const query = Pg.Client.prototype.query
  Pg.Client.prototype.query = function(this: unknown, ...args: Array<unknown>) {
    counter.count++
    return query.apply(this, args)
  }
  return counter
})()
const result = { type: "image" as const, urls: ["https://cdn.example/a.png"] }

const instant = (sync: boolean) => {
  let n = 0
  return Layer.succeed(Upstream.Upstream, {
    submit: () =>
      sync
        ? Effect.succeed({ _tag: "Completed" as const, result })
        : Effect.sync(() => ({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make(`up${n++}`) })),
    poll: () => Effect.succeed({ _tag: "Completed" as const, result })
  })
}

/** Tasks per second for one backend and kind, with CPU per task; with BENCH_COUNT, the counts per task. */
const measure = (store: Layer.Layer<TaskStore.TaskStore, unknown>, sync: boolean) =>
  Effect.scoped(
    Effect.gen(function*() {
      const counter = yield* EffectCounts.make
      const context = yield* Layer.build(store)
      const stored = Context.get(context, TaskStore.TaskStore)
      const ids: Array<Ids.TaskId> = []
      const now = Date.now()
      for (let i = 0; i < tasks; i++) {
        const id = Ids.TaskId.make(Ids.uuidV7(now, Array.from({ length: 10 }, () => Math.floor(Math.random() * 256))))
        ids.push(id)
        yield* stored.create(Testing.record({ id, createdAt: now, job: Testing.job({ sync }) }))
      }
      // Every task done: looked at in order, each once it is found done.
      const done = (id: Ids.TaskId) => Effect.map(stored.get(id), (found) => Option.getOrThrow(found).status === "SUCCESS")
      let undone = 0
      const finished = Effect.gen(function*() {
        while (undone < ids.length && (yield* done(ids[undone]!))) undone++
        return undone === ids.length
      })
      const engine = Layer.build(
        Engine.layer({ maxRunning: tasks, maxRunningPerAccount: tasks }).pipe(
          Layer.provide(TaskServiceAlone.writes),
          Layer.provide([instant(sync), Ids.layer, ModelCatalog.layer, Layer.succeedContext(context)])
        )
      )
      const started = performance.now()
      const cpu = process.cpuUsage()
      const sqlBefore = statements.count
      if (counting) counter.start()
      yield* counting ? counter.counted(engine) : engine
      // The look for the end runs outside the counted fibers; its reads (one statement each) are taken off.
      let looking = 0
      const look = Effect.suspend(() => {
        const before = undone
        return Effect.ensuring(finished, Effect.sync(() => void (looking += undone - before + 1)))
      })
      while (!(yield* look)) yield* Effect.sleep("5 millis")
      const counts = counting ? counter.stop() : undefined
      const used = process.cpuUsage(cpu)
      return {
        rate: tasks / ((performance.now() - started) / 1000),
        cpuMs: (used.user + used.system) / 1000 / tasks,
        ...(counts === undefined ? {} : {
          fibers: counts.fibers / tasks,
          steps: counts.steps / tasks,
          fiberRefWrites: counts.fiberRefWrites / tasks,
          sql: Math.max(0, statements.count - sqlBefore - looking) / tasks
        })
      }
    })
  )

const main = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "mediagate-bench-engine-"))
  let file = 0
  const backends: Array<readonly [string, () => Layer.Layer<TaskStore.TaskStore, unknown>]> = [
    ["memory", () => MemoryTaskStore.layer],
    ["SQLite", () => SqlTaskStore.layer.pipe(Layer.provide(Database.layerSqlite(join(dir, `b${++file}.db`))))]
  ]
  if (pgUrl !== undefined && stores.includes("PostgreSQL")) {
    const url = yield* freshPgDatabase(pgUrl, "bench")
    backends.push(["PostgreSQL", () => SqlTaskStore.layerWith({ tablePrefix: `b${++file}_` }).pipe(Layer.provide(Database.layerPg(Redacted.make(url))))])
  }
  const rows: Array<string> = []
  for (const [name, store] of backends.filter(([name]) => stores.includes(name))) {
    const figures: Array<string> = []
    for (const kind of kinds) {
      const measured = yield* measure(store(), kind === "sync")
      if (counting) {
        const { cpuMs, fiberRefWrites, fibers, sql, steps } = measured
        console.log(
          `${name} ${kind}: per task ${fibers!.toFixed(2)} fibers, ${steps!.toFixed(0)} Effect steps, ${fiberRefWrites!.toFixed(1)} FiberRef writes, ` +
            `${sql!.toFixed(2)} SQL statements; ${cpuMs.toFixed(3)} ms CPU (counting)`
        )
      } else {
        console.log(`${name} ${kind}: ${measured.rate.toFixed(0)} tasks/s, ${measured.cpuMs.toFixed(3)} ms CPU per task`)
      }
      figures.push(measured.rate.toFixed(0))
    }
    rows.push(`| ${name} | ${figures[0]} | ${figures[1]} |`)
  }
  rmSync(dir, { recursive: true, force: true })
  const chosenOnly = process.env["BENCH_STORES"] !== undefined || process.env["BENCH_KINDS"] !== undefined
  if (counting || chosenOnly || process.env["BENCH_WRITE"] === "0") return

  const table = ["| store | async tasks/s (submit + poll) | sync tasks/s (one call) |", "|---|---|---|", ...rows].join("\n")
  const section = [
    "<!-- bench:engine:start -->",
    "## The engine alone",
    "",
    "Command: `npm run bench:engine` (`BENCH_TASKS`, default 4,000; PostgreSQL when",
    "`MEDIAGATE_TEST_PG_URL` is set). One process, an upstream that answers at once, no HTTP,",
    "no files, no callbacks: tasks stored first, then the engine takes them from PENDING to",
    "SUCCESS; the figure is tasks over the time until the last one is done.",
    "",
    table,
    "<!-- bench:engine:end -->"
  ].join("\n")
  writeSection(section)
})

Effect.runPromise(Effect.scoped(main)).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
