/**
 * The bare yardstick: the durable work of a mediagate task's life with no Effect and no
 * framework, run by the benchmarks beside the real server (same environment variables) to show
 * what mediagate's machinery costs. `node --import tsx bench/bare/server.ts`; prints `ready on <url>`
 * (MEDIAGATE_PORT=0: the port the system chose).
 *
 * What it does:
 * - Submit (`POST /api/v1/task/submit`): bearer key -> account (SHA-256 of the key looked up in
 *   `bare_accounts`, then kept in memory for 5 s keyed by the key, as mediagate's account cache
 *   does), JSON parse, a minimal field check, then ONE transaction: the credit hold (`balance -
 *   price WHERE balance >= price`) and the PENDING task row. The hold is all the credit work:
 *   no settle or refund step follows (every task succeeds).
 * - Worker: claims due rows (PENDING, or PROCESSING with an expired lease) in batches of up to 64
 *   under a 15 s lease (PostgreSQL: FOR UPDATE SKIP LOCKED), at most 64 in flight; woken by
 *   submits (coalesced), again at once after a full batch, a 1 s scan as the safety net.
 * - Upstream: instant; writes one real 8x8 PNG to MEDIAGATE_MEDIA_DIR/<taskId>.png, served at
 *   `/media/<name>`. Terminal write: SUCCESS, result and callback row in one transaction shared
 *   by the tasks that finish in the same tick (group commit).
 * - Deliverer: claims due callback rows (due_at pushed 30 s ahead), reads their tasks, POSTs
 *   `{code:0,msg:"ok",data:<task>}` signed the Standard Webhooks way over a keep-alive agent;
 *   marks the delivered ones sent in one statement per tick; a failure waits 2^attempts s.
 * - Query (`GET /api/v1/task/<id>`, the caller's tasks only) and `GET /api/v1/models`.
 * SQLite (`sqlite:<path>`): better-sqlite3, one connection, WAL with SQLite's default
 * synchronous (FULL) and busy_timeout 5000, as @mediagate/store-sql opens it; a promise lock keeps
 * other statements out of an open transaction (BEGIN IMMEDIATE), as store-sql's does.
 * PostgreSQL (`postgres://`): a pg Pool of 10, named prepared statements. Tables are `bare_*`.
 *
 * What it deliberately does not do: idempotency keys, rate limits, held requests, moderation,
 * routing and fallbacks, upstream failures and timeouts, attempt history, a ledger (one balance
 * column), cancellation, events/SSE, media retention, callBackUrl safety checks, per-account
 * webhook secrets (one fixed secret; BARE_WEBHOOK_SECRET replaces it), a retry limit, metrics,
 * logs, tracing, docs, health endpoints, 405s. A yardstick, not a product.
 */
import Database from "better-sqlite3"
import { createHash, createHmac, randomUUID } from "node:crypto"
import { createReadStream, mkdirSync } from "node:fs"
import { writeFile } from "node:fs/promises"
import http from "node:http"
import https from "node:https"
import { join } from "node:path"
import pg from "pg"

const env = process.env
const [host, apiKey, databaseUrl, mediaDir] = [env["MEDIAGATE_HOST"] ?? "127.0.0.1", env["MEDIAGATE_API_KEY"] ?? "", env["MEDIAGATE_DATABASE_URL"] ?? "", env["MEDIAGATE_MEDIA_DIR"] ?? ""]
const webhookKey = Buffer.from((env["BARE_WEBHOOK_SECRET"] ?? "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").replace(/^whsec_/, ""), "base64")
const MODELS = ["alpha-image-2/text-to-image", "beta-imagine/text-to-image-standard"]
const PRICE = 20_000 // micro-USD
const BATCH = 64, LEASE_MS = 15_000, CALLBACK_LEASE_MS = 30_000

type Row = Record<string, any>
type Run = (text: string, params?: ReadonlyArray<unknown>) => Promise<Array<Row>>
/** Statements with `?` placeholders; `anyOf` + `list(ids)` is "column is one of ids" with one parameter. */
interface Sql {
  readonly run: Run
  readonly tx: <T>(body: (run: Run) => Promise<T>) => Promise<T>
  readonly anyOf: string
  readonly list: (ids: Array<string>) => unknown
  readonly skipLocked: string
  readonly close: () => Promise<void>
}

/** `body` between `begin` and COMMIT, or ROLLBACK when it fails. */
const transaction = async <T>(run: Run, begin: string, body: (run: Run) => Promise<T>) => {
  await run(begin)
  const result = await body(run).catch(async (error) => {
    await run("ROLLBACK").catch(() => undefined)
    throw error
  })
  return (await run("COMMIT"), result)
}

const openSqlite = (filename: string): Sql => {
  const db = new Database(filename)
  db.pragma("journal_mode = WAL")
  db.pragma("busy_timeout = 5000")
  const statements = new Map<string, Database.Statement>()
  const direct: Run = async (text, params = []) => {
    let statement = statements.get(text)
    if (statement === undefined) statements.set(text, statement = db.prepare(text))
    return statement.reader ? statement.all(...params) as Array<Row> : (statement.run(...params), [])
  }
  let tail: Promise<unknown> = Promise.resolve()
  const exclusive = <T>(body: () => Promise<T>): Promise<T> => {
    const result = tail.then(body)
    tail = result.catch(() => undefined)
    return result
  }
  return {
    run: (text, params) => exclusive(() => direct(text, params)),
    tx: (body) => exclusive(() => transaction(direct, "BEGIN IMMEDIATE", body)),
    anyOf: "IN (SELECT value FROM json_each(?))", list: (ids) => JSON.stringify(ids), skipLocked: "",
    close: async () => void (await tail, db.close())
  }
}

const openPg = (url: string): Sql => {
  pg.types.setTypeParser(pg.types.builtins.INT8, Number)
  const pool = new pg.Pool({ connectionString: url, max: 10 })
  const names = new Map<string, { name: string; text: string }>()
  const on = (client: pg.Pool | pg.PoolClient): Run => async (text, params = []) => {
    let n = 0, named = names.get(text)
    if (named === undefined) names.set(text, named = { name: `bare_${names.size}`, text: text.replace(/\?/g, () => `$${++n}`) })
    return (await client.query({ ...named, values: params as Array<unknown> })).rows
  }
  const tx = async <T>(body: (run: Run) => Promise<T>) => {
    const client = await pool.connect()
    return transaction(on(client), "BEGIN", body).finally(() => client.release())
  }
  return { run: on(pool), tx, anyOf: "= ANY(?)", list: (ids) => ids, skipLocked: " FOR UPDATE SKIP LOCKED", close: () => pool.end() }
}

/** One valid 8x8 grey RGB PNG (IHDR, one IDAT, IEND; checked with `file` and the chunks' CRCs). */
const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAD0lEQVR42mNowAEYhpYEAILzYAEllbNjAAAAAElFTkSuQmCC", "base64")

if (!/^(sqlite:|postgres(ql)?:\/\/)/.test(databaseUrl) || mediaDir === "" || apiKey === "") {
  console.error("bare: set MEDIAGATE_DATABASE_URL (sqlite:<path> or postgres://...), MEDIAGATE_MEDIA_DIR and MEDIAGATE_API_KEY")
  process.exit(1)
}
mkdirSync(mediaDir, { recursive: true })
const sql = databaseUrl.startsWith("sqlite:") ? openSqlite(databaseUrl.slice("sqlite:".length)) : openPg(databaseUrl)
for (const ddl of [
  "CREATE TABLE IF NOT EXISTS bare_accounts (id TEXT PRIMARY KEY, key_hash TEXT NOT NULL UNIQUE, balance BIGINT NOT NULL)",
  `CREATE TABLE IF NOT EXISTS bare_tasks (id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, model TEXT NOT NULL, input TEXT NOT NULL, status TEXT NOT NULL,
    result TEXT, due_at BIGINT NOT NULL, lease_until BIGINT, callback_url TEXT, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL)`,
  "CREATE INDEX IF NOT EXISTS bare_tasks_due ON bare_tasks (status, due_at)",
  "CREATE INDEX IF NOT EXISTS bare_tasks_lease ON bare_tasks (status, lease_until)",
  "CREATE TABLE IF NOT EXISTS bare_callbacks (id TEXT PRIMARY KEY, task_id TEXT NOT NULL, url TEXT NOT NULL, due_at BIGINT NOT NULL, attempts INTEGER NOT NULL, sent_at BIGINT)",
  "CREATE INDEX IF NOT EXISTS bare_callbacks_due ON bare_callbacks (due_at) WHERE sent_at IS NULL"
]) await sql.run(ddl)
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")
await sql.run("INSERT INTO bare_accounts (id, key_hash, balance) VALUES ('acct_bare', ?, ?) ON CONFLICT (id) DO UPDATE SET key_hash = excluded.key_hash", [sha256(apiKey), 1e15])

// Background work is tracked, so that shutdown can wait for it.
let stopping = false
const pending = new Set<Promise<unknown>>()
const track = (work: Promise<unknown>) => {
  const settled = work.catch((error) => console.error("bare:", error)).finally(() => pending.delete(settled))
  pending.add(settled)
}
/** Runs `round` when woken, at most once per tick; again at once while a round answers true (it filled its batch). */
const loop = (round: () => Promise<boolean>) => {
  let scheduled = false, running = false, again = false
  const go = async () => {
    scheduled = false
    if (running) return void (again = true)
    running = true
    try {
      do {
        again = false // a wake during the round sets it again
        if (await round()) again = true
      } while (again && !stopping)
    } finally {
      running = false
    }
  }
  return () => void (!scheduled && !stopping && (scheduled = true, setImmediate(() => track(go()))))
}
/** Items collected during a tick, handed to `flush` together on the next one. */
const batcher = <T>(flush: (items: Array<T>) => Promise<void>) => {
  let items: Array<T> = []
  return (item: T) => void (items.push(item) === 1 && setImmediate(() => track(flush(items.splice(0)))))
}

let publicUrl = "", running = 0, tasksBacklog = false
const wakeWorker = loop(async () => {
  const room = BATCH - running, now = Date.now()
  if (room <= 0) return false
  const claimed = await sql.run(
    `UPDATE bare_tasks SET status = 'PROCESSING', lease_until = ?, updated_at = ? WHERE id IN (SELECT id FROM bare_tasks
      WHERE (status = 'PENDING' AND due_at <= ?) OR (status = 'PROCESSING' AND lease_until <= ?) ORDER BY due_at LIMIT ?${sql.skipLocked}) RETURNING id, callback_url`,
    [now + LEASE_MS, now, now, now, room]
  )
  running += claimed.length
  for (const { id, callback_url } of claimed) {
    // The instant upstream: its result is a real file, hosted here.
    track(writeFile(join(mediaDir, `${id}.png`), png).then(
      () => finished({ id, callbackUrl: callback_url, result: JSON.stringify({ type: "image", urls: [`${publicUrl}/media/${id}.png`] }) }),
      (error) => {
        running--
        throw error
      }
    ))
  }
  return tasksBacklog = claimed.length === room
})
const finished = batcher<{ id: string; result: string; callbackUrl: string | null }>(async (done) => {
  const now = Date.now()
  try {
    await sql.tx(async (run) => {
      for (const { callbackUrl, id, result } of done) {
        await run("UPDATE bare_tasks SET status = 'SUCCESS', result = ?, updated_at = ?, lease_until = NULL WHERE id = ?", [result, now, id])
        if (callbackUrl === null) continue
        await run("INSERT INTO bare_callbacks (id, task_id, url, due_at, attempts, sent_at) VALUES (?, ?, ?, ?, 0, NULL)", [`msg_${randomUUID()}`, id, callbackUrl, now])
      }
    })
    wakeDeliverer()
  } finally { // after a failure the leases run out and the tasks are claimed again
    running -= done.length
    if (tasksBacklog) wakeWorker()
  }
})

const iso = (millis: number) => new Date(millis).toISOString()
const wire = (task: Row) => ({
  taskId: task["id"], status: task["status"], input: { model: task["model"], ...JSON.parse(task["input"]) },
  result: task["result"] === null ? null : JSON.parse(task["result"]), failure_reason: null, created_at: iso(task["created_at"]),
  updated_at: iso(task["updated_at"]), adjustments: [], error: null, attempts: [], price_micro_usd: PRICE
})

const agents = { "http:": new http.Agent({ keepAlive: true, maxSockets: 64 }), "https:": new https.Agent({ keepAlive: true, maxSockets: 64 }) }
/** POSTs `body`; answers the status, 0 when no answer came. */
const post = (url: string, body: string, headers: Record<string, string>) =>
  new Promise<number>((resolve) => {
    const target = new URL(url), secure = target.protocol === "https:"
    const request = (secure ? https : http).request(target, {
      method: "POST", agent: agents[secure ? "https:" : "http:"], timeout: 10_000,
      headers: { ...headers, "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) }
    }, (response) => response.resume().on("end", () => resolve(response.statusCode ?? 0)).on("close", () => resolve(0)))
    request.on("timeout", () => request.destroy()).on("error", () => resolve(0)).end(body)
  })
let delivering = 0, callbacksBacklog = false
const sent = batcher<string>(async (ids) => {
  await sql.run(`UPDATE bare_callbacks SET sent_at = ? WHERE id ${sql.anyOf}`, [Date.now(), sql.list(ids)])
})
const deliver = async ({ attempts, id, url }: Row, task: Row | undefined) => {
  try {
    const body = JSON.stringify({ code: 0, msg: "ok", data: task === undefined ? null : wire(task) }), timestamp = Math.floor(Date.now() / 1000)
    const signature = `v1,${createHmac("sha256", webhookKey).update(`${id}.${timestamp}.${body}`).digest("base64")}`
    const status = await post(url, body, { "webhook-id": id, "webhook-timestamp": String(timestamp), "webhook-signature": signature })
    if (status >= 200 && status < 300) return sent(id)
    await sql.run("UPDATE bare_callbacks SET due_at = ?, attempts = ? WHERE id = ?", [Date.now() + 1000 * 2 ** Math.min(attempts, 12), attempts + 1, id])
  } finally {
    delivering--
    if (callbacksBacklog) wakeDeliverer()
  }
}
const wakeDeliverer = loop(async () => {
  const room = BATCH - delivering, now = Date.now()
  if (room <= 0) return false
  const claimed = await sql.run(
    `UPDATE bare_callbacks SET due_at = ? WHERE id IN (SELECT id FROM bare_callbacks WHERE sent_at IS NULL AND due_at <= ?
      ORDER BY due_at LIMIT ?${sql.skipLocked}) RETURNING id, task_id, url, attempts`,
    [now + CALLBACK_LEASE_MS, now, room]
  )
  if (claimed.length === 0) return callbacksBacklog = false
  const tasks = await sql.run(`SELECT * FROM bare_tasks WHERE id ${sql.anyOf}`, [sql.list(claimed.map((c) => c["task_id"]))])
  const byId = new Map(tasks.map((task) => [task["id"], task]))
  delivering += claimed.length
  for (const callback of claimed) track(deliver(callback, byId.get(callback["task_id"])))
  return callbacksBacklog = claimed.length === room
})

const accounts = new Map<string, { id: string; until: number }>()
const authenticate = async (header: string | undefined): Promise<string | undefined> => {
  const key = header === undefined ? undefined : /^Bearer[ \t]+([^\s]+)[ \t]*$/i.exec(header)?.[1]
  if (key === undefined) return undefined
  const hit = accounts.get(key)
  if (hit !== undefined && hit.until > Date.now()) return hit.id
  const [row] = await sql.run("SELECT id FROM bare_accounts WHERE key_hash = ?", [sha256(key)])
  if (row !== undefined) accounts.set(key, { id: row["id"], until: Date.now() + 5000 })
  return row?.["id"]
}
const send = (response: http.ServerResponse, code: number, msg: string, data: unknown = null) => {
  const body = JSON.stringify({ code, msg, data })
  response.writeHead(code === 0 ? 200 : code, { "content-type": "application/json", "content-length": Buffer.byteLength(body) }).end(body)
}
/** The body as text; undefined past 1 MiB. */
const readBody = (request: http.IncomingMessage) =>
  new Promise<string | undefined>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let size = 0
    request.on("data", (chunk: Buffer) => (size += chunk.length) > 1 << 20 ? resolve(undefined) : chunks.push(chunk))
      .on("end", () => resolve(Buffer.concat(chunks).toString("utf8"))).on("error", reject)
  })
const invalid = (body: any): string | undefined => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return "the body must be a JSON object"
  if (!MODELS.includes(body.model)) return `model must be one of ${MODELS.join(", ")}`
  if (typeof body.input?.prompt !== "string" || body.input.prompt === "") return "input.prompt must be a non-empty string"
  if (body.callBackUrl === undefined) return undefined
  const url = typeof body.callBackUrl === "string" && URL.canParse(body.callBackUrl) ? new URL(body.callBackUrl) : undefined
  return url?.protocol === "http:" || url?.protocol === "https:" ? undefined : "callBackUrl must be an http(s) URL"
}

const handle = async (request: http.IncomingMessage, response: http.ServerResponse) => {
  const path = (request.url ?? "/").split("?")[0]!
  const media = /^\/media\/([A-Za-z0-9-]+\.png)$/.exec(path)
  if (media !== null && request.method === "GET") {
    const file = createReadStream(join(mediaDir, media[1]!))
    return void file.once("open", () => file.pipe(response.writeHead(200, { "content-type": "image/png" })))
      .once("error", () => response.headersSent ? response.destroy() : send(response, 404, "media not found"))
  }
  if (!path.startsWith("/api/v1/")) return send(response, 404, `not found: ${path}`)
  const owner = await authenticate(request.headers.authorization)
  if (owner === undefined) return send(response, 401, "unauthorized")
  if (request.method === "POST" && path === "/api/v1/task/submit") {
    const text = await readBody(request)
    if (text === undefined) return send(response, 413, "the body is too large")
    let body: any
    try {
      body = JSON.parse(text)
    } catch {
      return send(response, 400, "the body is not valid JSON")
    }
    const problem = invalid(body)
    if (problem !== undefined) return send(response, 400, problem)
    const { callBackUrl, input, model } = body, id = randomUUID(), now = Date.now()
    const held = await sql.tx(async (run) => {
      const [account] = await run("UPDATE bare_accounts SET balance = balance - ? WHERE id = ? AND balance >= ? RETURNING id", [PRICE, owner, PRICE])
      if (account !== undefined) {
        await run(`INSERT INTO bare_tasks (id, owner_id, model, input, status, due_at, callback_url, created_at, updated_at)
          VALUES (?, ?, ?, ?, 'PENDING', ?, ?, ?, ?)`, [id, owner, model, JSON.stringify(input), now, callBackUrl ?? null, now, now])
      }
      return account !== undefined
    })
    if (!held) return send(response, 402, "insufficient credits")
    send(response, 0, "ok", { taskId: id })
    return wakeWorker()
  }
  const query = /^\/api\/v1\/task\/([^/]+)$/.exec(path)
  if (request.method === "GET" && query !== null) {
    const [task] = await sql.run("SELECT * FROM bare_tasks WHERE id = ? AND owner_id = ?", [decodeURIComponent(query[1]!), owner])
    return task === undefined ? send(response, 404, "task not found") : send(response, 0, "ok", wire(task))
  }
  if (request.method === "GET" && path === "/api/v1/models") return send(response, 0, "ok", MODELS)
  send(response, 404, `not found: ${path}`)
}

const server = http.createServer((request, response) =>
  void handle(request, response).catch((error) => {
    console.error("bare:", error)
    if (!response.headersSent) send(response, 500, "internal server error")
  }))
server.listen(Number(env["MEDIAGATE_PORT"] ?? 8080), host, () => {
  publicUrl = `http://${host.includes(":") ? `[${host}]` : host}:${(server.address() as { port: number }).port}`
  console.log(`ready on ${publicUrl}`)
  wakeWorker(), wakeDeliverer() // what an earlier run left due
})
// The safety net; BARE_SCAN_MS lets a test make it too slow to hide a lost wake-up.
const scan = setInterval(() => (wakeWorker(), wakeDeliverer()), Number(env["BARE_SCAN_MS"] ?? 1000))

const shutdown = async () => {
  stopping = true
  clearInterval(scan)
  await new Promise((resolve) => server.close(resolve))
  // Work under way finishes, for at most 3 s (a task cut short is claimed again once its lease runs out).
  for (const deadline = Date.now() + 3000; pending.size > 0 && Date.now() < deadline;) {
    await Promise.race([...pending, new Promise((resolve) => setTimeout(resolve, 100))])
  }
  agents["http:"].destroy(), agents["https:"].destroy()
  await sql.close()
  process.exit(0)
}
process.once("SIGTERM", () => void shutdown()).once("SIGINT", () => void shutdown())
