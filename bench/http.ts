/**
 * `npm run bench:http`: mediagate's HTTP path (query a task by id, submit) beside the bare
 * yardstick, in the same run, with autocannon: 50 connections, `BENCH_SECONDS` (default 5)
 * per round, `BENCH_ROUNDS` (default 2) rounds per side alternating A B A B; the better round
 * of each side.
 *
 * Per store (SQLite, a file in a temporary folder; PostgreSQL, a fresh database, when
 * MEDIAGATE_TEST_PG_URL is set or `--pg <url>` is given), two child processes with a database
 * each: the standalone server (`examples/standalone-server/src/main.ts`, instant simulator,
 * rate limit off) and `bench/bare/server.ts` (node:http and the database driver, no Effect;
 * its header says what it does). On SQLite a third, the platform floor: this file run as
 * `platform`, the bare yardstick's request work (`bareWork`) served through
 * `@effect/platform`'s HttpServer, one Effect per request and no router, the least any server
 * on that stack pays.
 *
 * Query: each side answers for a task of its own that has reached SUCCESS (mediagate and bare
 * take a submitted one there; the floor has one stored), the engine idle. Submit: the same
 * body POSTed to each; mediagate's engine and bare's worker take the tasks to SUCCESS as they
 * come. Before each round every server of the store is left to go quiet (Linux /proc), so no
 * side's round runs beside another's backlog; a round ends with each connection's request in
 * flight answered, not cut (`load`). Prints req/s, p50 and p99 (ms), the ratios
 * mediagate / bare and floor / SQLite bare, and errors (non-2xx included), and writes them
 * into docs/benchmarks.md unless `BENCH_WRITE=0`.
 *
 * Each round also prints each server's CPU per answer (µs, user + system from /proc over the
 * round): for the query the request path alone; for submit the acknowledgement and whatever
 * the engine or worker did for the tasks during the round.
 *
 * `BENCH_PROFILE=<dir>`: mediagate writes a CPU profile into `<dir>/http-<store>` when it
 * stops; `BENCH_ONLY=query` skips the submit rounds; `BENCH_SERVER_ROOT=<checkout>` runs
 * that checkout's standalone server as mediagate (an older commit, for A/B).
 */
import { HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { pgUrl as envPgUrl } from "@mediagate/store-sql/testing"
import autocannon from "autocannon"
import Database from "better-sqlite3"
import { Effect, Layer } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { createHash, randomUUID } from "node:crypto"
import * as Http from "node:http"
import { join } from "node:path"
import { performance } from "node:perf_hooks"
import { cpuMillisOf, listeningUrl, startHeapFlags, withDatabase } from "../scripts/bench-support.js"
import { writeSection } from "../scripts/benchmarks-doc.js"

const env = (name: string, fallback: string) => process.env[name] ?? fallback
const key = "bench-http-key-0123456789abcdef"
const connections = 50
const seconds = Number(env("BENCH_SECONDS", "5"))
const rounds = Number(env("BENCH_ROUNDS", "2"))
// An empty MEDIAGATE_TEST_PG_URL counts as unset.
const pgUrl = (process.argv.includes("--pg") ? process.argv[process.argv.indexOf("--pg") + 1] : envPgUrl) || undefined
const models = ["alpha-image-2/text-to-image", "beta-imagine/text-to-image-standard"]
const submitBody = JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse", ratio: "1:1" } })
/** The floor's stored task, in SUCCESS. */
const floorTask = "00000000-0000-7000-8000-000000000001"

/**
 * The bare yardstick's request work on SQLite (bench/bare/server.ts), synchronous: the key's
 * account by its SHA-256, kept 5 s; then the task by id and owner in the same wire shape, or
 * the credit hold and the PENDING row in one transaction, or the model list; the
 * `{code, msg, data}` envelope. No worker: its submitted tasks stay PENDING.
 */
const bareWork = (file: string, apiKey: string) => {
  const price = 20_000
  const db = new Database(file)
  db.pragma("journal_mode = WAL")
  db.pragma("busy_timeout = 5000")
  db.exec(`CREATE TABLE IF NOT EXISTS bare_accounts (id TEXT PRIMARY KEY, key_hash TEXT NOT NULL UNIQUE, balance BIGINT NOT NULL);
    CREATE TABLE IF NOT EXISTS bare_tasks (id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, model TEXT NOT NULL, input TEXT NOT NULL, status TEXT NOT NULL,
      result TEXT, due_at BIGINT NOT NULL, lease_until BIGINT, callback_url TEXT, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL);
    CREATE INDEX IF NOT EXISTS bare_tasks_due ON bare_tasks (status, due_at);
    CREATE INDEX IF NOT EXISTS bare_tasks_lease ON bare_tasks (status, lease_until)`)
  const sha256 = (value: string) => createHash("sha256").update(value, "utf8").digest("hex")
  db.prepare("INSERT OR IGNORE INTO bare_accounts (id, key_hash, balance) VALUES (?, ?, ?)").run("acct_bare", sha256(apiKey), 1e15)
  const insert = db.prepare(`INSERT OR IGNORE INTO bare_tasks (id, owner_id, model, input, status, result, due_at, callback_url, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)`)
  const now = Date.now()
  insert.run(floorTask, "acct_bare", models[0], JSON.stringify({ prompt: "p", ratio: "1:1" }), "SUCCESS",
    JSON.stringify({ type: "image", urls: [`http://127.0.0.1/media/${floorTask}.png`] }), now, now, now)
  const account = db.prepare<[string], { id: string }>("SELECT id FROM bare_accounts WHERE key_hash = ?")
  const select = db.prepare<[string, string], Record<string, any>>("SELECT * FROM bare_tasks WHERE id = ? AND owner_id = ?")
  const hold = db.prepare("UPDATE bare_accounts SET balance = balance - ? WHERE id = ? AND balance >= ? RETURNING id")
  const submit = db.transaction((owner: string, model: string, input: string, at: number) => {
    if (hold.get(price, owner, price) === undefined) return undefined
    const id = randomUUID()
    insert.run(id, owner, model, input, "PENDING", null, at, at, at)
    return id
  })
  const accounts = new Map<string, { id: string; until: number }>()
  const authenticate = (header: string | undefined) => {
    const bearer = header === undefined ? undefined : /^Bearer[ \t]+([^\s]+)[ \t]*$/i.exec(header)?.[1]
    if (bearer === undefined) return undefined
    const hit = accounts.get(bearer)
    if (hit !== undefined && hit.until > Date.now()) return hit.id
    const row = account.get(sha256(bearer))
    if (row !== undefined) accounts.set(bearer, { id: row.id, until: Date.now() + 5000 })
    return row?.id
  }
  const iso = (millis: number) => new Date(millis).toISOString()
  const answer = (code: number, msg: string, data: unknown = null) => ({ status: code === 0 ? 200 : code, text: JSON.stringify({ code, msg, data }) })
  /** Whether the request has a body to read first. */
  const isSubmit = (method: string, url: string) => method === "POST" && url === "/api/v1/task/submit"
  const handle = (method: string, url: string, authorization: string | undefined, body: string) => {
    const owner = authenticate(authorization)
    if (owner === undefined) return answer(401, "unauthorized")
    if (isSubmit(method, url)) {
      let parsed: any
      try {
        parsed = JSON.parse(body)
      } catch {
        return answer(400, "the body is not valid JSON")
      }
      if (!models.includes(parsed?.model) || typeof parsed.input?.prompt !== "string") return answer(400, "model and input.prompt are required")
      const id = submit(owner, parsed.model, JSON.stringify(parsed.input), Date.now())
      return id === undefined ? answer(402, "insufficient credits") : answer(0, "ok", { taskId: id })
    }
    if (method === "GET" && url.startsWith("/api/v1/task/")) {
      const task = select.get(decodeURIComponent(url.slice("/api/v1/task/".length)), owner)
      if (task === undefined) return answer(404, "task not found")
      return answer(0, "ok", {
        taskId: task["id"],
        status: task["status"],
        input: { model: task["model"], ...JSON.parse(task["input"]) },
        result: task["result"] === null ? null : JSON.parse(task["result"]),
        failure_reason: null,
        created_at: iso(task["created_at"]),
        updated_at: iso(task["updated_at"]),
        adjustments: [],
        error: null,
        attempts: [],
        price_micro_usd: price
      })
    }
    if (method === "GET" && url === "/api/v1/models") return answer(0, "ok", models)
    return answer(404, `not found: ${url}`)
  }
  return { handle, isSubmit }
}

/**
 * The platform floor (`bench/http.ts platform`, the same environment variables as the
 * servers, `MEDIAGATE_DATABASE_URL` a `sqlite:` one): `bareWork` served through
 * `@effect/platform`'s HttpServer on `node:http`, one Effect per request and no router.
 */
const platformServer = () => {
  const { handle, isSubmit } = bareWork(env("MEDIAGATE_DATABASE_URL", "").replace(/^sqlite:/, ""), env("MEDIAGATE_API_KEY", ""))
  const app = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const body = isSubmit(request.method, request.url) ? yield* Effect.orDie(request.text) : ""
    const { status, text } = handle(request.method, request.url, request.headers["authorization"], body)
    return HttpServerResponse.text(text, { status, contentType: "application/json" })
  })
  const listening = NodeHttpServer.layer(Http.createServer, { port: Number(env("MEDIAGATE_PORT", "8080")), host: env("MEDIAGATE_HOST", "127.0.0.1") })
  const served = HttpServer.serve(app).pipe(
    // Like bench/bare, once it serves: `ready on <url>`, with the port the system chose for MEDIAGATE_PORT=0.
    Layer.tap(() => HttpServer.addressFormattedWith((url) => Effect.sync(() => console.log(`ready on ${url}`)))),
    Layer.provide(listening)
  )
  NodeRuntime.runMain(Layer.launch(served))
}

// ---------------------------------------------------------------------------------------
// The benchmark.

type SideName = "mediagate" | "bare" | "platform"
const entries: Record<SideName, ReadonlyArray<string>> = {
  mediagate: ["examples/standalone-server/src/main.ts"],
  bare: ["bench/bare/server.ts"],
  platform: ["bench/http.ts", "platform"]
}

const sleep = (millis: number) => new Promise((resolve) => setTimeout(resolve, millis))

interface Server {
  readonly side: SideName
  readonly base: string
  readonly pid: number
  readonly stop: () => Promise<void>
}

const startServer = async (side: SideName, databaseUrl: string, dir: string, store: string): Promise<Server> => {
  const profileDir = process.env["BENCH_PROFILE"]
  // A folder per store: tsx's loader thread writes a profile of its own beside the main thread's (the larger file).
  const profile = side !== "mediagate" || profileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${join(profileDir, `http-${store.toLowerCase()}`)}`]
  const root = side === "mediagate" ? process.env["BENCH_SERVER_ROOT"] : undefined
  // Mediagate's server with the heap flags of its checkout's `npm start`.
  const heap = side === "mediagate" ? startHeapFlags(root ?? ".") : []
  const child: ChildProcess = spawn(process.execPath, [...heap, ...profile, "--conditions=@mediagate/source", "--import", "tsx", ...entries[side]], {
    ...(root === undefined ? {} : { cwd: root }),
    env: {
      ...process.env,
      // A port the system chooses; the server prints it.
      MEDIAGATE_PORT: "0",
      MEDIAGATE_HOST: "127.0.0.1",
      MEDIAGATE_API_KEY: key,
      MEDIAGATE_DATABASE_URL: databaseUrl,
      MEDIAGATE_MEDIA_DIR: join(dir, "media"),
      MEDIAGATE_SIMULATOR_PROFILE: "instant",
      // One key at thousands of requests a second: the benchmark measures the path, not the limit.
      MEDIAGATE_RATE_LIMIT: "off",
      // Enough credit that no task of a run fails INSUFFICIENT_POINTS.
      MEDIAGATE_STARTING_CREDITS: "1000000"
    },
    stdio: ["ignore", "pipe", "inherit"]
  })
  const base = await listeningUrl(child)
  for (const deadline = Date.now() + 60_000;;) {
    // With a timeout: mediagate on PostgreSQL takes connections while it starts, and has left a
    // request of that moment unanswered (fetch's own limit is 300 s).
    const up = await fetch(`${base}/api/v1/models`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(1000) })
      .then((r) => r.ok, () => false)
    if (up) break
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the ${side} server did not start`)
    await sleep(100)
  }
  const stop = () => new Promise<void>((resolve) => (child.once("exit", () => resolve()), child.kill("SIGTERM")))
  return { side, base, pid: child.pid!, stop }
}

const request = async (url: string, init: RequestInit = {}) => {
  const response = await fetch(url, { ...init, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" } })
  const answer = await response.json() as { code: number; data: any }
  if (answer.code !== 0) throw new Error(`${url}: ${JSON.stringify(answer)}`)
  return answer.data
}

/** A task of the server's own taken to SUCCESS: submitted, then polled every 20 ms (30 s at most). */
const successfulTask = async (server: Server): Promise<string> => {
  const { taskId } = await request(`${server.base}/api/v1/task/submit`, { method: "POST", body: submitBody }) as { taskId: string }
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(20)) {
    const { status } = await request(`${server.base}/api/v1/task/${taskId}`) as { status: string }
    if (status === "SUCCESS") return taskId
    if (status !== "PENDING" && status !== "PROCESSING") throw new Error(`${server.side}: task ${taskId} ended ${status}`)
  }
  throw new Error(`${server.side}: task ${taskId} did not reach SUCCESS in 30 s`)
}

/**
 * Waits until the servers' processes are quiet, each under 10% of a core over 500 ms, for
 * 60 s at most: the engine and the bare worker done with the last round's tasks. Returns at
 * once where /proc is missing.
 */
const quiet = async (servers: ReadonlyArray<Server>) => {
  const started = Date.now()
  for (; Date.now() - started < 60_000;) {
    const before = servers.map((server) => cpuMillisOf(server.pid))
    await sleep(500)
    const busy = servers.some((server, i) => cpuMillisOf(server.pid) - before[i]! > 50)
    if (!busy) return (Date.now() - started) / 1000
  }
  console.log("  (the servers did not go quiet in 60 s; measuring anyway)")
  return (Date.now() - started) / 1000
}

type Figures = {
  readonly rps: number
  readonly p50: number
  readonly p99: number
  readonly errors: number
  /** The server's CPU per answer over the round, µs. */
  readonly cpuMicros: number
}

/**
 * One round on `connections` connections: after `seconds`, each connection closes once its
 * request in flight is answered. autocannon's own end of a duration cuts the requests in
 * flight, and one such cut has left mediagate on PostgreSQL answering nothing more, so the
 * duration here is only a cap, for a server that hangs. Req/s is the answers over the time to
 * the last one; errors are connection errors and timeouts, non-2xx answers, and requests
 * still unanswered at the cap.
 */
const load = async (pid: number, url: string, body?: string): Promise<Figures> => {
  const cpu = cpuMillisOf(pid)
  const started = performance.now()
  let responses = 0
  let last = started
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon({
      url,
      connections,
      duration: 2 * seconds + 10,
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body })
    }, (error, result) => error ? reject(error) : resolve(result))
    // autocannon 8's client sends its next request only while `reqsMade < responseMax`; at 1 it closes instead.
    instance.on("response", (client) => {
      responses++
      last = performance.now()
      if (last - started >= seconds * 1000) (client as unknown as { responseMax: number }).responseMax = 1
    })
  })
  const unanswered = Math.max(0, result.requests.sent - result.requests.total - result.errors)
  const cpuMicros = responses === 0 ? 0 : ((cpuMillisOf(pid) - cpu) * 1000) / responses
  return {
    cpuMicros,
    rps: responses / ((last - started) / 1000),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.non2xx + unanswered
  }
}

type Kind = "query" | "submit"
type Results = Partial<Record<SideName, Record<Kind, Figures | undefined>>>

/** One store's servers, the rounds alternating between them; the better round of each side and request. */
const run = async (store: "SQLite" | "PostgreSQL", databases: Partial<Record<SideName, { url: string; dir: string }>>): Promise<Results> => {
  const servers: Array<Server> = []
  try {
    for (const side of ["mediagate", "bare", "platform"] as const) {
      const database = databases[side]
      if (database !== undefined) servers.push(await startServer(side, database.url, database.dir, store))
    }
    const queried = new Map<Server, string>()
    for (const server of servers) queried.set(server, server.side === "platform" ? floorTask : await successfulTask(server))
    const kinds: Array<Kind> = env("BENCH_ONLY", "") === "query" ? ["query"] : ["query", "submit"]
    const results: Results = {}
    for (const kind of kinds) {
      const all = new Map<Server, Array<Figures>>(servers.map((server) => [server, []]))
      for (let round = 0; round < rounds; round++) {
        for (const server of servers) {
          const waited = await quiet(servers)
          const figures = kind === "query"
            ? await load(server.pid, `${server.base}/api/v1/task/${queried.get(server)}`)
            : await load(server.pid, `${server.base}/api/v1/task/submit`, submitBody)
          all.get(server)!.push(figures)
          console.log(`  ${store} ${kind} round ${round + 1} ${server.side}: ${figures.rps.toFixed(0)} req/s, p50 ${figures.p50} / p99 ${figures.p99} ms, ${figures.cpuMicros.toFixed(0)} µs CPU/answer, ${figures.errors} errors (after ${waited.toFixed(1)} s waiting for quiet)`)
        }
      }
      for (const [server, figures] of all) {
        // The better round by req/s; its errors are summed over the rounds, so none hides in the worse one.
        const best = figures.reduce((a, b) => (b.rps > a.rps ? b : a))
        const errors = figures.reduce((sum, f) => sum + f.errors, 0)
        results[server.side] = { ...(results[server.side] ?? { query: undefined, submit: undefined }), [kind]: { ...best, errors } }
      }
    }
    return results
  } finally {
    for (const server of servers) await server.stop()
  }
}

const main = async () => {
  const stores: Array<"SQLite" | "PostgreSQL"> = pgUrl === undefined ? ["SQLite"] : ["SQLite", "PostgreSQL"]
  const results = new Map<"SQLite" | "PostgreSQL", Results>()
  for (const store of stores) {
    const result = await withDatabase(store, pgUrl, "http_mediagate", (url, dir) =>
      withDatabase(store, pgUrl, "http_bare", (bareUrl, bareDir) => {
        const databases = { mediagate: { url, dir }, bare: { url: bareUrl, dir: bareDir } }
        if (store !== "SQLite") return run(store, databases)
        // The floor is about the HTTP stack: SQLite only, a file beside bare's.
        return run(store, { ...databases, platform: { url: `sqlite:${join(bareDir, "platform.db")}`, dir: join(bareDir, "platform") } })
      }))
    results.set(store, result)
  }

  const cell = (f: Figures) => `${f.rps.toFixed(0)} | ${f.p50} / ${f.p99}`
  const kinds = (["query", "submit"] as const).filter((kind) => results.get("SQLite")?.mediagate?.[kind] !== undefined)
  const storeTable = [
    "| store | request | mediagate req/s | p50 / p99 ms | bare req/s | p50 / p99 ms | mediagate / bare | errors (mediagate / bare) |",
    "|---|---|---|---|---|---|---|---|",
    ...[...results].flatMap(([store, result]) =>
      kinds.map((kind) => {
        const m = result.mediagate![kind]!
        const b = result.bare![kind]!
        return `| ${store} | ${kind} | ${cell(m)} | ${cell(b)} | **${(m.rps / b.rps).toFixed(3)}** | ${m.errors} / ${b.errors} |`
      })
    )
  ].join("\n")
  const sqlite = results.get("SQLite")!
  const floorTable = [
    "| request | platform req/s | p50 / p99 ms | platform / bare (SQLite) | errors |",
    "|---|---|---|---|---|",
    ...kinds.map((kind) => {
      const p = sqlite.platform![kind]!
      return `| ${kind} | ${cell(p)} | **${(p.rps / sqlite.bare![kind]!.rps).toFixed(3)}** | ${p.errors} |`
    })
  ].join("\n")
  console.log(`\n${storeTable}\n\n${floorTable}`)

  if (env("BENCH_WRITE", "1") !== "0") {
    writeSection([
      "<!-- bench:http:start -->",
      "## HTTP path: mediagate beside the bare yardstick",
      "",
      "Command: `npm run bench:http` (PostgreSQL too when `MEDIAGATE_TEST_PG_URL` is set). Per",
      "store, two child processes with a database each: the standalone server (its `npm start`'s heap flags, instant simulator,",
      "rate limit off) and the bare yardstick (`bench/bare/server.ts`, no Effect; what it does and",
      "skips is in its header). On SQLite a third, the platform floor: the bare yardstick's request",
      "work (account lookup kept 5 s, the task by id and owner, or the credit hold and the task row",
      "in one transaction; no worker) served through `@effect/platform`'s HttpServer, one Effect per",
      "request and no router (`bench/http.ts platform`): the least a server on that stack pays.",
      "",
      `autocannon, ${connections} connections, ${seconds} s rounds (\`BENCH_SECONDS\`), ${rounds} rounds per side`,
      "(`BENCH_ROUNDS`) alternating (mediagate, bare, platform, mediagate, ...), each after every",
      "server of the store has gone quiet; at its end each connection's request in flight is",
      "answered, not cut. Req/s is the answers over the time to the last one; the better round of",
      "each side by req/s is kept, with the errors (non-2xx included) of all its rounds. Query:",
      "each side's own task, taken to SUCCESS first, the engine idle. Submit: the same body to",
      "each; mediagate's engine and bare's worker take the tasks to SUCCESS meanwhile (the floor's",
      "stay PENDING). Latency p50 / p99 in ms; ratios are req/s over bare's on the same store.",
      "",
      storeTable,
      "",
      floorTable,
      "<!-- bench:http:end -->"
    ].join("\n"))
  }
  process.exit(0)
}

if (process.argv[2] === "platform") platformServer()
else void main()
