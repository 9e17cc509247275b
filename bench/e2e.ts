/**
 * `npm run bench:e2e`: mediagate against the bare yardstick, side by side in one run.
 * Per store (SQLite, a file in a temporary folder; PostgreSQL, a fresh database, when
 * MEDIAGATE_TEST_PG_URL is set or `--pg <url>` is given) and model (alpha-image-2, a sync
 * upstream call; beta-imagine/text-to-image-standard, async: submit, then poll; 1024x1024
 * both), two child processes with a database each: the standalone server from its
 * TypeScript through tsx (`npm start` runs a built bundle since issue 37; CPU is counted per
 * round, after the start), with the heap flags of its checkout's `npm start`
 * (`startHeapFlags`), with `MEDIAGATE_SIMULATOR_PROFILE=instant`, and `bench/bare/server.ts` (node:http and the
 * database driver, no Effect). This process is the clients of both and the one loopback
 * `node:http` callback receiver both deliver to.
 *
 * - Idle (`BENCH_IDLE`, default 50, after `BENCH_WARMUP` tasks per side to warm up, default
 *   20: the JIT is still compiling then, and 1,000 take about 2 ms off mediagate's p50): one
 *   task at a time, the sides taking turns; submit sent -> callback arrived for both, and mediagate's split of it:
 *   -> upstream submit (the simulator's own time for an async job, whose id is
 *   `sim_<time of the submit>_<token>`; the attempt's `started_at` for a sync call),
 *   -> SUCCESS (`updated_at`), SUCCESS -> callback arrived.
 * - Under load (`BENCH_TASKS`, default 2000; `BENCH_CLIENTS`, default 50 connections):
 *   `closed`, each client submitting its next task when its last one's callback arrived, and
 *   `burst`, every task submitted at once, then every callback awaited. `BENCH_ROUNDS`
 *   (default 2) rounds per side, alternating A B A B; the better round of each side.
 *   Tasks/s (first submit sent -> last callback arrived), in `burst` submits acknowledged
 *   per second, the ratios mediagate / bare, submit -> callback p50/p99 and each server
 *   process's CPU per task (Linux /proc).
 *
 * Other settings: `BENCH_STORES` (SQLite,PostgreSQL), `BENCH_MODELS` (sync,async), `BENCH_MODES` (closed,burst),
 * `BENCH_PROFILE=<dir>` (both servers write CPU profiles in a folder per run there),
 * `BENCH_SQL_TRACE=1` (the servers count and time every SQL statement; printed per run; with it,
 * `BENCH_SQLITE_PRAGMAS="temp_store = MEMORY"` sets pragmas on the servers' SQLite
 * connections, to measure a change to the store before making it),
 * `BENCH_SERVER_ROOT=<checkout>` (run another checkout's standalone server, e.g. an older
 * commit), `BENCH_MEDIAGATE_MEMORY=1` (mediagate on its memory backends, the bare side on
 * the store's database: what the SQL store costs; the rows still name the store),
 * `BENCH_MEDIAGATE_NODE_FLAGS` (node flags for mediagate's server instead of the heap flags of
 * its checkout's `npm start`, space-separated, empty for none: a what-if),
 * `BENCH_THREADS=1` (each round also prints the server's CPU per task by thread, the main thread first),
 * `BENCH_WRITE=0` (do not write docs/benchmarks.md).
 *
 * `BENCH_NODES=1,2,3` (PostgreSQL only): instead of the above, N standalone servers on one
 * database for each N, submits round-robin over them, against one bare server in the same run;
 * they share a media folder, or one S3 server (s3rver) with `BENCH_NODES_MEDIA=s3`.
 *
 * `tsx bench/e2e.ts summarize <file.cpuprofile>...`: where a CPU profile's time went (self
 * time by kind, by package and by function; our modules' inclusive time).
 *
 * One file for the three roles, so that the server can `--import` it for the trace.
 */
import { pgUrl as envPgUrl } from "@mediagate/store-sql/testing"
import { type ChildProcess, spawn } from "node:child_process"
import { readdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs"
import { cpuMillisOf, listeningUrl, startHeapFlags, threadCpuMillisOf, withDatabase } from "../scripts/bench-support.js"
import { writeSection } from "../scripts/benchmarks-doc.js"
import * as Http from "node:http"
import { createRequire } from "node:module"
import type { AddressInfo } from "node:net"
import { basename, dirname, join } from "node:path"
import { performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"

const env = (name: string, fallback: string) => process.env[name] ?? fallback
const list = (name: string, fallback: string) => env(name, fallback).split(",").map((item) => item.trim()).filter((item) => item !== "")

// ---------------------------------------------------------------------------------------
// In the server process (`--import bench/e2e.ts` with BENCH_E2E_ROLE=sql-trace): every
// SQL statement counted and timed (SQLite: its execution; PostgreSQL: its round trip),
// written to BENCH_SQL_TRACE_FILE when the process exits.

type Traced = Map<string, { count: number; millis: number }>

/**
 * better-sqlite3's statements counted and timed into `statements`. It runs in the server's
 * main thread and, as its text, in the SQLite store's worker thread (an `--import` does not
 * reach a worker), so it names nothing but its parameters and globals.
 */
const traceSqlite = (Database: any, statements: Traced, pragmaList: string) => {
  const prepare = Database.prototype.prepare
  // What-if, for the store's authors: BENCH_SQLITE_PRAGMAS="temp_store = MEMORY" (`;`-separated)
  // set on each connection before its first statement.
  const pragmas = pragmaList.split(";").map((pragma) => pragma.trim()).filter((pragma) => pragma !== "")
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
}

const traceSql = () => {
  const require = createRequire(import.meta.url)
  const file = process.env["BENCH_SQL_TRACE_FILE"]!
  const pragmas = process.env["BENCH_SQLITE_PRAGMAS"] ?? ""
  const statements: Traced = new Map()
  traceSqlite(require("better-sqlite3"), statements, pragmas)
  // The SQLite store's worker (an eval'd program given its driver's path in `workerData`):
  // the same trace run first in it, written to a file of its own when the thread ends.
  const threads = require("node:worker_threads")
  const Worker = threads.Worker
  threads.Worker = class extends Worker {
    constructor(source: unknown, options?: { eval?: boolean; workerData?: { driver?: unknown } }) {
      const driver = options?.workerData?.driver
      super(
        options?.eval === true && typeof source === "string" && typeof driver === "string"
          ? [
            "{ const __name = (target) => target;",
            "const statements = new Map();",
            `(${traceSqlite.toString()})(require(${JSON.stringify(driver)}), statements, ${JSON.stringify(pragmas)});`,
            `process.on("exit", () => require("node:fs").writeFileSync(${JSON.stringify(file)} + ".thread-" + require("node:worker_threads").threadId, JSON.stringify([...statements]))); }`,
            source
          ].join("\n")
          : source,
        options
      )
    }
  }
  require("node:module").syncBuiltinESMExports()
  // PostgreSQL: statements counted, with their round trips (sent -> answer, so waiting included).
  const Pg = require("pg")
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
  process.on("exit", () => writeFileSync(file, JSON.stringify([...statements])))
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
const warmupTasks = Number(env("BENCH_WARMUP", "20"))
const loads = list("BENCH_TASKS", "2000").map(Number)
const modes = list("BENCH_MODES", "closed,burst") as Array<"closed" | "burst">
const rounds = Number(env("BENCH_ROUNDS", "2"))
const clients = Number(env("BENCH_CLIENTS", "50"))
const pgUrl = process.argv.includes("--pg") ? process.argv[process.argv.indexOf("--pg") + 1] : envPgUrl
const serverRoot = env("BENCH_SERVER_ROOT", ".")

const models = {
  sync: { id: "alpha-image-2/text-to-image", input: { ratio: "1:1" } },
  async: { id: "beta-imagine/text-to-image-standard", input: { ratio: "1:1" } }
} as const
type ModelName = keyof typeof models

/** The two sides measured in one run: the standalone server, and the bare yardstick (bench/bare). */
type SideName = "mediagate" | "bare"
const entries: Record<SideName, { readonly entry: string; readonly cwd: string }> = {
  mediagate: { entry: "examples/standalone-server/src/main.ts", cwd: serverRoot },
  bare: { entry: "bench/bare/server.ts", cwd: "." }
}

const listen = (server: Http.Server) =>
  new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)))

/** A callback's task body and its arrival time (epoch ms). */
interface Arrival {
  readonly at: number
  readonly task: { readonly status: string; readonly updated_at: string; readonly attempts?: ReadonlyArray<{ readonly started_at: string; readonly upstream_id: string | null }> }
}

/** The loopback callback receiver both sides deliver to (task ids are UUIDs, unique across them). */
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
  readonly side: SideName
  readonly port: number
  readonly pid: number
  readonly stop: () => Promise<void>
}

const startServer = async (
  side: SideName,
  databaseUrl: string,
  dir: string,
  label: string,
  extraEnv: Record<string, string> = {}
): Promise<Server> => {
  const profileDir = process.env["BENCH_PROFILE"]
  // A folder per run: tsx's loader thread writes a profile of its own beside the main thread's (the larger file).
  const profile = profileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${join(profileDir, `e2e-${label}`)}`]
  const traceFile = join(dir, "sql-trace.json")
  const trace = process.env["BENCH_SQL_TRACE"] === "1" ? ["--import", fileURLToPath(import.meta.url)] : []
  const { cwd, entry } = entries[side]
  // Mediagate's server with the heap flags of its checkout's `npm start`, or, as a what-if,
  // the node flags of BENCH_MEDIAGATE_NODE_FLAGS instead (space-separated; "" for none).
  const whatIf = process.env["BENCH_MEDIAGATE_NODE_FLAGS"]
  const flags = side !== "mediagate" ? [] : whatIf === undefined ? startHeapFlags(serverRoot) : whatIf.split(" ").filter((flag) => flag !== "")
  const child: ChildProcess = spawn(process.execPath, [...flags, ...profile, "--conditions=@mediagate/source", "--import", "tsx", ...trace, entry], {
    cwd,
    env: {
      ...process.env,
      BENCH_E2E_ROLE: trace.length > 0 ? "sql-trace" : "",
      BENCH_SQL_TRACE_FILE: traceFile,
      // A port the system chooses; the server prints it.
      MEDIAGATE_PORT: "0",
      MEDIAGATE_HOST: "127.0.0.1",
      MEDIAGATE_API_KEY: key,
      MEDIAGATE_DATABASE_URL: side === "mediagate" && env("BENCH_MEDIAGATE_MEMORY", "0") === "1" ? "memory" : databaseUrl,
      // An object store instead of the folder when the caller gives one (MEDIAGATE_MEDIA_URL).
      ...(extraEnv["MEDIAGATE_MEDIA_URL"] === undefined ? { MEDIAGATE_MEDIA_DIR: join(dir, "media") } : {}),
      MEDIAGATE_SIMULATOR_PROFILE: "instant",
      MEDIAGATE_ALLOW_PRIVATE_URLS: "true",
      // One key submits thousands of tasks at once: the benchmark measures the pipeline, not the limit.
      MEDIAGATE_RATE_LIMIT: "off",
      // Enough credit that no task of a run fails INSUFFICIENT_POINTS.
      MEDIAGATE_STARTING_CREDITS: "1000000",
      ...extraEnv
    },
    stdio: ["ignore", "pipe", "inherit"]
  })
  const port = Number(new URL(await listeningUrl(child)).port)
  for (let i = 0; ; i++) {
    // A time limit on each try: a request sent as the server starts listening was seen to hang.
    const up = await fetch(`http://127.0.0.1:${port}/api/v1/models`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(2_000) }).then((r) => r.ok, () => false)
    if (up) break
    if (i > 600 || child.exitCode !== null) throw new Error(`the ${side} server did not start`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const stop = async () => {
    await new Promise<void>((resolve) => (child.once("exit", () => resolve()), child.kill("SIGTERM")))
    if (trace.length > 0) printSqlTrace(traceFile, label)
  }
  return { side, port, pid: child.pid!, stop }
}

const printSqlTrace = (file: string, label: string) => {
  const byText = new Map<string, { count: number; millis: number }>()
  const files = [file, ...readdirSync(dirname(file)).filter((name) => name.startsWith(`${basename(file)}.thread-`)).map((name) => join(dirname(file), name))]
  for (const path of files) {
    for (const [sql, entry] of JSON.parse(readFileSync(path, "utf8")) as Array<[string, { count: number; millis: number }]>) {
      const sum = byText.get(sql) ?? { count: 0, millis: 0 }
      byText.set(sql, { count: sum.count + entry.count, millis: sum.millis + entry.millis })
    }
  }
  const statements = [...byText]
  const total = statements.reduce((sum, [, entry]) => sum + entry.millis, 0)
  console.log(`SQL statements of ${label}: ${statements.reduce((sum, [, entry]) => sum + entry.count, 0)}, ${total.toFixed(0)} ms in all`)
  for (const [sql, entry] of statements.sort((a, b) => b[1].millis - a[1].millis).slice(0, 25)) {
    console.log(`  ${String(entry.count).padStart(7)} x ${(entry.millis / entry.count * 1000).toFixed(0).padStart(5)} us = ${entry.millis.toFixed(0).padStart(6)} ms  ${sql.slice(0, 160)}`)
  }
}

/**
 * Keep-alive connections for the submits, at most `clients` at once (one pool per server). A
 * submit sent on a kept connection that the server closed as idle at that moment (its
 * keep-alive timeout ran out during the other side's round) is reset before the server read
 * it, and is sent again once on a new connection, as Node's documentation advises
 * (`request.reusedSocket`).
 */
const submitter = (port: number, callBackUrl: string, model: ModelName) => {
  const agent = new Http.Agent({ keepAlive: true, maxSockets: clients })
  const once = (i: number, retried: boolean): Promise<string> =>
    new Promise<string>((resolve, reject) => {
      const body = JSON.stringify({ model: models[model].id, input: { prompt: `bench ${i}`, ...models[model].input }, callBackUrl })
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
      request.on("error", (error: NodeJS.ErrnoException) => {
        if (!retried && request.reusedSocket && error.code === "ECONNRESET") resolve(once(i, true))
        else reject(error)
      })
      request.end(body)
    })
  return (i: number) => once(i, false)
}

const percentile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}
const figure = (values: ReadonlyArray<number>) =>
  values.length === 0 || values.some(Number.isNaN) ? "n/a" : `${percentile(values, 0.5).toFixed(0)} / ${percentile(values, 0.99).toFixed(0)}`

/** When the upstream received the submit: the simulator's time in an async job's id, else the attempt's start. */
const upstreamSubmitAt = (task: Arrival["task"]) => {
  const attempt = task.attempts?.[0]
  if (attempt === undefined) return Number.NaN
  const simulated = attempt.upstream_id === null ? null : /^sim_(\d+)_/.exec(attempt.upstream_id)
  return simulated === null ? Date.parse(attempt.started_at) : Number(simulated[1])
}

/** One load round's figures. */
interface Round {
  readonly tasksPerSecond: number
  /** Submits acknowledged per second: from the first submit sent to the last acknowledged. */
  readonly submitsPerSecond: number
  readonly latencies: ReadonlyArray<number>
  readonly serverCpuPerTask: number
  /** With BENCH_THREADS=1: the server's CPU per task by thread (`byThread`), printed under the round's line. */
  readonly threads?: string
}


/**
 * A process's CPU per task by thread since `before`: the main thread first, then the others
 * that worked (the SQLite store's worker, libuv's pool, V8's helpers), each named by its
 * offset from the process id.
 */
const byThread = (pid: number, before: ReadonlyMap<number, number>, tasks: number) =>
  [...threadCpuMillisOf(pid)].map(([tid, ms]) => [tid, ms - (before.get(tid) ?? 0)] as const)
    .filter(([tid, ms]) => tid === pid || ms >= tasks * 0.01)
    .sort((a, b) => (a[0] === pid ? -1 : b[0] === pid ? 1 : b[1] - a[1]))
    .map(([tid, ms]) => `${(ms / tasks).toFixed(2)} (+${tid - pid})`).join(", ")
/**
 * One load round on one side: `closed`, `clients` clients each submitting its next task when
 * its last one's callback arrived; `burst`, every task submitted at once (the agent holds
 * them to `clients` connections), then every callback awaited.
 */
const measureRound = async (
  side: {
    readonly submit: (i: number) => Promise<string>
    readonly ended: (taskId: string) => Promise<Arrival>
    /** CPU milliseconds the side's server processes have used so far. */
    readonly cpu: () => number
    /** With BENCH_THREADS=1: the server's pid, whose threads' CPU is printed per round. */
    readonly pid?: number
  },
  mode: "closed" | "burst",
  tasks: number
): Promise<Round> => {
  const latencies: Array<number> = []
  let next = 0
  let lastAck = 0
  const serverCpu = side.cpu()
  const threadsBefore = side.pid === undefined ? undefined : threadCpuMillisOf(side.pid)
  const started = Date.now()
  const one = async (i: number) => {
    const sent = Date.now()
    const taskId = await side.submit(i)
    lastAck = Date.now()
    return async () => latencies.push((await side.ended(taskId)).at - sent)
  }
  if (mode === "closed") {
    await Promise.all(Array.from({ length: clients }, async () => {
      while (next < tasks) await (await one(next++))()
    }))
  } else {
    const waits = await Promise.all(Array.from({ length: tasks }, (_, i) => one(i)))
    await Promise.all(waits.map((wait) => wait()))
  }
  const seconds = (Date.now() - started) / 1000
  return {
    tasksPerSecond: tasks / seconds,
    submitsPerSecond: tasks / ((lastAck - started) / 1000),
    latencies,
    serverCpuPerTask: (side.cpu() - serverCpu) / tasks,
    ...(threadsBefore !== undefined && side.pid !== undefined ? { threads: byThread(side.pid, threadsBefore, tasks) } : {})
  }
}

/** Both servers of one store and model, the same clients and receiver, rounds alternating A B A B. */
const run = async (store: string, model: ModelName, urls: Record<SideName, { url: string; dir: string }>) => {
  const hooks = await receiver()
  const servers = {
    mediagate: await startServer("mediagate", urls.mediagate.url, urls.mediagate.dir, `${store}-${model}`.toLowerCase()),
    bare: await startServer("bare", urls.bare.url, urls.bare.dir, `${store}-${model}-bare`.toLowerCase())
  }
  const sides = ["mediagate", "bare"] as const
  const submits = { mediagate: submitter(servers.mediagate.port, hooks.url, model), bare: submitter(servers.bare.port, hooks.url, model) }
  const ended = async (taskId: string) => {
    const arrival = await hooks.callback(taskId)
    if (arrival.task.status !== "SUCCESS") throw new Error(`task ${taskId} ended ${arrival.task.status}`)
    return arrival
  }
  try {
    // Warm up: the first requests compile code paths and fill the simulator's file cache.
    for (const side of sides) for (let i = 0; i < warmupTasks; i++) await ended(await submits[side](i))
    // Idle: one task at a time, the sides taking turns task by task.
    const idle = { mediagate: { toUpstream: [] as Array<number>, toSuccess: [] as Array<number>, toCallback: [] as Array<number>, total: [] as Array<number> }, bare: { total: [] as Array<number> } }
    const idleThreads = { mediagate: threadCpuMillisOf(servers.mediagate.pid), bare: threadCpuMillisOf(servers.bare.pid) }
    for (let i = 0; i < idleTasks; i++) {
      for (const side of sides) {
        const sent = Date.now()
        const { at, task } = await ended(await submits[side](i))
        idle[side].total.push(at - sent)
        if (side === "mediagate") {
          const success = Date.parse(task.updated_at)
          idle.mediagate.toUpstream.push(upstreamSubmitAt(task) - sent)
          idle.mediagate.toSuccess.push(success - sent)
          idle.mediagate.toCallback.push(at - success)
        }
      }
    }
    const idleRow = `| ${store} | ${models[model].id} | ${figure(idle.mediagate.total)} | ${figure(idle.bare.total)} | ${figure(idle.mediagate.toUpstream)} | ${
      figure(idle.mediagate.toSuccess)
    } | ${figure(idle.mediagate.toCallback)} |`
    console.log(idleRow)
    if (env("BENCH_THREADS", "0") === "1" && idleTasks > 0) {
      for (const side of sides) {
        console.log(`    ${side}, idle CPU ms/task by thread (main first): ${byThread(servers[side].pid, idleThreads[side], idleTasks)}`)
      }
    }

    const loadRound = (side: SideName, mode: "closed" | "burst", tasks: number) =>
      measureRound({
        submit: submits[side],
        ended,
        cpu: () => cpuMillisOf(servers[side].pid),
        ...(env("BENCH_THREADS", "0") === "1" ? { pid: servers[side].pid } : {})
      }, mode, tasks)
    const load: Array<string> = []
    for (const tasks of loads) {
      for (const mode of modes) {
        const results: Record<SideName, Array<Round>> = { mediagate: [], bare: [] }
        for (let round = 0; round < rounds; round++) {
          for (const side of sides) {
            const result = await loadRound(side, mode, tasks)
            results[side].push(result)
            console.log(`  ${store} ${model} ${mode} ${tasks} round ${round + 1} ${side}: ${result.tasksPerSecond.toFixed(0)} tasks/s, ${result.submitsPerSecond.toFixed(0)} submits/s`)
            if (result.threads !== undefined) console.log(`    CPU ms/task by thread (main first): ${result.threads}`)
          }
        }
        // The better round of each side, by tasks/s.
        const best = (side: SideName) => results[side].reduce((a, b) => (b.tasksPerSecond > a.tasksPerSecond ? b : a))
        const m = best("mediagate")
        const b = best("bare")
        const row = [
          store,
          models[model].id,
          tasks,
          mode,
          `${m.tasksPerSecond.toFixed(0)} / ${b.tasksPerSecond.toFixed(0)}`,
          `**${(m.tasksPerSecond / b.tasksPerSecond).toFixed(3)}**`,
          ...(mode === "burst"
            ? [`${m.submitsPerSecond.toFixed(0)} / ${b.submitsPerSecond.toFixed(0)}`, `**${(m.submitsPerSecond / b.submitsPerSecond).toFixed(3)}**`]
            : ["-", "-"]),
          figure(m.latencies),
          figure(b.latencies),
          `${m.serverCpuPerTask.toFixed(2)} / ${b.serverCpuPerTask.toFixed(2)}`
        ]
        load.push(`| ${row.join(" | ")} |`)
        console.log(load[load.length - 1])
      }
    }
    return { idle: idleRow, load }
  } finally {
    await servers.mediagate.stop()
    await servers.bare.stop()
    hooks.close()
  }
}

// ---------------------------------------------------------------------------------------
// Several nodes (`BENCH_NODES=1,2,3`): N standalone servers on one PostgreSQL database,
// submits round-robin over them, against one bare server in the same run.

/** What the nodes share besides the database: a media folder, or an S3 server (`BENCH_NODES_MEDIA=s3`). */
const nodesMedia = env("BENCH_NODES_MEDIA", "dir") as "dir" | "s3"

/** N servers on one database and the bare yardstick, the same clients and receiver, rounds alternating. */
const runNodes = async (count: number, model: ModelName, url: string, dir: string, bareUrl: string, bareDir: string, mediaEnv: Record<string, string>) => {
  const hooks = await receiver()
  const nodes: Array<Server> = []
  // One after another: the first migrates the database.
  for (let i = 0; i < count; i++) nodes.push(await startServer("mediagate", url, dir, `nodes-${count}-${i}`, mediaEnv))
  console.log(`  ${count} node(s) started`)
  const bare = await startServer("bare", bareUrl, bareDir, `nodes-${count}-bare`)
  const nodeSubmits = nodes.map((node) => submitter(node.port, hooks.url, model))
  const submits: Record<SideName, (i: number) => Promise<string>> = {
    mediagate: (i) => nodeSubmits[i % nodeSubmits.length]!(i),
    bare: submitter(bare.port, hooks.url, model)
  }
  const pids: Record<SideName, ReadonlyArray<number>> = { mediagate: nodes.map((node) => node.pid), bare: [bare.pid] }
  const cpuOf = (side: SideName) => pids[side].reduce((sum, pid) => sum + cpuMillisOf(pid), 0)
  const ended = async (taskId: string) => {
    const arrival = await hooks.callback(taskId)
    if (arrival.task.status !== "SUCCESS") throw new Error(`task ${taskId} ended ${arrival.task.status}`)
    return arrival
  }
  try {
    for (const side of ["mediagate", "bare"] as const) for (let i = 0; i < 20 * count; i++) await ended(await submits[side](i))
    const rows: Array<string> = []
    for (const tasks of loads) {
      for (const mode of modes) {
        const results: Record<SideName, Array<Round>> = { mediagate: [], bare: [] }
        for (let round = 0; round < rounds; round++) {
          for (const side of ["mediagate", "bare"] as const) {
            const result = await measureRound({ submit: submits[side], ended, cpu: () => cpuOf(side) }, mode, tasks)
            results[side].push(result)
            console.log(`  ${count} node(s) ${model} ${mode} ${tasks} round ${round + 1} ${side}: ${result.tasksPerSecond.toFixed(0)} tasks/s`)
          }
        }
        const best = (side: SideName) => results[side].reduce((a, b) => (b.tasksPerSecond > a.tasksPerSecond ? b : a))
        const m = best("mediagate")
        const b = best("bare")
        const row = `| ${count} | ${models[model].id} | ${tasks} | ${mode} | ${m.tasksPerSecond.toFixed(0)} / ${b.tasksPerSecond.toFixed(0)} | **${
          (m.tasksPerSecond / b.tasksPerSecond).toFixed(3)
        }** | ${figure(m.latencies)} | ${figure(b.latencies)} | ${m.serverCpuPerTask.toFixed(2)} / ${b.serverCpuPerTask.toFixed(2)} |`
        rows.push(row)
        console.log(row)
      }
    }
    return rows
  } finally {
    for (const node of nodes) await node.stop()
    await bare.stop()
    hooks.close()
  }
}

const mainNodes = async (counts: ReadonlyArray<number>) => {
  if (pgUrl === undefined) throw new Error("BENCH_NODES needs PostgreSQL: set MEDIAGATE_TEST_PG_URL or pass --pg <url>")
  const model = (list("BENCH_MODELS", "sync")[0] ?? "sync") as ModelName
  const rows: Array<string> = []
  for (const count of counts) {
    rows.push(
      ...(await withDatabase("PostgreSQL", pgUrl, `e2e_nodes_${count}`, (url, dir) =>
        withDatabase("PostgreSQL", pgUrl, `e2e_nodes_${count}_bare`, async (bareUrl, bareDir) => {
          if (nodesMedia === "dir") return runNodes(count, model, url, dir, bareUrl, bareDir, {})
          const s3 = await s3Server(dir)
          try {
            return await runNodes(count, model, url, dir, bareUrl, bareDir, s3.env)
          } finally {
            await s3.close()
          }
        })))
    )
  }
  if (env("BENCH_WRITE", "1") !== "0") {
    writeSection([
      "<!-- bench:e2e-nodes:start -->",
      "## Several nodes on one PostgreSQL database",
      "",
      `Command: \`BENCH_NODES=${counts.join(",")} BENCH_TASKS=${loads.join(",")} npm run bench:e2e\` with \`MEDIAGATE_TEST_PG_URL\` set${
        nodesMedia === "s3" ? " and `BENCH_NODES_MEDIA=s3`" : ""
      }. N`,
      "standalone servers on one fresh PostgreSQL database, submits sent round-robin over them",
      `(${clients} connections in all), against one bare server (\`bench/bare/server.ts\`) on a database`,
      "of its own, alternating rounds (mediagate, bare, mediagate, bare), the better round of each.",
      nodesMedia === "s3"
        ? "Result files go to one S3 server (s3rver, in the benchmark's process)."
        : "The nodes share one media folder (the benchmark measures the database's coordination, not the object store).",
      "Every task has a `callBackUrl`; tasks/s from the first submit to the last callback; CPU is",
      "the sum over the nodes per task. The machine has 2 cores, which the nodes, PostgreSQL and",
      "the clients share: more nodes cannot be faster here, and the figures show what coordinating",
      "them costs, not how they scale.",
      "",
      "| nodes | model | tasks | load | tasks/s (mediagate / bare) | ratio | submit -> callback ms, mediagate | bare | server CPU ms/task (mediagate, all nodes / bare) |",
      "|---|---|---|---|---|---|---|---|---|",
      ...rows,
      "<!-- bench:e2e-nodes:end -->"
    ].join("\n"))
  }
  process.exit(0)
}

/** An S3 server on loopback for the nodes' results (BENCH_NODES_MEDIA=s3), and the variables that point a node at it. */
const s3Server = async (dir: string): Promise<{ readonly env: Record<string, string>; readonly close: () => Promise<void> }> => {
  const { default: S3rver } = await import("s3rver")
  const server = new S3rver({ address: "127.0.0.1", port: 0, silent: true, directory: join(dir, "s3"), resetOnClose: true, configureBuckets: [{ name: "media", configs: [] }] })
  const { port } = await server.run()
  return {
    env: {
      MEDIAGATE_MEDIA_URL: "s3://media/results",
      AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${port}`,
      AWS_ACCESS_KEY_ID: "S3RVER",
      AWS_SECRET_ACCESS_KEY: "S3RVER",
      AWS_REGION: "us-east-1"
    },
    close: () => server.close()
  }
}

const main = async () => {
  const results: Array<{ idle: string; load: Array<string> }> = []
  const stores = (pgUrl === undefined ? ["SQLite"] : ["SQLite", "PostgreSQL"]).filter((store) =>
    list("BENCH_STORES", "SQLite,PostgreSQL").includes(store)
  ) as Array<"SQLite" | "PostgreSQL">
  for (const store of stores) {
    for (const model of list("BENCH_MODELS", "sync,async") as Array<ModelName>) {
      results.push(
        await withDatabase(store, pgUrl, `e2e_${model}`, (url, dir) =>
          withDatabase(store, pgUrl, `e2e_${model}_bare`, (bareUrl, bareDir) => run(store, model, { mediagate: { url, dir }, bare: { url: bareUrl, dir: bareDir } })))
      )
    }
  }
  if (env("BENCH_WRITE", "1") !== "0") write(results)
  process.exit(0)
}

const write = (results: ReadonlyArray<{ idle: string; load: ReadonlyArray<string> }>) => {
  const section = [
    "<!-- bench:e2e:start -->",
    "## End to end: mediagate against the bare yardstick",
    "",
    "Command: `npm run bench:e2e` (PostgreSQL too when `MEDIAGATE_TEST_PG_URL` is set). Two",
    "child processes per store and model, each with a database of its own: the standalone",
    "server through tsx with its `npm start`'s heap flags (instant simulator; CPU is counted per round, after the start), and the bare yardstick",
    "(`bench/bare/server.ts`, no Effect; what it does and skips is in its header). This process",
    "is the clients and the one loopback callback receiver both deliver to. Every task has a",
    "`callBackUrl`; alpha-image-2 is one sync upstream call, beta-imagine an async job (submit,",
    "then poll); the bare side treats both alike (an instant upstream).",
    "",
    `Idle, one task at a time, the sides taking turns (${idleTasks} tasks each after ${warmupTasks} to warm up),`,
    "milliseconds p50 / p99. mediagate's submit -> callback is split into submit -> upstream",
    "submit (the simulator's own time for beta-imagine, the attempt's start for alpha-image-2),",
    "submit -> SUCCESS and SUCCESS -> callback:",
    "",
    "| store | model | submit -> callback, mediagate | submit -> callback, bare | mediagate: submit -> upstream | submit -> SUCCESS | SUCCESS -> callback |",
    "|---|---|---|---|---|---|---|",
    ...results.map((result) => result.idle),
    "",
    `Under load, ${clients} connections: \`closed\`, ${clients} clients each submitting its next task when its`,
    "last one's callback arrived; `burst`, every task submitted at once, then every callback",
    `awaited. ${rounds} rounds per side, alternating (mediagate, bare, mediagate, bare); the better round`,
    "of each side. Tasks/s from the first submit to the last callback; in `burst` also submits",
    "acknowledged per second (first submit sent to last acknowledged). Ratios are mediagate /",
    "bare. Latency is submit -> callback, p50 / p99 ms; CPU is the server process's per task.",
    "",
    "| store | model | tasks | load | tasks/s (mediagate / bare) | ratio | submits/s (mediagate / bare) | ratio | submit -> callback ms, mediagate | bare | server CPU ms/task (mediagate / bare) |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
    ...results.flatMap((result) => result.load),
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
} else if (process.env["BENCH_NODES"] !== undefined) {
  void mainNodes(list("BENCH_NODES", "1,2,3").map(Number))
} else {
  void main()
}
