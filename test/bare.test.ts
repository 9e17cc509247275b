/**
 * The bare yardstick server (bench/bare/server.ts) the benchmarks run beside mediagate, as a
 * child process on SQLite and, when MEDIAGATE_TEST_PG_URL is set, on a fresh PostgreSQL
 * database: 50 tasks submitted at once each call back once, SUCCESS, signed (checked with
 * `standardwebhooks`), with a result URL that serves a PNG; the query; 401, 400 and 404
 * envelopes; SIGTERM exits 0.
 */
import { freshDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Webhook } from "standardwebhooks"
import { afterEach, describe, expect, it } from "vitest"
import { nodeArgs } from "./programs.js"

const apiKey = "mg_bare_test_key_0123456789"
const secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
const auth = { authorization: `Bearer ${apiKey}` }
const root = new URL("..", import.meta.url).pathname

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

interface Received {
  readonly headers: Record<string, string>
  readonly body: string
}

/** A loopback receiver that answers 204 and keeps what came. */
const receiver = async () => {
  const received: Array<Received> = []
  const waiting: Array<{ n: number; resolve: () => void }> = []
  const server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk)).on("end", () => {
      received.push({ headers: request.headers as Record<string, string>, body: Buffer.concat(chunks).toString("utf8") })
      for (const waiter of waiting.filter((w) => received.length >= w.n)) waiter.resolve()
      response.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  cleanups.push(() => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`,
    received,
    /** Resolves once n callbacks came; fails after 10 s saying how many did (the bare server's 1 s scan is off in this test). */
    arrived: (n: number) =>
      new Promise<void>((resolve, reject) => {
        if (received.length >= n) return resolve()
        const timer = setTimeout(() => reject(new Error(`${received.length} of ${n} callbacks arrived in 10 s: a lost wake-up?`)), 10_000)
        waiting.push({ n, resolve: () => (clearTimeout(timer), resolve()) })
      })
  }
}

/**
 * The bare server on `databaseUrl` and a port the system chooses, once it printed `ready on
 * <url>`; `stop` sends SIGTERM and answers the exit code.
 */
const startBare = async (databaseUrl: string, mediaDir: string) => {
  const child = spawn(process.execPath, nodeArgs("bare"), {
    cwd: root,
    env: {
      ...process.env,
      MEDIAGATE_PORT: "0",
      MEDIAGATE_HOST: "127.0.0.1",
      MEDIAGATE_API_KEY: apiKey,
      MEDIAGATE_DATABASE_URL: databaseUrl,
      MEDIAGATE_MEDIA_DIR: mediaDir,
      BARE_WEBHOOK_SECRET: secret,
      // No periodic scan within the test: every task and callback must be woken by the events.
      BARE_SCAN_MS: "600000"
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stderr = ""
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  cleanups.push(() => void (child.exitCode === null && child.kill("SIGKILL")))
  const url = await new Promise<string>((resolve, reject) => {
    let stdout = ""
    child.stdout.on("data", (chunk: Buffer) => {
      const ready = /ready on (http:\/\/\S+)/.exec(stdout += chunk.toString())
      if (ready !== null) resolve(ready[1]!)
    })
    void exited.then((code) => reject(new Error(`the bare server exited with ${code} before it was ready: ${stderr}`)))
  })
  return {
    url,
    stop: () => (child.kill("SIGTERM"), exited),
    stderr: () => stderr
  }
}

const backends: Array<[string, () => Promise<{ url: string; drop: () => Promise<void> | void }>]> = [
  ["SQLite", async () => {
    const folder = mkdtempSync(join(tmpdir(), "bare-db-"))
    return { url: `sqlite:${join(folder, "bare.db")}`, drop: () => rmSync(folder, { recursive: true, force: true }) }
  }],
  ...pgUrl === undefined ? [] : [["PostgreSQL", () => freshDatabase(pgUrl!, "bare")] as [string, () => Promise<{ url: string; drop: () => Promise<void> }>]]
]

pgSkipReason("bare")

describe("the bare yardstick server", () => {
  for (const [name, database] of backends) {
    it(`${name}: 50 tasks, each called back once, signed, with a PNG; query, 401, 400, 404; SIGTERM exits 0`, { timeout: 20_000 }, async () => {
      const db = await database()
      cleanups.push(db.drop)
      const mediaDir = mkdtempSync(join(tmpdir(), "bare-media-"))
      cleanups.push(() => rmSync(mediaDir, { recursive: true, force: true }))
      const callbacks = await receiver()
      const bare = await startBare(db.url, mediaDir)

      const submitted = await Promise.all(Array.from({ length: 50 }, async (_, i) => {
        const response = await fetch(`${bare.url}/api/v1/task/submit`, {
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: `a lighthouse ${i}` }, callBackUrl: callbacks.url })
        })
        const envelope = await response.json() as { code: number; data: { taskId: string } }
        expect([response.status, envelope.code]).toEqual([200, 0])
        return envelope.data.taskId
      }))
      await callbacks.arrived(50)

      const webhook = new Webhook(secret)
      const tasks = callbacks.received.map(({ body, headers }) => {
        const payload = webhook.verify(body, headers) as { code: number; data: { taskId: string; status: string; result: { urls: Array<string> } } }
        expect(payload.code).toBe(0)
        return payload.data
      })
      expect(tasks.map((task) => task.taskId).sort()).toEqual([...submitted].sort())
      expect(new Set(tasks.map((task) => task.status))).toEqual(new Set(["SUCCESS"]))
      await Promise.all(tasks.map(async (task) => {
        const file = await fetch(task.result.urls[0]!)
        expect([file.status, file.headers.get("content-type")]).toEqual([200, "image/png"])
        expect([...new Uint8Array(await file.arrayBuffer()).subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
      }))

      const query = await fetch(`${bare.url}/api/v1/task/${submitted[7]}`, { headers: auth })
      const queried = await query.json() as { code: number; data: { taskId: string; status: string; input: { model: string; prompt: string } } }
      expect([query.status, queried.code, queried.data.taskId, queried.data.status]).toEqual([200, 0, submitted[7], "SUCCESS"])
      expect(queried.data.input).toEqual({ model: "alpha-image-2/text-to-image", prompt: "a lighthouse 7" })

      const answer = async (path: string, init: RequestInit = {}) => {
        const response = await fetch(`${bare.url}${path}`, init)
        return [response.status, await response.json()]
      }
      expect(await answer("/api/v1/task/" + submitted[0], { headers: { authorization: "Bearer mg_wrong" } }))
        .toEqual([401, { code: 401, msg: "unauthorized", data: null }])
      expect(await answer("/api/v1/task/submit", { method: "POST", headers: auth, body: "{not json" }))
        .toEqual([400, { code: 400, msg: "the body is not valid JSON", data: null }])
      expect(await answer("/api/v1/task/submit", { method: "POST", headers: auth, body: JSON.stringify({ model: "nope", input: { prompt: "x" } }) }))
        .toMatchObject([400, { code: 400, data: null }])
      expect(await answer("/api/v1/task/0190c8a4-0000-7000-8000-000000000000", { headers: auth }))
        .toEqual([404, { code: 404, msg: "task not found", data: null }])
      expect(await answer("/media/0190c8a4-0000-7000-8000-000000000000.png")).toMatchObject([404, { code: 404 }])

      expect(await bare.stop()).toBe(0)
      expect(bare.stderr()).toBe("")
      // Nothing arrived twice while the rest ran.
      expect(callbacks.received).toHaveLength(50)
    })
  }
})
