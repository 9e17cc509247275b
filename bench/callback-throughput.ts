/**
 * `npm run bench:callbacks-throughput`: callbacks delivered per second to a loopback
 * node:http receiver by one deliverer, signed, through the production Outbound (resolve,
 * check, pin). `BENCH_CALLBACKS` owed callbacks (default 2,000) are stored first, on the
 * memory store, on SQLite and (when MEDIAGATE_TEST_PG_URL is set) on PostgreSQL; the figure
 * is callbacks over the time from the deliverer's start until the receiver has them all,
 * for each concurrency in `BENCH_CONCURRENCY` (default `8,32`; 32 is the deliverer's
 * default). The receiver runs in a process of its own, so this process's CPU time is the
 * deliverer's own cost per callback. The receiver counts each `webhook-id` it sees: a
 * callback sent twice is reported.
 *
 * `BENCH_PROFILE=<dir>` writes a CPU profile of each delivery phase (not the setup) there;
 * `BENCH_STORES=memory,SQLite,slow` runs only those (`slow`: the memory store with a
 * receiver that answers after 20 ms, which bounds the rate by the callbacks at once).
 */
import { Ids, TaskStore } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { NodeOutbound, NodeResolver } from "@mediagate/media"
import { Deliverer, Webhooks } from "@mediagate/scheduler"
import { MemoryAccounts, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlTaskStore } from "@mediagate/store-sql"
import { freshPgDatabase, pgUrl } from "@mediagate/store-sql/testing"
import { Context, Effect, Layer, Redacted } from "effect"
import { spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { writeSection } from "../scripts/benchmarks-doc.js"
import { Session } from "node:inspector/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { performance } from "node:perf_hooks"

const callbacks = Number(process.env["BENCH_CALLBACKS"] ?? 2_000)
const concurrencies = (process.env["BENCH_CONCURRENCY"] ?? "8,32").split(",").map(Number)
const only = process.env["BENCH_STORES"]?.split(",")
const profileDir = process.env["BENCH_PROFILE"]
const secret = Webhooks.secretFromHex("00112233445566778899aabbccddeeff0011223344556677")

/** The receiver: answers 204 once the body is read; reports when it has seen `expect` distinct ids. */
const receiverCode = `
const Http = require("node:http")
let expect = Infinity, seen = new Set(), requests = 0, delay = 0
const server = Http.createServer((request, response) => {
  request.resume()
  request.on("end", () => {
    if (delay > 0) setTimeout(() => response.writeHead(204).end(), delay)
    else response.writeHead(204).end()
    requests++
    seen.add(request.headers["webhook-id"])
    if (seen.size === expect) process.send({ done: true, requests })
  })
})
process.on("message", (message) => {
  if (message.expect !== undefined) { expect = message.expect; delay = message.delay; seen = new Set(); requests = 0 }
  if (message.close) process.exit(0)
})
server.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }))
`

type Row = { readonly store: string; readonly delay: number; readonly concurrency: number; readonly perSecond: number; readonly cpuMs: number; readonly duplicates: number }

const main = async () => {
  const receiver = spawn(process.execPath, ["-e", receiverCode], { stdio: ["ignore", "inherit", "inherit", "ipc"] })
  const port = await new Promise<number>((resolve) => receiver.once("message", (message) => resolve((message as { port: number }).port)))
  const url = `http://127.0.0.1:${port}/hook`
  const dir = mkdtempSync(join(tmpdir(), "mediagate-bench-callbacks-"))
  const session = profileDir === undefined ? undefined : new Session()
  if (session !== undefined) {
    mkdirSync(profileDir!, { recursive: true })
    session.connect()
    await session.post("Profiler.enable")
  }

  const measure = (name: string, store: Layer.Layer<TaskStore.TaskStore, unknown>, concurrency: number, callbacks: number, delay = 0) =>
    Effect.scoped(
      Effect.gen(function*() {
        const context = yield* Layer.build(store)
        const tasks = Context.get(context, TaskStore.TaskStore)
        const now = Date.now()
        for (let i = 0; i < callbacks; i++) {
          const id = Ids.uuidV7(now, Array.from({ length: 10 }, () => Math.floor(Math.random() * 256)))
          const task = Testing.record({ id, status: "FAILURE", dueAt: null, callBackUrl: url, createdAt: now })
          yield* tasks.create(task, [{ id: `msg_${id}`, taskId: task.id, url, createdAt: now }])
        }
        const all = new Promise<{ requests: number }>((resolve) => receiver.once("message", (message) => resolve(message as { requests: number })))
        receiver.send({ expect: callbacks, delay })
        const profiling = session !== undefined && name !== "warm-up"
        if (profiling) yield* Effect.promise(() => session!.post("Profiler.start"))
        const usage = process.cpuUsage()
        const started = performance.now()
        yield* Layer.build(
          Deliverer.layer({ concurrency }).pipe(
            Layer.provide([
              Layer.succeedContext(context),
              MemoryAccounts.layer([{ id: "acct_test", name: "t", apiKey: Redacted.make("k"), webhookSecret: Redacted.make(secret) }]),
              NodeOutbound.layer({ allowPrivate: true }).pipe(Layer.provide(NodeResolver.layer))
            ])
          )
        )
        const { requests } = yield* Effect.promise(() => all)
        const seconds = (performance.now() - started) / 1000
        const cpu = process.cpuUsage(usage)
        if (profiling) {
          const { profile } = yield* Effect.promise(() => session!.post("Profiler.stop"))
          writeFileSync(join(profileDir!, `callbacks-${name}-${concurrency}.cpuprofile`), JSON.stringify(profile))
        }
        return { store: name, delay, concurrency, perSecond: callbacks / seconds, cpuMs: (cpu.user + cpu.system) / 1000 / callbacks, duplicates: requests - callbacks }
      })
    )

  const stores: Array<readonly [string, () => Layer.Layer<TaskStore.TaskStore, unknown>]> = [
    ["memory", () => MemoryTaskStore.layer],
    ["SQLite", () => SqlTaskStore.layer.pipe(Layer.provide(Database.layerSqlite(join(dir, `c${Math.random()}.db`))))],
    ...(pgUrl === undefined ? [] : [[
      "PostgreSQL",
      () =>
        SqlTaskStore.layer.pipe(
          Layer.provide(Layer.unwrapScoped(Effect.map(freshPgDatabase(pgUrl!, "callbacks"), (url) => Database.layerPg(Redacted.make(url)))))
        )
    ] as const])
  ]
  // The JIT's first runs are not the deliverer's cost.
  await Effect.runPromise(measure("warm-up", MemoryTaskStore.layer, 8, 500))
  const rows: Array<Row> = []
  for (const [name, store] of stores.filter(([name]) => only === undefined || only.includes(name))) {
    for (const concurrency of concurrencies) {
      const row = await Effect.runPromise(measure(name, store(), concurrency, callbacks))
      rows.push(row)
      console.log(`${name}, receiver ${row.delay} ms, ${concurrency} at once: ${row.perSecond.toFixed(0)} callbacks/s, ${row.cpuMs.toFixed(3)} ms CPU per callback, ${row.duplicates} sent twice`)
    }
  }
  // A receiver that takes 20 ms to answer, as one across a network might: the time is spent
  // waiting, so it is the number of callbacks at once that bounds the rate.
  if (only === undefined || only.includes("slow")) {
    for (const concurrency of concurrencies) {
      const row = await Effect.runPromise(measure("memory", MemoryTaskStore.layer, concurrency, callbacks, 20))
      rows.push(row)
      console.log(`memory, receiver 20 ms, ${concurrency} at once: ${row.perSecond.toFixed(0)} callbacks/s, ${row.cpuMs.toFixed(3)} ms CPU per callback, ${row.duplicates} sent twice`)
    }
  }
  receiver.send({ close: true })
  rmSync(dir, { recursive: true, force: true })

  const section = [
    "<!-- bench:callbacks-throughput:start -->",
    "## Callbacks delivered per second",
    "",
    `Command: \`npm run bench:callbacks-throughput\` (\`BENCH_CALLBACKS\`, here ${callbacks.toLocaleString("en")};`,
    "`BENCH_CONCURRENCY`, here " + concurrencies.join(" and ") + "; `BENCH_STORES`; PostgreSQL too when",
    "`MEDIAGATE_TEST_PG_URL` is set; `BENCH_PROFILE=<dir>` for CPU profiles of the delivery",
    "phases). One deliverer (32 at once by default), the production Outbound (each callback's",
    "host checked and pinned; connections kept per checked address), Standard Webhooks",
    "signatures, a loopback node:http receiver in a process of its own answering 204 at once",
    "(and, on the memory store, after 20 ms, as a receiver across a network might). CPU: the",
    "deliverer's process (user and system) per callback, which other load on this 2-core",
    "machine inflates less than it does callbacks/s.",
    "",
    "| store | receiver answers | at once | callbacks/s | CPU ms per callback | sent twice |",
    "|---|---|---|---|---|---|",
    ...rows.map((row) =>
      `| ${row.store} | ${row.delay === 0 ? "at once" : `after ${row.delay} ms`} | ${row.concurrency} | ${row.perSecond.toFixed(0)} | ${row.cpuMs.toFixed(3)} | ${row.duplicates} |`
    ),
    "<!-- bench:callbacks-throughput:end -->"
  ].join("\n")
  writeSection(section)
  process.exit(0)
}

void main()
