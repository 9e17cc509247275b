/**
 * Hostile input stays bounded at the HTTP edge, over real loopback servers: a deeply nested
 * body is a 400, not a stack overflow; thousands of long wrong keys keep no memory and are
 * limited per address; held requests (events, `?wait=`) are capped per key and in total;
 * and what node:http refuses on its own is answered in the envelope too, on the standalone
 * server and through the library's node embedding helper.
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Ids, ModelCatalog, Moderation, TaskServiceAlone } from "@mediagate/core"
import { AuthFailures, HeldRequests, MediagateHttp, RateLimit } from "@mediagate/http"
import { MemoryAccounts, MemoryLedger, MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import { Effect, HashMap, Layer, Logger, Option, Redacted, TestClock } from "effect"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import * as Http from "node:http"
import * as Net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { killAll, startServer, stop } from "./standalone-process.js"
import { apiKey, memoryAdmin, otherApiKey } from "./support.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-hostile-"))
afterAll(() => {
  killAll()
  rmSync(dir, { recursive: true, force: true })
})

/** The API without an engine (tasks stay PENDING), with what a test adds to it, on a loopback server. */
const requirements = Layer.mergeAll(
  TaskServiceAlone.layer.pipe(Layer.provide([MemoryTaskStore.layer, ModelCatalog.layer, Moderation.layerAllowAll, TaskServiceAlone.noUpstream])),
  MemoryAccounts.layer([
    { id: "acct_a", name: "a", apiKey: Redacted.make(apiKey) },
    { id: "acct_b", name: "b", apiKey: Redacted.make(otherApiKey) }
  ]),
  MemoryLedger.layer,
  MemoryMediaStore.layer({ baseUrl: "http://127.0.0.1/media" }),
  ModelCatalog.layer
).pipe(Layer.provide(Ids.layerTest), (services) =>
  // The admin API's services in memory, on the same store and ids (layers are memoised by reference).
  Layer.provideMerge(memoryAdmin.pipe(Layer.provide([MemoryTaskStore.layer, Ids.layerTest])), services))

const serverWith = (settings: Layer.Layer<never>) =>
  MediagateHttp.serve.pipe(Layer.provide(settings), Layer.provide(requirements), Layer.provideMerge(NodeHttpServer.layerTest))

const portOf = Effect.map(HttpServer.HttpServer, (server) => (server.address._tag === "TcpAddress" ? server.address.port : 0))

interface Answer {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly body: any
}

/** A request with node:http (no pooling unless `agent`), its body parsed as JSON. */
const request = (port: number, options: { method?: string; path: string; key?: string; body?: string; agent?: Http.Agent }) =>
  new Promise<Answer>((resolve, reject) => {
    const sent = Http.request({
      host: "127.0.0.1",
      port,
      method: options.method ?? "GET",
      path: options.path,
      agent: options.agent ?? false,
      headers: {
        ...(options.key === undefined ? {} : { authorization: `Bearer ${options.key}` }),
        ...(options.body === undefined ? {} : { "content-type": "application/json" })
      }
    }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => (text += chunk))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: JSON.parse(text) }))
    })
    sent.on("error", reject)
    sent.end(options.body)
  })

/**
 * A request the server holds open: resolves once its answer has begun (the events stream's
 * headers) or ended (any refusal), with a way to hang up.
 */
const hold = (port: number, path: string, key: string) =>
  new Promise<{ status: number; headers: Http.IncomingHttpHeaders; text: () => Promise<string>; hangUp: () => void }>((resolve, reject) => {
    const sent = Http.get({ host: "127.0.0.1", port, path, agent: false, headers: { authorization: `Bearer ${key}` } }, (response) => {
      let text = ""
      const ended = new Promise<string>((done) => response.on("end", () => done(text)))
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => (text += chunk))
      resolve({ status: response.statusCode ?? 0, headers: response.headers, text: () => ended, hangUp: () => sent.destroy() })
    })
    sent.on("error", (error) => (sent.destroyed ? undefined : reject(error)))
  })

/** Lets the server's fibers and sockets run without moving virtual time. */
const settle = Effect.promise(async () => {
  for (let i = 0; i < 30; i++) await new Promise((resolve) => setImmediate(resolve))
})

const submit = (port: number, key = apiKey) =>
  Effect.promise(() => request(port, { method: "POST", path: "/api/v1/task/submit", key, body: JSON.stringify({ model: "dream-4", input: { prompt: "held" } }) }))
    .pipe(Effect.map((answer) => answer.body.data.taskId as string))

/** Log lines at ERROR or worse. */
const captureErrors = () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ annotations, logLevel, message }) => {
    if (logLevel._tag === "Error" || logLevel._tag === "Fatal") lines.push(`${String(message)} ${JSON.stringify(HashMap.toEntries(annotations))}`)
  })
  return { lines, layer: Logger.add(logger) }
}

/** Heap in use after a full collection. */
const heapAfterGc = () => {
  setFlagsFromString("--expose-gc")
  ;(runInNewContext("gc") as () => void)()
  return process.memoryUsage().heapUsed
}

describe("deeply nested bodies", () => {
  it.effect("a 6 KB submit nested 3,000 levels deep (or a deep field) is 400 in the envelope and logs no error", () => {
    const logs = captureErrors()
    return Effect.gen(function*() {
      const port = yield* portOf
      const levels = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`
      const objects = (n: number) => `${`{"a":`.repeat(n)}1${"}".repeat(n)}`
      // Before the limit: the first two were 500 with an ERROR log (stack overflow), the third a task stored 3,000 levels deep.
      const bodies = [
        levels(3_000),
        `{"model":"dream-4","callBackUrl":${objects(1_000)},"input":{"prompt":"x"}}`,
        `{"model":"canvas-4.0","input":{"prompt":"x","style":${levels(3_000)}}}`
      ]
      expect(bodies[0]!.length).toBe(6_000)
      for (const body of bodies) {
        const answer = yield* Effect.promise(() => request(port, { method: "POST", path: "/api/v1/task/submit", key: apiKey, body }))
        expect([answer.status, answer.body]).toEqual([400, { code: 400, msg: "request body is nested too deeply (at most 64 levels)" }])
      }
      // At the limit the body is read and judged as usual.
      const shallow = `{"model":"dream-4","input":{"prompt":"x","extra":${"[".repeat(62)}${"]".repeat(62)}}}`
      const judged = yield* Effect.promise(() => request(port, { method: "POST", path: "/api/v1/task/submit", key: apiKey, body: shallow }))
      expect(judged.status).toBe(400)
      expect(judged.body.msg).not.toMatch(/nested/)
      expect(logs.lines).toEqual([])
    }).pipe(Effect.provide(Layer.merge(serverWith(Layer.empty), logs.layer)))
  })
})

describe("wrong keys", () => {
  const limit = RateLimit.make({ perSecond: 50, maxKeys: 500 })
  it.effect("1,500 distinct 15 KB wrong keys: at most maxKeys buckets, no key kept (heap grows by under 8 MB, not 22)", () =>
    Effect.gen(function*() {
      const port = yield* portOf
      // A first round so the server's own lazy state is built before measuring.
      yield* Effect.promise(() => request(port, { path: "/api/v1/tasks", key: "warm-up" }))
      const agent = new Http.Agent({ keepAlive: true, maxSockets: 8 })
      const before = heapAfterGc()
      const statuses = yield* Effect.forEach(
        Array.from({ length: 1_500 }),
        () => Effect.promise(() => request(port, { path: "/api/v1/tasks", key: randomBytes(7_500).toString("hex"), agent })).pipe(Effect.map((answer) => answer.status)),
        { concurrency: 8 }
      )
      agent.destroy()
      yield* settle
      const grown = heapAfterGc() - before
      expect(new Set(statuses)).toEqual(new Set([401]))
      expect(yield* limit.size).toBe(500)
      expect(grown).toBeLessThan(8 * 1024 * 1024)
      console.log(`hostile: 1,500 distinct 15 KB wrong keys grew the heap by ${(grown / 1024 / 1024).toFixed(1)} MB`)
    }).pipe(Effect.provide(serverWith(Layer.mergeAll(Layer.succeed(RateLimit.RateLimit, limit), AuthFailures.layer(Option.none()))))), { timeout: 60_000 })

  it.effect("after 5 failed authentications an address gets 429 with Retry-After; a key that worked before still works; the window gives failures back", () =>
    Effect.gen(function*() {
      const port = yield* portOf
      const query = (key: string) => Effect.promise(() => request(port, { path: "/api/v1/tasks", key }))
      expect((yield* query(apiKey)).status).toBe(200)
      for (let i = 0; i < 5; i++) expect((yield* query(`wrong-${i}`)).status).toBe(401)
      const limited = yield* query("wrong-5")
      expect([limited.status, limited.body]).toEqual([429, { code: 429, msg: "too many failed authentications from this address; try again later" }])
      expect(limited.headers["retry-after"]).toBe("12")
      // Right or wrong, a key not seen to work is not tried: the other account's too.
      expect((yield* query(otherApiKey)).status).toBe(429)
      expect((yield* query(apiKey)).status).toBe(200)
      yield* TestClock.adjust("12 seconds")
      expect((yield* query("wrong-6")).status).toBe(401)
      expect((yield* query("wrong-7")).status).toBe(429)
      // Thousands more from the address cost nothing but the 429.
      for (let i = 0; i < 200; i++) expect((yield* query(randomBytes(7_500).toString("hex"))).status).toBe(429)
    }).pipe(Effect.provide(serverWith(AuthFailures.layer(Option.some({ failures: 5, window: "1 minute" }))))))
})

describe("held requests", () => {
  it.effect("at most 3 per key and 5 in all, each 429 in the envelope with Retry-After; a place comes back when a request ends or its client hangs up", () =>
    Effect.gen(function*() {
      const port = yield* portOf
      const a = yield* submit(port, apiKey)
      const b = yield* submit(port, otherApiKey)
      const open = (path: string, key: string) => Effect.promise(() => hold(port, path, key))
      const first = yield* open(`/api/v1/task/${a}/events`, apiKey)
      const second = yield* open(`/api/v1/task/${a}/events`, apiKey)
      const waiting = yield* Effect.fork(Effect.promise(() => request(port, { path: `/api/v1/task/${a}?wait=60`, key: apiKey })))
      yield* settle
      expect([first.status, second.status]).toEqual([200, 200])
      for (const path of [`/api/v1/task/${a}/events`, `/api/v1/task/${a}?wait=60`, `/api/v1/task/${a}/?wait=5`]) {
        const refused = yield* open(path, apiKey)
        expect([path, refused.status, JSON.parse(yield* Effect.promise(refused.text))]).toEqual([
          path,
          429,
          { code: 429, msg: "too many requests held open for this key (at most 3); close one first" }
        ])
        expect(refused.headers["retry-after"]).toBe("5")
      }
      // Requests that are not held are not counted.
      expect((yield* Effect.promise(() => request(port, { path: `/api/v1/task/${a}`, key: apiKey }))).status).toBe(200)
      const third = yield* open(`/api/v1/task/${b}/events`, otherApiKey)
      const fourth = yield* open(`/api/v1/task/${b}/events`, otherApiKey)
      expect([third.status, fourth.status]).toEqual([200, 200])
      const full = yield* open(`/api/v1/task/${b}/events`, otherApiKey)
      expect([full.status, JSON.parse(yield* Effect.promise(full.text))]).toEqual([
        429,
        { code: 429, msg: "too many requests held open on this server (at most 5); try again later" }
      ])
      // A client that hangs up gives its place back.
      first.hangUp()
      yield* settle
      const again = yield* open(`/api/v1/task/${a}/events`, apiKey)
      expect(again.status).toBe(200)
      // So does a wait that ends (here by the task's cancellation, which also ends its streams).
      expect((yield* Effect.promise(() => request(port, { method: "POST", path: `/api/v1/task/${a}/cancel`, key: apiKey }))).status).toBe(200)
      yield* settle
      expect((yield* Effect.fromFiber(waiting)).body.data.status).toBe("CANCELLED")
      for (const ended of [second, again]) expect(yield* Effect.promise(ended.text)).toContain("CANCELLED")
      const c = yield* submit(port, apiKey)
      const after = yield* Effect.all(Array.from({ length: 3 }, () => open(`/api/v1/task/${c}/events`, apiKey)))
      expect(after.map((answer) => answer.status)).toEqual([200, 200, 200])
      for (const answer of [...after, third, fourth]) answer.hangUp()
    }).pipe(Effect.provide(serverWith(HeldRequests.layer({ perKey: 3, total: 5 })))))
})

interface RawAnswer {
  readonly statusLine: string
  readonly headers: Record<string, string>
  readonly body: unknown
}

/** Bytes sent as they are on a new connection; what comes back until the server closes it. */
const raw = (port: number, bytes: string) =>
  new Promise<RawAnswer>((resolve, reject) => {
    const socket = Net.connect(port, "127.0.0.1")
    let received = ""
    socket.setEncoding("latin1")
    socket.on("data", (chunk: string) => (received += chunk))
    socket.on("error", reject)
    socket.on("close", () => {
      const [head = "", body = ""] = received.split("\r\n\r\n", 2)
      const [statusLine = "", ...lines] = head.split("\r\n")
      const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(":")).toLowerCase(), line.slice(line.indexOf(":") + 1).trim()]))
      try {
        resolve({ statusLine, headers, body: JSON.parse(body) })
      } catch {
        reject(new Error(`not an envelope: ${JSON.stringify(received.slice(0, 300))}`))
      }
    })
    socket.end(bytes)
  })

/** What node:http would answer on its own, and the envelope each gets instead. */
const nodeRefusals = (key: string): ReadonlyArray<readonly [string, string, number, string, Record<string, string>?]> => [
  ["headers over 16 KB", `GET /api/v1/tasks HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`, 431, "request headers are too large"],
  ["a control character in the request line", "GET /api/v1/ta\x01sks HTTP/1.1\r\nHost: x\r\n\r\n", 400, "the request could not be read"],
  ["a control character in a header", `GET /api/v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\x01\r\n\r\n`, 400, "the request could not be read"],
  ["a space in a header name", "GET /api/v1/tasks HTTP/1.1\r\nHo st: x\r\n\r\n", 400, "the request could not be read"],
  ["an unknown method on a known path", `FOO /api/v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`, 405, "method FOO is not allowed here; use GET", { allow: "GET" }],
  ["an unknown method elsewhere", "FOO /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 404, "not found: /nowhere"],
  ["a method in lower case", "get /api/v1/tasks HTTP/1.1\r\nHost: x\r\n\r\n", 405, "method get is not allowed here; use GET", { allow: "GET" }],
  ["CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 404, "not found: example.com:443"],
  ["a method Node knows and we do not", `PROPFIND /api/v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`, 405, "method PROPFIND is not allowed here; use GET", { allow: "GET" }],
  ["the same without a key", "PROPFIND /api/v1/tasks HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 401, "unauthorized"],
  ["an Expect other than 100-continue", "GET /api/v1/tasks HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\n\r\n", 417, "only Expect: 100-continue is supported"]
]

const expectRefusals = async (port: number, key: string) => {
  for (const [what, bytes, code, msg, headers = {}] of nodeRefusals(key)) {
    const answer = await raw(port, bytes)
    expect([what, answer.statusLine.split(" ")[1], answer.body]).toEqual([what, String(code), { code, msg }])
    expect([what, answer.headers["content-type"]]).toEqual([what, expect.stringMatching(/^application\/json/)])
    for (const [name, value] of Object.entries(headers)) expect([what, answer.headers[name]]).toEqual([what, value])
  }
}

describe("node:http's own answers, in the envelope", () => {
  it("through the library's node embedding helper (makeNodeHandler with the host's server)", { timeout: 60_000 }, async () => {
    const server = Http.createServer()
    const mediagate = await MediagateHttp.makeNodeHandler(requirements, { server })
    server.on("request", mediagate.handler)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    try {
      await expectRefusals((server.address() as Net.AddressInfo).port, apiKey)
    } finally {
      await mediagate.dispose()
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it("on the standalone server, whose held-request and failed-authentication limits are settings", { timeout: 90_000 }, async () => {
    const key = "mg-hostile-test-key"
    const server = await startServer({
      MEDIAGATE_DATABASE_URL: "memory",
      MEDIAGATE_API_KEY: key,
      MEDIAGATE_MEDIA_DIR: join(dir, "media"),
      MEDIAGATE_MAX_HELD_PER_KEY: "2",
      MEDIAGATE_MAX_HELD: "50",
      MEDIAGATE_AUTH_FAILURE_LIMIT: "3"
    })
    const { port } = server
    await expectRefusals(port, key)
    // A task that never finishes, followed twice; the third is refused.
    const created = await request(port, { method: "POST", path: "/api/v1/task/submit", key, body: JSON.stringify({ model: "dream-4", input: { prompt: "forever [sim:timeout]" } }) })
    const taskId = created.body.data.taskId as string
    const held = [await hold(port, `/api/v1/task/${taskId}/events`, key), await hold(port, `/api/v1/task/${taskId}/events`, key)]
    expect(held.map((answer) => answer.status)).toEqual([200, 200])
    const refused = await hold(port, `/api/v1/task/${taskId}/events`, key)
    expect([refused.status, JSON.parse(await refused.text())]).toEqual([429, { code: 429, msg: "too many requests held open for this key (at most 2); close one first" }])
    for (const answer of held) answer.hangUp()
    // Three wrong keys, then 429 for a fourth; the server's key still works.
    for (let i = 0; i < 3; i++) expect((await request(port, { path: "/api/v1/tasks", key: `wrong-${i}` })).status).toBe(401)
    const limited = await request(port, { path: "/api/v1/tasks", key: "wrong-3" })
    expect([limited.status, limited.body.code, Number(limited.headers["retry-after"])]).toEqual([429, 429, 20])
    expect((await request(port, { path: "/api/v1/tasks", key })).status).toBe(200)
    await stop(server, "SIGTERM")
  })
})
