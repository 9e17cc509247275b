/**
 * `npm run bench:e2e`: the standalone server as a new user runs it (a child process,
 * `MEDIAGATE_SIMULATOR_PROFILE=instant`), on SQLite (a file in a temporary folder) and, when
 * MEDIAGATE_TEST_PG_URL is set or `--pg <url>` is given, on a fresh PostgreSQL database;
 * this process is the clients and a loopback `node:http` callback receiver. One server,
 * with a database of its own, per store and model: alpha-image-2 (a sync upstream call) and
 * beta-imagine/text-to-image-standard (async: submit, then poll), both 1024x1024.
 *
 * - Idle latencies, one task at a time (`BENCH_IDLE`, default 50, after 20 to warm up):
 *   submit sent -> upstream submit, -> SUCCESS (`updated_at`), and SUCCESS -> callback
 *   arrived. The upstream submit time is the simulator's own: an instant async job's
 *   upstream id is `sim_<time of the submit>_<token>`; a sync call has no id, so it is the
 *   attempt's `started_at`, read from the clock just before the engine calls the simulator.
 * - Throughput (`BENCH_TASKS`, default 200,2000): tasks/s from the first submit sent to
 *   the last callback arrived, and the p50/p99 of submit sent -> callback arrived, under
 *   these loads: 64 clients each submitting its next task when its last one's callback arrived
 *   (`closed`), and every task submitted at once over 64 connections, then every callback
 *   awaited (`burst`); on SQLite also `quiet`: submitted at once without a callBackUrl, done
 *   when the database file holds them all SUCCESS (what callbacks cost is the difference
 *   from `burst`). CPU per task of the server process and of this one (Linux /proc).
 * - The submit path alone (`submits`): a server whose one running slot a task that never
 *   finishes holds, so the submitted tasks stay PENDING; submit round trips and CPU.
 *
 * Other settings: `BENCH_MODELS` (sync,async), `BENCH_MODES` (closed,burst,quiet,submits),
 * `BENCH_PROFILE=<dir>` (the server writes its CPU profiles in a folder per run there),
 * `BENCH_SQL_TRACE=1` (the server counts and times every SQL statement; printed per run; with it,
 * `BENCH_SQLITE_PRAGMAS="temp_store = MEMORY"` sets pragmas on the server's SQLite
 * connections, to measure a change to the store before making it),
 * `BENCH_SERVER_ROOT=<checkout>` (run another checkout's standalone server, e.g. an older
 * commit), `BENCH_WRITE=0` (do not write docs/benchmarks.md).
 *
 * `tsx bench/e2e.ts summarize <file.cpuprofile>...`: where a CPU profile's time went (self
 * time by kind, by package and by function; our modules' inclusive time).
 *
 * One file for the three roles, so that the server can `--import` it for the trace.
 */
import { freshPgDatabase, pgUrl as envPgUrl } from "@mediagate/store-sql/testing"
import { Effect } from "effect"
import { type ChildProcess, execSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs"
import { writeSection } from "../scripts/benchmarks-doc.js"
import * as Http from "node:http"
import { createRequire } from "node:module"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"

const env = (name: string, fallback: string) => process.env[name] ?? fallback
const list = (name: string, fallback: string) => env(name, fallback).split(",").map((item) => item.trim()).filter((item) => item !== "")

// ---------------------------------------------------------------------------------------
// In the server process (`--import bench/e2e.ts` with BENCH_E2E_ROLE=sql-trace): every
// SQL statement counted and timed (SQLite: its execution; PostgreSQL: its round trip),
// written to BENCH_SQL_TRACE_FILE when the process exits.

const traceSql = () => {
  const Database = createRequire(import.meta.url)("better-sqlite3")
  const statements = new Map<string, { count: number; millis: number }>()
  const prepare = Database.prototype.prepare
  // What-if, for the store's authors: BENCH_SQLITE_PRAGMAS="temp_store = MEMORY" (`;`-separated)
  // set on each connection before its first statement.
  const pragmas = (process.env["BENCH_SQLITE_PRAGMAS"] ?? "").split(";").map((pragma) => pragma.trim()).filter((pragma) => pragma !== "")
  const configured = new WeakSet<object>()
  Database.prototype.prepare = function(this: { pragma: (text: string) => unknown }, sql: string, ...rest: Array<unknown>) {
    if (!configured.has(this)) {
      configured.add(this)
      for (const pragma of pragmas) this.pragma(pragma)
    }
    const statement = prepare.call(this, sql, ...rest)
    const text = sql.replace(/\s+/g, " ").trim()
    for (const method of ["run", "all", "get", "iterate"]) {
      const original = statement[method]
      statement[method] = function(this: unknown, ...args: Array<unknown>) {
        const started = performance.now()
        try {
          return original.apply(this, args)
        } finally {
          const entry = statements.get(text) ?? { count: 0, millis: 0 }
          entry.count++
          entry.millis += performance.now() - started
          statements.set(text, entry)
        }
      }
    }
    return statement
  }
  // PostgreSQL: statements counted, with their round trips (sent -> answer, so waiting included).
  const Pg = createRequire(import.meta.url)("pg")
  const query = Pg.Client.prototype.query
  Pg.Client.prototype.query = function(this: unknown, ...args: Array<any>) {
    const text = String(typeof args[0] === "string" ? args[0] : args[0]?.text ?? "?").replace(/\s+/g, " ").trim()
    const last = args.length - 1
    if (typeof args[last] === "function") {
      const callback = args[last]
      const started = performance.now()
      args[last] = function(this: unknown, ...answer: Array<unknown>) {
        const entry = statements.get(text) ?? { count: 0, millis: 0 }
        entry.count++
        entry.millis += performance.now() - started
        statements.set(text, entry)
        return callback.apply(this, answer)
      }
    }
    return query.apply(this, args)
  }
  process.on("exit", () => writeFileSync(process.env["BENCH_SQL_TRACE_FILE"]!, JSON.stringify([...statements])))
}

// ---------------------------------------------------------------------------------------
// CPU profile summary.

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly children?: ReadonlyArray<number>
}

/** A frame's place: a package of ours, an npm package, Node itself, or V8's bookkeeping. */
const placeOf = (url: string, name: string): string => {
  if (url === "") return name.startsWith("(") ? name : "native"
  const ours = /\/(packages|examples)\/([^/]+)\/src\/(.+)$/.exec(url)
  if (ours !== null) return `ours: ${ours[2]}/${ours[3]}`
  const dependency = /node_modules\/((?:@[^/]+\/)?[^/]+)\/(?:dist\/(?:esm|cjs|dts)\/)?(.*)$/.exec(url)
  if (dependency !== null) {
    return dependency[1] === "effect" ? `effect/${dependency[2]!.replace(/^internal\//, "")}` : dependency[1]!
  }
  if (url.startsWith("node:")) return url.replace(/^node:internal\//, "node:").replace(/\/.*$/, "")
  return url
}

/** Coarse kinds of places, for a first look. */
const kindOf = (place: string): string =>
  place === "(idle)"
    ? "idle"
    : place === "(garbage collector)"
    ? "garbage collection"
    : place.startsWith("effect/")
    ? "Effect runtime and Schema (effect)"
    : /sql-sqlite-node|better-sqlite3/.test(place)
    ? "SQLite statements (run inside @effect/sql-sqlite-node's call)"
    : /^@effect\/sql|^pg|from pg/.test(place)
    ? "SQL clients (@effect/sql, pg)"
    : place.startsWith("@effect/platform")
    ? "@effect/platform"
    : /zlib/.test(place)
    ? "zlib (PNG deflate)"
    : /modules|tsx|esbuild|source_map|worker|bootstrap|wasm|url|esm/.test(place)
    ? "module loading at start (tsx)"
    : /fs|FileMediaStore/.test(place)
    ? "files (node:fs)"
    : /net|stream|http|tcp|dns|events|buffer|crypto|timers|encoding/.test(place)
    ? "Node networking, HTTP, streams, crypto"
    : place.startsWith("ours:")
    ? "our code (self time)"
    : "other"

/** Self time by kind, place and function; a native frame counts where its caller lives. */
export const summarize = (path: string, top = 30) => {
  const profile = JSON.parse(readFileSync(path, "utf8")) as {
    nodes: ReadonlyArray<ProfileNode>
    samples: ReadonlyArray<number>
    timeDeltas: ReadonlyArray<number>
  }
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  const self = new Map<number, number>()
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))
  let total = 0
  const places = new Map<string, number>()
  const functions = new Map<string, number>()
  for (const [id, micros] of self) {
    total += micros
    const node = byId.get(id)!
    let place = placeOf(node.callFrame.url, node.callFrame.functionName)
    if (place === "native") {
      let up = parent.get(id)
      while (up !== undefined && byId.get(up)!.callFrame.url === "") up = parent.get(up)
      place = `native, called from ${up === undefined ? "?" : placeOf(byId.get(up)!.callFrame.url, "")}`
    }
    places.set(place, (places.get(place) ?? 0) + micros)
    const frame = node.callFrame
    const name = `${frame.functionName || "(anonymous)"} ${frame.url.replace(/^.*\/(node_modules|packages|examples)\//, "")}:${frame.lineNumber + 1}`
    functions.set(name, (functions.get(name) ?? 0) + micros)
  }
  // Inclusive time of our modules: samples with a frame of the module anywhere on the stack.
  // Effect runs continuations from its own run loop, so this is the synchronous part only.
  const oursOnStack = new Map<number, ReadonlySet<string>>()
  const oursOf = (id: number): ReadonlySet<string> => {
    const known = oursOnStack.get(id)
    if (known !== undefined) return known
    const up = parent.get(id)
    const found = new Set(up === undefined ? [] : oursOf(up))
    const place = placeOf(byId.get(id)!.callFrame.url, "")
    if (place.startsWith("ours: ")) found.add(place.slice(6))
    oursOnStack.set(id, found)
    return found
  }
  const inclusive = new Map<string, number>()
  for (const [id, micros] of self) for (const module of oursOf(id)) inclusive.set(module, (inclusive.get(module) ?? 0) + micros)
  const share = (micros: number) => `${((100 * micros) / total).toFixed(1)}%`
  const sorted = (map: Map<string, number>) => [...map].sort((a, b) => b[1] - a[1])
  const kinds = new Map<string, number>()
  for (const [place, micros] of places) kinds.set(kindOf(place), (kinds.get(kindOf(place)) ?? 0) + micros)
  return {
    totalMillis: total / 1000,
    kinds: sorted(kinds).map(([kind, micros]) => `${share(micros).padStart(6)}  ${kind}`),
    places: sorted(places).slice(0, top).map(([place, micros]) => `${share(micros).padStart(6)}  ${place}`),
    functions: sorted(functions).slice(0, top).map(([name, micros]) => `${share(micros).padStart(6)}  ${name}`),
    ours: sorted(inclusive).slice(0, top).map(([module, micros]) => `${share(micros).padStart(6)}  ${module}`)
  }
}

// ---------------------------------------------------------------------------------------
// The benchmark.

const key = "bench-e2e-key-0123456789"
const idleTasks = Number(env("BENCH_IDLE", "50"))
const loads = list("BENCH_TASKS", "200,2000").map(Number)
const modes = list("BENCH_MODES", "closed,burst,quiet,submits") as Array<"closed" | "burst" | "quiet" | "submits">
const clients = 64
const pgUrl = process.argv.includes("--pg") ? process.argv[process.argv.indexOf("--pg") + 1] : envPgUrl
const serverRoot = env("BENCH_SERVER_ROOT", ".")

const models = {
  sync: { id: "alpha-image-2/text-to-image", input: { ratio: "1:1" } },
  async: { id: "beta-imagine/text-to-image-standard", input: { ratio: "1:1" } }
} as const
type ModelName = keyof typeof models

const clockTick = (() => {
  try {
    return Number(execSync("getconf CLK_TCK").toString().trim()) || 100
  } catch {
    return 100
  }
})()

/** CPU milliseconds a process has used so far (Linux), or NaN elsewhere. */
const cpuMillisOf = (pid: number): number => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTick
  } catch {
    return Number.NaN
  }
}
const ownCpuMillis = () => {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) / 1000
}

const listen = (server: Http.Server) =>
  new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)))

const freePort = async () => {
  const probe = Http.createServer()
  const port = await listen(probe)
  await new Promise<void>((resolve) => probe.close(() => resolve()))
  return port
}

/** A callback's task body and its arrival time (epoch ms). */
interface Arrival {
  readonly at: number
  readonly task: { readonly status: string; readonly updated_at: string; readonly attempts: ReadonlyArray<{ readonly started_at: string; readonly upstream_id: string | null }> }
}

const receiver = async () => {
  const arrived = new Map<string, Arrival>()
  const waiting = new Map<string, (arrival: Arrival) => void>()
  const server = Http.createServer({ keepAlive: true }, (request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const at = Date.now()
      const task = JSON.parse(Buffer.concat(chunks).toString("utf8")).data
      const arrival = { at, task }
      response.writeHead(204).end()
      const waiter = waiting.get(task.taskId)
      if (waiter === undefined) arrived.set(task.taskId, arrival)
      else (waiting.delete(task.taskId), waiter(arrival))
    })
  })
  const port = await listen(server)
  const callback = (taskId: string) => {
    const early = arrived.get(taskId)
    if (early !== undefined) return (arrived.delete(taskId), Promise.resolve(early))
    return new Promise<Arrival>((resolve) => waiting.set(taskId, resolve))
  }
  return { url: `http://127.0.0.1:${port}/callback`, callback, close: () => server.close() }
}

interface Server {
  readonly port: number
  readonly pid: number
  readonly stop: () => Promise<void>
}

const startServer = async (databaseUrl: string, dir: string, label: string, extraEnv: Record<string, string> = {}): Promise<Server> => {
  const port = await freePort()
  const profileDir = process.env["BENCH_PROFILE"]
  // A folder per run: tsx's loader thread writes a profile of its own beside the main thread's (the larger file).
  const profile = profileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${join(profileDir, `e2e-${label}`)}`]
  const traceFile = join(dir, "sql-trace.json")
  const trace = process.env["BENCH_SQL_TRACE"] === "1" ? ["--import", fileURLToPath(import.meta.url)] : []
  const child: ChildProcess = spawn(process.execPath, [...profile, "--conditions=@mediagate/source", "--import", "tsx", ...trace, "examples/standalone-server/src/main.ts"], {
    cwd: serverRoot,
    env: {
      ...process.env,
      BENCH_E2E_ROLE: trace.length > 0 ? "sql-trace" : "",
      BENCH_SQL_TRACE_FILE: traceFile,
      MEDIAGATE_PORT: String(port),
      MEDIAGATE_HOST: "127.0.0.1",
      MEDIAGATE_API_KEY: key,
      MEDIAGATE_DATABASE_URL: databaseUrl,
      MEDIAGATE_MEDIA_DIR: join(dir, "media"),
      MEDIAGATE_SIMULATOR_PROFILE: "instant",
      MEDIAGATE_ALLOW_PRIVATE_URLS: "true",
      // One key submits thousands of tasks at once: the benchmark measures the pipeline, not the limit.
      MEDIAGATE_RATE_LIMIT: "off",
      // Enough credit that no task of a run fails INSUFFICIENT_POINTS.
      MEDIAGATE_STARTING_CREDITS: "1000000",
      ...extraEnv
    },
    stdio: ["ignore", "ignore", "inherit"]
  })
  for (let i = 0; ; i++) {
    const up = await fetch(`http://127.0.0.1:${port}/api/v1/models`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.ok, () => false)
    if (up) break
    if (i > 600 || child.exitCode !== null) throw new Error("the server did not start")
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const stop = async () => {
    await new Promise<void>((resolve) => (child.once("exit", () => resolve()), child.kill("SIGTERM")))
    if (trace.length > 0) printSqlTrace(traceFile, label)
  }
  return { port, pid: child.pid!, stop }
}

const printSqlTrace = (file: string, label: string) => {
  const statements = JSON.parse(readFileSync(file, "utf8")) as Array<[string, { count: number; millis: number }]>
  const total = statements.reduce((sum, [, entry]) => sum + entry.millis, 0)
  console.log(`SQL statements of ${label}: ${statements.reduce((sum, [, entry]) => sum + entry.count, 0)}, ${total.toFixed(0)} ms in all`)
  for (const [sql, entry] of statements.sort((a, b) => b[1].millis - a[1].millis).slice(0, 25)) {
    console.log(`  ${String(entry.count).padStart(7)} x ${(entry.millis / entry.count * 1000).toFixed(0).padStart(5)} us = ${entry.millis.toFixed(0).padStart(6)} ms  ${sql.slice(0, 160)}`)
  }
}

/** Keep-alive connections for the submits, at most `clients` at once. */
const agent = new Http.Agent({ keepAlive: true, maxSockets: clients })

const submitter = (port: number, callBackUrl: string, model: ModelName) => (i: number, withCallback = true) =>
  new Promise<string>((resolve, reject) => {
    const body = JSON.stringify({ model: models[model].id, input: { prompt: `bench ${i}`, ...models[model].input }, ...(withCallback ? { callBackUrl } : {}) })
    const request = Http.request({
      host: "127.0.0.1",
      port,
      path: "/api/v1/task/submit",
      method: "POST",
      agent,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "content-length": Buffer.byteLength(body) }
    }, (response) => {
      const chunks: Array<Buffer> = []
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      response.on("end", () => {
        const answer = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { code: number; data: { taskId: string } }
        if (answer.code === 0) resolve(answer.data.taskId)
        else reject(new Error(`submit refused: ${JSON.stringify(answer)}`))
      })
    })
    request.on("error", reject)
    request.end(body)
  })

const percentile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}
const figure = (values: ReadonlyArray<number>) =>
  values.some(Number.isNaN) ? "n/a" : `${percentile(values, 0.5).toFixed(0)} / ${percentile(values, 0.99).toFixed(0)}`

/** When the upstream received the submit: the simulator's time in an async job's id, else the attempt's start. */
const upstreamSubmitAt = (task: Arrival["task"]) => {
  // Servers older than the attempts field (BENCH_SERVER_ROOT) do not say.
  const attempt = task.attempts?.[0]
  if (attempt === undefined) return Number.NaN
  const simulated = attempt.upstream_id === null ? null : /^sim_(\d+)_/.exec(attempt.upstream_id)
  return simulated === null ? Date.parse(attempt.started_at) : Number(simulated[1])
}

/** Tasks SUCCESS in a SQLite file, read beside the server (WAL lets a reader in while it writes). */
const successCounter = (file: string) => {
  const Database = createRequire(import.meta.url)("better-sqlite3")
  const db = new Database(file, { readonly: true })
  const count = db.prepare(`SELECT count(*) AS n FROM "mediagate_tasks" WHERE status = 'SUCCESS'`)
  return { count: () => (count.get() as { n: number }).n, close: () => db.close() }
}

const run = async (store: string, databaseUrl: string, dir: string, model: ModelName) => {
  const hooks = await receiver()
  const server = await startServer(databaseUrl, dir, `${store}-${model}`.toLowerCase())
  const submit = submitter(server.port, hooks.url, model)
  const ended = async (taskId: string) => {
    const arrival = await hooks.callback(taskId)
    if (arrival.task.status !== "SUCCESS") throw new Error(`task ${taskId} ended ${arrival.task.status}`)
    return arrival
  }
  try {
    // Warm up: the first requests compile code paths and fill the simulator's file cache.
    for (let i = 0; i < 20; i++) await ended(await submit(i))
    const toUpstream: Array<number> = []
    const toSuccess: Array<number> = []
    const toCallback: Array<number> = []
    for (let i = 0; i < idleTasks; i++) {
      const sent = Date.now()
      const { at, task } = await ended(await submit(i))
      const success = Date.parse(task.updated_at)
      toUpstream.push(upstreamSubmitAt(task) - sent)
      toSuccess.push(success - sent)
      toCallback.push(at - success)
    }
    const idle = `| ${store} | ${models[model].id} | ${figure(toUpstream)} | ${figure(toSuccess)} | ${figure(toCallback)} |`
    console.log(idle)

    const load: Array<string> = []
    for (const tasks of loads) {
      for (const mode of modes) {
        const latencies: Array<number> = []
        let next = 0
        const serverCpu = cpuMillisOf(server.pid)
        const ownCpu = ownCpuMillis()
        const started = Date.now()
        const one = async (i: number) => {
          const sent = Date.now()
          const taskId = await submit(i)
          return async () => latencies.push((await ended(taskId)).at - sent)
        }
        if (mode === "submits") continue
        if (mode === "quiet") {
          // No callbacks: tasks submitted at once, done when the database holds them all SUCCESS.
          if (!databaseUrl.startsWith("sqlite:")) continue
          const counter = successCounter(databaseUrl.slice("sqlite:".length))
          const before = counter.count()
          await Promise.all(Array.from({ length: tasks }, (_, i) => submit(i, false)))
          while (counter.count() < before + tasks) await new Promise((resolve) => setTimeout(resolve, 5))
          counter.close()
        } else if (mode === "closed") {
          await Promise.all(Array.from({ length: clients }, async () => {
            while (next < tasks) await (await one(next++))()
          }))
        } else {
          // The agent holds the submits to `clients` connections at once.
          const waits = await Promise.all(Array.from({ length: tasks }, (_, i) => one(i)))
          await Promise.all(waits.map((wait) => wait()))
        }
        const seconds = (Date.now() - started) / 1000
        const perTask = (millis: number) => (millis / tasks).toFixed(2)
        load.push(
          `| ${store} | ${models[model].id} | ${tasks} | ${mode} | ${(tasks / seconds).toFixed(0)} | ${mode === "quiet" ? "-" : figure(latencies)} | ${
            perTask(cpuMillisOf(server.pid) - serverCpu)
          } | ${perTask(ownCpuMillis() - ownCpu)} |`
        )
        console.log(load[load.length - 1])
      }
    }
    return { idle, load }
  } finally {
    await server.stop()
    hooks.close()
  }
}

/**
 * The submit path alone: MEDIAGATE_MAX_RUNNING=1 and one sync task that never finishes
 * (`[sim:timeout]`) holding that slot, so every task submitted after it waits PENDING; the
 * engine still wakes on each submit and finds nothing it may claim. Submit round trips and
 * CPU per submit.
 */
const submitsOnly = async (store: string, databaseUrl: string, dir: string) => {
  const server = await startServer(databaseUrl, dir, `${store}-submits`.toLowerCase(), { MEDIAGATE_MAX_RUNNING: "1" })
  try {
    const submit = submitter(server.port, "", "sync")
    await submitPrompt(server.port, "held [sim:timeout]")
    for (let i = 0; i < 20; i++) await submit(i, false)
    const rows: Array<string> = []
    for (const tasks of loads) {
      const latencies: Array<number> = []
      const serverCpu = cpuMillisOf(server.pid)
      const ownCpu = ownCpuMillis()
      const started = Date.now()
      await Promise.all(Array.from({ length: tasks }, async (_, i) => {
        const sent = Date.now()
        await submit(i, false)
        latencies.push(Date.now() - sent)
      }))
      const seconds = (Date.now() - started) / 1000
      rows.push(
        `| ${store} | ${models.sync.id} | ${tasks} | submits only | ${(tasks / seconds).toFixed(0)} | ${figure(latencies)} | ${
          ((cpuMillisOf(server.pid) - serverCpu) / tasks).toFixed(2)
        } | ${((ownCpuMillis() - ownCpu) / tasks).toFixed(2)} |`
      )
      console.log(rows[rows.length - 1])
    }
    return rows
  } finally {
    await server.stop()
  }
}

const submitPrompt = (port: number, prompt: string) =>
  fetch(`http://127.0.0.1:${port}/api/v1/task/submit`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: models.sync.id, input: { prompt, ...models.sync.input } })
  }).then((response) => response.json())

/** Runs `f` on a database of its own: a SQLite file in a temporary folder, or a fresh PostgreSQL database. */
const withDatabase = <A>(store: "SQLite" | "PostgreSQL", name: string, f: (url: string, dir: string) => Promise<A>): Promise<A> => {
  const inFolder = async (url: (dir: string) => string) => {
    const dir = mkdtempSync(join(tmpdir(), "mediagate-bench-e2e-"))
    try {
      return await f(url(dir), dir)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
  return store === "SQLite"
    ? inFolder((dir) => `sqlite:${join(dir, "bench.db")}`)
    : Effect.runPromise(Effect.scoped(Effect.flatMap(freshPgDatabase(pgUrl!, `e2e_${name}`), (url) => Effect.promise(() => inFolder(() => url)))))
}

const main = async () => {
  const results: Array<{ idle: string; load: Array<string> }> = []
  const submits: Array<string> = []
  const stores: Array<"SQLite" | "PostgreSQL"> = pgUrl === undefined ? ["SQLite"] : ["SQLite", "PostgreSQL"]
  for (const store of stores) {
    for (const model of list("BENCH_MODELS", "sync,async") as Array<ModelName>) {
      results.push(await withDatabase(store, model, (url, dir) => run(store, url, dir, model)))
    }
    if (modes.includes("submits")) submits.push(...await withDatabase(store, "submits", (url, dir) => submitsOnly(store, url, dir)))
  }
  if (env("BENCH_WRITE", "1") !== "0") write(results, submits)
  process.exit(0)
}

const write = (results: ReadonlyArray<{ idle: string; load: ReadonlyArray<string> }>, submits: ReadonlyArray<string>) => {
  const section = [
    "<!-- bench:e2e:start -->",
    "## End to end: the standalone server",
    "",
    "Command: `npm run bench:e2e` (PostgreSQL too when `MEDIAGATE_TEST_PG_URL` is set). The",
    "standalone server in a child process as a new user starts it (instant simulator), with a",
    "database of its own per store and model; this process is the clients and a loopback",
    "callback receiver. Every task has a `callBackUrl`; alpha-image-2 is one sync upstream",
    "call, beta-imagine an async job (submit, then poll), 1024x1024 both. Times in",
    "milliseconds, p50 / p99.",
    "",
    `Idle, one task at a time (${idleTasks} tasks after 20 to warm up). The upstream submit is`,
    "the simulator's own time for beta-imagine (carried in its job id), the attempt's start",
    "(read just before the engine calls the simulator) for alpha-image-2:",
    "",
    "| store | model | submit -> upstream submit | submit -> SUCCESS | SUCCESS -> callback |",
    "|---|---|---|---|---|",
    ...results.map((result) => result.idle),
    "",
    `Under load: \`closed\`, ${clients} clients each submitting its next task when its last one's callback`,
    `arrived; \`burst\`, every task submitted at once over ${clients} connections, then every callback`,
    "awaited; `quiet` (SQLite), every task submitted at once without a `callBackUrl`, done when the",
    "database file holds them all SUCCESS. Tasks/s from the first submit to the last callback (or",
    "SUCCESS); CPU per task of the server process and of the benchmark process (clients and",
    "receiver), which share the machine's two cores. `submits only`: the submit path alone, on a",
    "server with `MEDIAGATE_MAX_RUNNING=1` whose one slot a task that never finishes holds (the",
    "others stay PENDING), each figure the submit's round trip:",
    "",
    "| store | model | tasks | load | tasks/s | submit -> callback | server CPU ms/task | clients CPU ms/task |",
    "|---|---|---|---|---|---|---|---|",
    ...results.flatMap((result) => result.load),
    ...submits,
    "<!-- bench:e2e:end -->"
  ].join("\n")
  writeSection(section)
}

/** Run as a script, not imported (`summarize` is usable from other scripts). */
const isEntry = process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)

if (process.env["BENCH_E2E_ROLE"] === "sql-trace") {
  traceSql()
} else if (!isEntry) {
  // Imported for `summarize`.
} else if (process.argv[2] === "summarize") {
  for (const path of process.argv.slice(3)) {
    const summary = summarize(path)
    console.log(`${path}: ${summary.totalMillis.toFixed(0)} ms sampled\n\nSelf time by kind:\n${summary.kinds.join("\n")}\n\nSelf time by place:\n${summary.places.join("\n")}\n\nSelf time by function:\n${summary.functions.join("\n")}\n\nOur modules on the stack (inclusive, synchronous part):\n${summary.ours.join("\n")}\n`)
  }
} else {
  void main()
}
