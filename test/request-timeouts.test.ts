/**
 * A client that sends its request a byte at a time is answered 408 in the envelope once the
 * deadline of the headers (node's, set by the standalone server's `server`) or of the body
 * (the app's) has passed, and the connection is closed; a submit cut off that way creates
 * nothing. The deadlines are a few hundred milliseconds here and the client a real socket on
 * the loopback: real time passes, under two seconds a case.
 */
import { HttpServer } from "@effect/platform"
import { afterAll, describe, expect, it } from "@effect/vitest"
import * as Server from "@mediagate/example-standalone-server/Server"
import { MediagateHttp, RequestTimeouts } from "@mediagate/http"
import { Backends, Deployment } from "@mediagate/server"
import { Duration, Effect, Layer, Redacted } from "effect"
import { connect } from "node:net"
import { killAll, startServer } from "./standalone-process.js"
import { apiKey, testCredits } from "./support.js"

afterAll(killAll)

const timeouts: RequestTimeouts.Settings = { headers: Duration.millis(300), body: Duration.millis(300) }

/** The API on the standalone server's node:http server, with short deadlines. */
const served = MediagateHttp.serve.pipe(
  Layer.provide(RequestTimeouts.layer(timeouts)),
  Layer.provide(Deployment.services({
    simulatorProfile: "instant",
    allowPrivateUrls: false,
    backends: Backends.memoryBackends({ publicUrl: "http://127.0.0.1:1" }, [
      { id: "acct_test", name: "test", apiKey: Redacted.make(apiKey), credits: testCredits }
    ])
  })),
  Layer.provideMerge(Server.server({ host: "127.0.0.1", port: 0, requestTimeouts: timeouts }))
)

const port = Effect.map(HttpServer.HttpServer, (server) => (server.address._tag === "TcpAddress" ? server.address.port : 0))

interface Exchange {
  /** Everything the server sent, as text. */
  readonly text: string
  /** Milliseconds from the first byte sent until the server closed the connection. */
  readonly closedAfter: number
}

/**
 * Sends `head` at once, then `drip` a byte every 50 ms, until the server closes the
 * connection (or 3 s have passed, when the connection is closed from here).
 */
const slowly = (port: number, head: string, drip: string) =>
  Effect.async<Exchange>((resume) => {
    const started = Date.now()
    const socket = connect(port, "127.0.0.1")
    const received: Array<Buffer> = []
    let sent = 0
    const ticker = setInterval(() => {
      if (sent < drip.length && socket.writable) socket.write(drip[sent++]!)
    }, 50)
    const giveUp = setTimeout(() => socket.destroy(), 3_000)
    socket.on("data", (chunk) => received.push(chunk))
    socket.on("error", () => {})
    socket.on("close", () => {
      clearInterval(ticker)
      clearTimeout(giveUp)
      resume(Effect.succeed({ text: Buffer.concat(received).toString("utf8"), closedAfter: Date.now() - started }))
    })
    socket.write(head)
  })

/** The status, headers (lower-case names) and JSON body of a raw HTTP/1.1 answer. */
const parse = (text: string) => {
  const [head = "", body = ""] = text.split("\r\n\r\n")
  const [statusLine = "", ...lines] = head.split("\r\n")
  const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(":")).toLowerCase(), line.slice(line.indexOf(":") + 1).trim()]))
  return { status: Number(statusLine.split(" ")[1]), headers, body: body === "" ? null : JSON.parse(body) as unknown }
}

const body = JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: `a slow kite ${"x".repeat(100)}` } })

/** The request line and headers of a submit of `body`, with `extra` header lines. */
const submitHead = (extra: ReadonlyArray<string> = []) =>
  [
    "POST /api/v1/task/submit HTTP/1.1",
    "Host: 127.0.0.1",
    `Authorization: Bearer ${apiKey}`,
    "Content-Type: application/json",
    `Content-Length: ${Buffer.byteLength(body)}`,
    ...extra,
    "",
    ""
  ].join("\r\n")

describe("a request sent too slowly", () => {
  it.live("a body sent a byte at a time: 408 in the envelope past the body's deadline, the connection closed, no task created", () =>
    Effect.gen(function*() {
      const at = yield* port
      const exchange = yield* slowly(at, submitHead(), body)
      const answer = parse(exchange.text)
      expect(answer).toEqual({
        status: 408,
        headers: expect.objectContaining({ "content-type": expect.stringMatching(/^application\/json/), connection: "close" }),
        body: { code: 408, msg: "the request body took too long to arrive" }
      })
      expect(exchange.closedAfter).toBeGreaterThanOrEqual(250)
      expect(exchange.closedAfter).toBeLessThan(2_000)
      // Nothing of the cut-off submit was kept.
      const listed = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${at}/api/v1/tasks`, { headers: { authorization: `Bearer ${apiKey}` } }).then((response) => response.json())
      )
      expect(listed).toEqual({ code: 0, msg: "ok", data: expect.objectContaining({ tasks: [] }) })
    }).pipe(Effect.provide(served)))

  it.live("a provider webhook's body sent a byte at a time: the same 408", () =>
    Effect.gen(function*() {
      const payload = JSON.stringify({ request_id: "r1", status: "OK", payload: { images: [] } })
      const head = ["POST /webhooks/fal/some-token HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", `Content-Length: ${payload.length}`, "", ""]
      const exchange = yield* slowly(yield* port, head.join("\r\n"), payload)
      const answer = parse(exchange.text)
      expect({ status: answer.status, connection: answer.headers["connection"], body: answer.body }).toEqual({
        status: 408,
        connection: "close",
        body: { code: 408, msg: "the request body took too long to arrive" }
      })
      expect(exchange.closedAfter).toBeLessThan(2_000)
    }).pipe(Effect.provide(served)))

  it.live("the same body sent within the deadline is accepted", () =>
    Effect.gen(function*() {
      const at = yield* port
      // All but the last two bytes at once, those two 50 ms apart: well within 300 ms.
      const exchange = yield* slowly(at, submitHead(["Connection: close"]) + body.slice(0, -2), body.slice(-2))
      const answer = parse(exchange.text)
      expect(answer.status).toBe(200)
    }).pipe(Effect.provide(served)))

  it.live("headers sent a line at a time: 408 in the envelope past the headers' deadline, the connection closed", () =>
    Effect.gen(function*() {
      const at = yield* port
      const lines = Array.from({ length: 40 }, (_, i) => `X-Slow-${i}: ${i}\r\n`).join("")
      const exchange = yield* slowly(at, "GET /api/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n", lines)
      const answer = parse(exchange.text)
      expect(answer).toEqual({
        status: 408,
        headers: expect.objectContaining({ "content-type": "application/json", connection: "close" }),
        body: { code: 408, msg: "the request took too long to arrive" }
      })
      expect(exchange.closedAfter).toBeGreaterThanOrEqual(250)
      expect(exchange.closedAfter).toBeLessThan(2_000)
    }).pipe(Effect.provide(served)))
})

describe("the standalone server's deadlines (MEDIAGATE_HEADERS_TIMEOUT, MEDIAGATE_BODY_TIMEOUT)", () => {
  it("a body and headers sent a byte at a time are answered 408 past the configured deadlines", { timeout: 30_000 }, async () => {
    const server = await startServer({
      MEDIAGATE_DATABASE_URL: "memory",
      MEDIAGATE_API_KEY: apiKey,
      MEDIAGATE_HEADERS_TIMEOUT: "300ms",
      MEDIAGATE_BODY_TIMEOUT: "300ms"
    })
    const slowBody = parse((await Effect.runPromise(slowly(server.port, submitHead(), body))).text)
    expect({ status: slowBody.status, body: slowBody.body }).toEqual({ status: 408, body: { code: 408, msg: "the request body took too long to arrive" } })
    const slowHeaders = await Effect.runPromise(slowly(server.port, "GET /api/v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n", "X-Slow: 1\r\n".repeat(40)))
    expect(parse(slowHeaders.text).status).toBe(408)
    expect(slowHeaders.closedAfter).toBeLessThan(2_000)
  })
})
