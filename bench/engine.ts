/**
 * The engine alone: how many tasks a second one process takes from PENDING to SUCCESS, with
 * an upstream that answers at once, on each store. No HTTP, no simulator files, no
 * callbacks: claims, steps and writes only. `BENCH_TASKS` tasks (default 4,000) are stored
 * first, then the engine starts; the figure is tasks over the time until the last is done.
 * Async tasks take two steps (submit, then one poll 50 ms later); sync tasks one call.
 * PostgreSQL runs when MEDIAGATE_TEST_PG_URL is set, in a database of its own.
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
import { writeSection } from "../scripts/benchmarks-doc.js"
import { tmpdir } from "node:os"
import { join } from "node:path"

const tasks = Number(process.env["BENCH_TASKS"] ?? 4_000)
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

/** Tasks per second for one backend and kind. */
const measure = (store: Layer.Layer<TaskStore.TaskStore, unknown>, sync: boolean) =>
  Effect.scoped(
    Effect.gen(function*() {
      const context = yield* Layer.build(store)
      const stored = Context.get(context, TaskStore.TaskStore)
      const ids: Array<Ids.TaskId> = []
      const now = Date.now()
      for (let i = 0; i < tasks; i++) {
        const id = Ids.TaskId.make(Ids.uuidV7(now, Array.from({ length: 10 }, () => Math.floor(Math.random() * 256))))
        ids.push(id)
        yield* stored.create(Testing.record({ id, createdAt: now, job: Testing.job({ sync }) }))
      }
      const started = performance.now()
      yield* Layer.build(
        Engine.layer({ maxRunning: tasks, maxRunningPerAccount: tasks }).pipe(
          Layer.provide(TaskServiceAlone.writes),
          Layer.provide([instant(sync), Ids.layer, ModelCatalog.layer, Layer.succeedContext(context)])
        )
      )
      // The engine claims earliest first: the last task done is (nearly) the last one stored.
      const done = (id: Ids.TaskId) => Effect.map(stored.get(id), (found) => Option.getOrThrow(found).status === "SUCCESS")
      while (!((yield* done(ids[ids.length - 1]!)) && (yield* done(ids[0]!)))) yield* Effect.sleep("5 millis")
      return tasks / ((performance.now() - started) / 1000)
    })
  )

const main = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "mediagate-bench-engine-"))
  let file = 0
  const backends: Array<readonly [string, () => Layer.Layer<TaskStore.TaskStore, unknown>]> = [
    ["memory", () => MemoryTaskStore.layer],
    ["SQLite", () => SqlTaskStore.layer.pipe(Layer.provide(Database.layerSqlite(join(dir, `b${++file}.db`))))]
  ]
  if (pgUrl !== undefined) {
    const url = yield* freshPgDatabase(pgUrl, "bench")
    backends.push(["PostgreSQL", () => SqlTaskStore.layerWith({ tablePrefix: `b${++file}_` }).pipe(Layer.provide(Database.layerPg(Redacted.make(url))))])
  }
  const rows: Array<string> = []
  for (const [name, store] of backends) {
    const figures: Array<string> = []
    for (const sync of [false, true]) figures.push((yield* measure(store(), sync)).toFixed(0))
    rows.push(`| ${name} | ${figures[0]} | ${figures[1]} |`)
    console.log(rows[rows.length - 1])
  }
  rmSync(dir, { recursive: true, force: true })

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
