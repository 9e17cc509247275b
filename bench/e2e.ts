/**
 * `npm run bench:e2e`: the standalone server as a new user runs it (a child process,
 * `MEDIAGATE_SIMULATOR_PROFILE=instant`), on SQLite and, when MEDIAGATE_TEST_PG_URL is set,
 * on PostgreSQL, with a loopback callback receiver in this process.
 *
 * - Idle latencies, one task at a time (`BENCH_IDLE`, default 50): submit sent -> upstream
 *   submit (the first attempt's `started_at`), -> SUCCESS (`updated_at`), and SUCCESS ->
 *   callback arrived, all read from the callback's body and this machine's clock (ms).
 * - Throughput: `BENCH_TASKS` (default 200 and 2000) alpha-image-2 tasks submitted by 64
 *   concurrent clients; tasks/s from the first submit to the last callback, and the p50/p99
 *   of submit sent -> callback arrived.
 *
 * Writes its figures into docs/benchmarks.md. `BENCH_PROFILE=<dir>` has the server write a
 * CPU profile there.
 */
import { freshPgDatabase, pgUrl } from "@mediagate/store-sql/testing"
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

const key = "bench-e2e-key-0123456789"
const idleTasks = Number(process.env["BENCH_IDLE"] ?? 50)
const loads = process.env["BENCH_TASKS"] === undefined ? [200, 2000] : [Number(process.env["BENCH_TASKS"])]
const clients = 64

const listen = (server: Http.Server) =>
  new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)))

const freePort = async () => {
  const probe = Http.createServer()
  const port = await listen(probe)
  await new Promise<void>((resolve) => probe.close(() => resolve()))
  return port
}

/** Callbacks as they arrive: the task's body and the arrival time (epoch ms). */
type Arrival = { readonly at: number; readonly task: { updated_at: string; attempts: Array<{ started_at: string }> } }

const receiver = async () => {
  const arrived = new Map<string, Arrival>()
  const waiting = new Map<string, () => void>()
  const server = Http.createServer({ keepAlive: true }, (request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const at = Date.now()
      const task = JSON.parse(Buffer.concat(chunks).toString("utf8")).data
      arrived.set(task.taskId, { at, task })
      response.writeHead(204).end()
      waiting.get(task.taskId)?.()
    })
  })
  const port = await listen(server)
  const callback = (taskId: string) =>
    arrived.has(taskId) ? Promise.resolve(arrived.get(taskId)!) : new Promise<Arrival>((resolve) => waiting.set(taskId, () => resolve(arrived.get(taskId)!)))
  return { url: `http://127.0.0.1:${port}/callback`, callback, close: () => server.close() }
}

const startServer = async (databaseUrl: string, dir: string) => {
  const port = await freePort()
  // BENCH_PROFILE=<dir>: the server writes a CPU profile there (`node --cpu-prof`) when it stops.
  const profile = process.env["BENCH_PROFILE"] === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${process.env["BENCH_PROFILE"]}`]
  const child: ChildProcess = spawn(process.execPath, [...profile, "--import", "tsx", "examples/standalone-server/src/main.ts"], {
    env: {
      ...process.env,
      MEDIAGATE_PORT: String(port),
      MEDIAGATE_HOST: "127.0.0.1",
      MEDIAGATE_API_KEY: key,
      MEDIAGATE_DATABASE_URL: databaseUrl,
      MEDIAGATE_MEDIA_DIR: dir,
      MEDIAGATE_SIMULATOR_PROFILE: "instant",
      MEDIAGATE_ALLOW_PRIVATE_URLS: "true"
    },
    stdio: ["ignore", "ignore", "inherit"]
  })
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    const up = await fetch(`${base}/api/v1/models`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.ok, () => false)
    if (up) break
    if (i > 600) throw new Error("the server did not start")
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const stop = () => new Promise<void>((resolve) => (child.once("exit", () => resolve()), child.kill("SIGTERM")))
  return { base, stop }
}

const submit = async (base: string, callBackUrl: string, i: number) => {
  const response = await fetch(`${base}/api/v1/task/submit`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: `bench ${i}`, ratio: "1:1" }, callBackUrl })
  })
  const body = (await response.json()) as { code: number; data: { taskId: string } }
  if (body.code !== 0) throw new Error(`submit refused: ${JSON.stringify(body)}`)
  return body.data.taskId
}

const percentile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}
const figure = (values: ReadonlyArray<number>) => `${percentile(values, 0.5).toFixed(0)} / ${percentile(values, 0.99).toFixed(0)}`

const run = async (name: string, databaseUrl: string) => {
  const dir = mkdtempSync(join(tmpdir(), "mediagate-bench-e2e-"))
  const hooks = await receiver()
  const server = await startServer(databaseUrl, join(dir, "media"))
  try {
    // Warm up: the first requests compile code paths.
    for (let i = 0; i < 20; i++) await hooks.callback(await submit(server.base, hooks.url, i))
    const toUpstream: Array<number> = []
    const toSuccess: Array<number> = []
    const toCallback: Array<number> = []
    for (let i = 0; i < idleTasks; i++) {
      const sent = Date.now()
      const { at, task } = await hooks.callback(await submit(server.base, hooks.url, i))
      const success = Date.parse(task.updated_at)
      toUpstream.push(Date.parse(task.attempts[0]!.started_at) - sent)
      toSuccess.push(success - sent)
      toCallback.push(at - success)
    }
    const idle = `| ${name} | ${figure(toUpstream)} | ${figure(toSuccess)} | ${figure(toCallback)} |`
    console.log(idle)

    const load: Array<string> = []
    for (const tasks of loads) {
      const latencies: Array<number> = []
      let next = 0
      const started = Date.now()
      await Promise.all(Array.from({ length: clients }, async () => {
        while (next < tasks) {
          const i = next++
          const sent = Date.now()
          const { at } = await hooks.callback(await submit(server.base, hooks.url, i))
          latencies.push(at - sent)
        }
      }))
      const seconds = (Date.now() - started) / 1000
      load.push(`| ${name} | ${tasks} | ${(tasks / seconds).toFixed(0)} | ${figure(latencies)} |`)
      console.log(load[load.length - 1])
    }
    return { idle, load }
  } finally {
    await server.stop()
    hooks.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

const main = async () => {
  const dir = mkdtempSync(join(tmpdir(), "mediagate-bench-e2e-db-"))
  const results = [await run("SQLite", `sqlite:${join(dir, "bench.db")}`)]
  if (pgUrl !== undefined) {
    results.push(await Effect.runPromise(Effect.scoped(Effect.flatMap(freshPgDatabase(pgUrl, "e2e"), (url) => Effect.promise(() => run("PostgreSQL", url))))))
  }
  rmSync(dir, { recursive: true, force: true })

  const section = [
    "<!-- bench:e2e:start -->",
    "## End to end: the standalone server",
    "",
    "Command: `npm run bench:e2e` (PostgreSQL too when `MEDIAGATE_TEST_PG_URL` is set). The",
    "standalone server in a child process as a new user starts it (instant simulator), this",
    "process as the clients and a loopback callback receiver; alpha-image-2 text-to-image tasks",
    "with a `callBackUrl`. Times in milliseconds, p50 / p99.",
    "",
    `Idle, one task at a time (${idleTasks} tasks after 20 to warm up):`,
    "",
    "| store | submit -> upstream submit | submit -> SUCCESS | SUCCESS -> callback |",
    "|---|---|---|---|",
    ...results.map((result) => result.idle),
    "",
    `Under load, ${clients} concurrent clients, each submitting its next task when the last one's callback arrived:`,
    "",
    "| store | tasks | tasks/s (first submit to last callback) | submit -> callback |",
    "|---|---|---|---|",
    ...results.flatMap((result) => result.load),
    "<!-- bench:e2e:end -->"
  ].join("\n")
  const docs = new URL("../docs/benchmarks.md", import.meta.url)
  const text = readFileSync(docs, "utf8")
  writeFileSync(
    docs,
    text.includes("<!-- bench:e2e:start -->")
      ? text.replace(/<!-- bench:e2e:start -->[\s\S]*<!-- bench:e2e:end -->/, section)
      : `${text.trimEnd()}\n\n${section}\n`
  )
  process.exit(0)
}

void main()
