/**
 * `npm run bench:http`: mediagate's HTTP path beside a bare `node:http` + better-sqlite3
 * server doing the same work at the least (the key's account by its SHA-256, then the task
 * by id and owner, or one insert, and the same `{code, msg, data}` envelope), in the same
 * run, with autocannon: 50 connections, rounds of 5 s alternating between the servers, twice.
 * mediagate is the standalone server in a child process (SQLite, instant simulator, the
 * engine idle for the query rounds); the bare server is this file run as `bare`, and the
 * same work served through `@effect/platform` is this file run as `platform`. Prints req/s,
 * p50 and p99 (ms) and the ratios, and writes them into docs/benchmarks.md.
 * `BENCH_PROFILE=<dir>`: mediagate writes a CPU profile there when it stops;
 * `BENCH_ONLY=query` skips the submit rounds.
 */
import { HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import autocannon from "autocannon"
import Database from "better-sqlite3"
import { type ChildProcess, spawn } from "node:child_process"
import { createHash, randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { writeSection } from "../scripts/benchmarks-doc.js"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer } from "effect"

const key = "bench-http-key-0123456789abcdef"
const connections = 50
const seconds = Number(process.env["BENCH_SECONDS"] ?? 5)

/**
 * The work of the bare servers: the key's account by its SHA-256, then the task by id and
 * owner (query) or one insert (submit), and the `{code, msg, data}` envelope.
 */
const bareWork = (file: string, key: string) => {
  const db = new Database(file)
  db.pragma("journal_mode = WAL")
  db.exec(`CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, key_hash TEXT NOT NULL UNIQUE);
    CREATE TABLE IF NOT EXISTS tasks (id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, status TEXT NOT NULL, input TEXT NOT NULL,
      result TEXT, failure_reason TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL)`)
  const hash = (value: string) => createHash("sha256").update(value, "utf8").digest("hex")
  db.prepare("INSERT OR IGNORE INTO accounts (id, key_hash) VALUES (?, ?)").run("acct_bare", hash(key))
  const account = db.prepare<[string], { id: string }>("SELECT id FROM accounts WHERE key_hash = ?")
  const select = db.prepare<[string, string], Record<string, string | number | null>>("SELECT * FROM tasks WHERE id = ? AND owner_id = ?")
  const insert = db.prepare("INSERT INTO tasks (id, owner_id, status, input, result, failure_reason, created_at, updated_at) VALUES (?, ?, 'PENDING', ?, NULL, NULL, ?, ?)")
  // The task queried by the benchmark.
  db.prepare("INSERT OR IGNORE INTO tasks (id, owner_id, status, input, result, failure_reason, created_at, updated_at) VALUES (?, ?, 'PENDING', ?, NULL, NULL, ?, ?)")
    .run("00000000-0000-7000-8000-000000000001", "acct_bare", JSON.stringify({ model: "alpha-image-2/text-to-image", prompt: "p" }), Date.now(), Date.now())

  const answer = (status: number, body: unknown) => ({ status, text: JSON.stringify(body) })
  /** Whether the request has a body to read first. */
  const isSubmit = (method: string, url: string) => method === "POST" && url === "/api/v1/task/submit"
  const handle = (method: string, url: string, authorization: string | undefined, body: string) => {
    const auth = authorization ?? ""
    const owner = auth.startsWith("Bearer ") ? account.get(hash(auth.slice(7))) : undefined
    if (owner === undefined) return answer(401, { code: 401, msg: "unauthorized", data: null })
    if (method === "GET" && url.startsWith("/api/v1/task/")) {
      const row = select.get(url.slice("/api/v1/task/".length), owner.id)
      if (row === undefined) return answer(404, { code: 404, msg: "task not found", data: null })
      return answer(200, {
        code: 0,
        msg: "ok",
        data: {
          taskId: row["id"],
          status: row["status"],
          input: JSON.parse(String(row["input"])),
          result: row["result"] === null ? null : JSON.parse(String(row["result"])),
          failure_reason: row["failure_reason"],
          created_at: new Date(Number(row["created_at"])).toISOString(),
          updated_at: new Date(Number(row["updated_at"])).toISOString()
        }
      })
    }
    if (isSubmit(method, url)) {
      let parsed: { model?: unknown; input?: unknown }
      try {
        parsed = JSON.parse(body)
      } catch {
        return answer(400, { code: 400, msg: "invalid JSON", data: null })
      }
      const id = randomUUID()
      const now = Date.now()
      insert.run(id, owner.id, JSON.stringify({ ...(parsed.input as object), model: parsed.model }), now, now)
      return answer(200, { code: 0, msg: "ok", data: { taskId: id } })
    }
    return answer(404, { code: 404, msg: "not found", data: null })
  }
  return { handle, isSubmit }
}

/** The bare server (`bench/http.ts bare <port> <file> <key>`): `node:http` and nothing else. */
const bareServer = (port: string, file: string, key: string) => {
  const { handle, isSubmit } = bareWork(file, key)
  const send = (response: Http.ServerResponse, { status, text }: { status: number; text: string }) => {
    response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
    response.end(text)
  }
  Http.createServer((request, response) => {
    const method = request.method ?? "GET"
    const url = request.url ?? "/"
    if (!isSubmit(method, url)) return send(response, handle(method, url, request.headers.authorization, ""))
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => send(response, handle(method, url, request.headers.authorization, Buffer.concat(chunks).toString("utf8"))))
  }).listen(Number(port), "127.0.0.1", () => console.log("ready"))
}

/**
 * The same work served through `@effect/platform`'s HttpServer on `node:http`, one Effect
 * per request and no router (`bench/http.ts platform <port> <file> <key>`): the least any
 * server built on that stack pays per request.
 */
const platformServer = (port: string, file: string, key: string) => {
  const { handle, isSubmit } = bareWork(file, key)
  const app = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const body = isSubmit(request.method, request.url) ? yield* Effect.orDie(request.text) : ""
    const { status, text } = handle(request.method, request.url, request.headers["authorization"], body)
    return HttpServerResponse.text(text, { status, contentType: "application/json" })
  })
  NodeRuntime.runMain(Layer.launch(HttpServer.serve(app).pipe(Layer.provide(NodeHttpServer.layer(Http.createServer, { port: Number(port), host: "127.0.0.1" })))))
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const probe = Http.createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as AddressInfo
      probe.close(() => resolve(port))
    })
  })

const waitUntilUp = async (base: string) => {
  for (let i = 0; i < 600; i++) {
    const up = await fetch(`${base}/api/v1/models`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status < 500, () => false)
    if (up) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${base} did not start`)
}

const start = async (args: ReadonlyArray<string>, env: Record<string, string> = {}, profile?: string) => {
  const port = await freePort()
  const flags = profile === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${profile}`]
  const child: ChildProcess = spawn(process.execPath, [...flags, "--conditions=@mediagate/source", "--import", "tsx", ...args.map((arg) => arg.replace("$PORT", String(port)))], {
    env: { ...process.env, ...env, MEDIAGATE_PORT: String(port) },
    stdio: ["ignore", "ignore", "inherit"]
  })
  const base = `http://127.0.0.1:${port}`
  await waitUntilUp(base)
  return { base, stop: () => new Promise<void>((resolve) => (child.once("exit", () => resolve()), child.kill("SIGTERM"))) }
}

type Figures = { readonly rps: number; readonly p50: number; readonly p99: number; readonly errors: number }

const load = async (url: string, options: { method?: "GET" | "POST"; body?: string }): Promise<Figures> => {
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    method: options.method ?? "GET",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    ...(options.body === undefined ? {} : { body: options.body })
  })
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.non2xx
  }
}

const main = async () => {
  const dir = mkdtempSync(join(tmpdir(), "mediagate-bench-http-"))
  const mediagate = await start(["examples/standalone-server/src/main.ts"], {
    MEDIAGATE_HOST: "127.0.0.1",
    MEDIAGATE_API_KEY: key,
    MEDIAGATE_DATABASE_URL: `sqlite:${join(dir, "mediagate.db")}`,
    MEDIAGATE_MEDIA_DIR: join(dir, "media"),
    MEDIAGATE_SIMULATOR_PROFILE: "instant",
    // One key at thousands of requests a second: the benchmark measures the path, not the limit.
    MEDIAGATE_RATE_LIMIT: "off",
    // Enough credit that no task of a run fails INSUFFICIENT_POINTS.
    MEDIAGATE_STARTING_CREDITS: "1000000"
  }, process.env["BENCH_PROFILE"])
  const bare = await start(["bench/http.ts", "bare", "$PORT", join(dir, "bare.db"), key])
  const platform = await start(["bench/http.ts", "platform", "$PORT", join(dir, "platform.db"), key])
  const submitBody = JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse", ratio: "1:1" } })
  const submitted = await fetch(`${mediagate.base}/api/v1/task/submit`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: submitBody
  }).then((r) => r.json()) as { data: { taskId: string } }
  // Let the one task finish, so the query rounds find the engine idle.
  await new Promise((resolve) => setTimeout(resolve, 500))

  type Rounds = { mediagate: Array<Figures>; platform: Array<Figures>; bare: Array<Figures> }
  const rounds = { query: { mediagate: [], platform: [], bare: [] } as Rounds, submit: { mediagate: [], platform: [], bare: [] } as Rounds }
  const fixture = "00000000-0000-7000-8000-000000000001"
  for (let round = 0; round < 2; round++) {
    rounds.query.mediagate.push(await load(`${mediagate.base}/api/v1/task/${submitted.data.taskId}`, {}))
    rounds.query.platform.push(await load(`${platform.base}/api/v1/task/${fixture}`, {}))
    rounds.query.bare.push(await load(`${bare.base}/api/v1/task/${fixture}`, {}))
  }
  for (let round = 0; round < (process.env["BENCH_ONLY"] === "query" ? 0 : 2); round++) {
    rounds.submit.mediagate.push(await load(`${mediagate.base}/api/v1/task/submit`, { method: "POST", body: submitBody }))
    rounds.submit.platform.push(await load(`${platform.base}/api/v1/task/submit`, { method: "POST", body: submitBody }))
    rounds.submit.bare.push(await load(`${bare.base}/api/v1/task/submit`, { method: "POST", body: submitBody }))
  }
  await mediagate.stop()
  await platform.stop()
  await bare.stop()
  rmSync(dir, { recursive: true, force: true })

  const best = (figures: ReadonlyArray<Figures>) => figures.reduce((a, b) => (b.rps > a.rps ? b : a))
  const cell = (f: Figures) => `${f.rps.toFixed(0)} | ${f.p50} / ${f.p99}`
  const rows = (["query", "submit"] as const).filter((kind) => rounds[kind].mediagate.length > 0).map((kind) => {
    const m = best(rounds[kind].mediagate)
    const p = best(rounds[kind].platform)
    const b = best(rounds[kind].bare)
    const share = (x: Figures) => `${(x.rps / b.rps * 100).toFixed(0)}%`
    return `| ${kind} | ${cell(m)} | ${cell(p)} | ${cell(b)} | ${share(m)} | ${share(p)} | ${m.errors} / ${p.errors} / ${b.errors} |`
  })
  const table = [
    "| request | mediagate req/s | p50 / p99 (ms) | platform req/s | p50 / p99 (ms) | bare req/s | p50 / p99 (ms) | mediagate / bare | platform / bare | errors (mediagate / platform / bare) |",
    "|---|---|---|---|---|---|---|---|---|---|",
    ...rows
  ].join("\n")
  console.log(table)
  const section = [
    "<!-- bench:http:start -->",
    "## HTTP path: mediagate beside a bare server",
    "",
    "Command: `npm run bench:http` (`BENCH_SECONDS` per round, default 5). The standalone",
    "server (child process, SQLite, instant simulator) and a bare `node:http` + better-sqlite3",
    "server doing the same selects or insert and the same envelope (`bench/http.ts bare`), and",
    "that same work served through `@effect/platform`'s HttpServer, one Effect per request and no",
    "router (`bench/http.ts platform`: the least a server on that stack pays), driven by autocannon",
    `with ${connections} connections in alternating rounds, twice; the better round of each.`,
    "The query rounds run with the engine idle; the submit rounds also run the engine, which",
    "takes each submitted task to SUCCESS (the bare server only inserts).",
    "",
    table,
    "<!-- bench:http:end -->"
  ].join("\n")
  writeSection(section)
  process.exit(0)
}

if (process.argv[2] === "bare") bareServer(process.argv[3]!, process.argv[4]!, process.argv[5]!)
else if (process.argv[2] === "platform") platformServer(process.argv[3]!, process.argv[4]!, process.argv[5]!)
else void main()
