/**
 * A loopback HTTP server for protocol fakes: each fake gives its routes; the server records
 * every request (method, path, headers, body) and can be told to answer the next requests
 * with a failure (a status, headers and body), to hang, or to hold their answer (made when
 * the request came) for a while.
 */
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

export interface Recorded {
  readonly method: string
  readonly path: string
  /** The query string as sent (`?logs=1`), or "". */
  readonly query: string
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

export interface Reply {
  readonly status: number
  /** JSON, a text, or bytes sent as they are. */
  readonly body?: unknown
  readonly headers?: Record<string, string>
}

export type Route = (request: Recorded, url: URL) => Reply | undefined

export interface FakeServer {
  readonly url: string
  readonly requests: Array<Recorded>
  /** Answers the next `times` requests (whose path matches, when given) with `reply`, or hangs them. */
  readonly failNext: (reply: Reply | "hang", options?: { times?: number; path?: RegExp }) => void
  /** Sends the answer to the next `times` requests (whose path matches, when given) `ms` after it was made. */
  readonly holdNext: (ms: number, options?: { times?: number; path?: RegExp }) => void
  readonly close: () => Promise<void>
}

export const start = async (route: Route): Promise<FakeServer> => {
  const requests: Array<Recorded> = []
  const failures: Array<{ reply: Reply | "hang"; times: number; path?: RegExp }> = []
  const holds: Array<{ ms: number; times: number; path?: RegExp }> = []
  const hanging = new Set<Http.ServerResponse>()
  const server = Http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const url = new URL(request.url ?? "/", "http://fake")
      const recorded: Recorded = { method: request.method ?? "GET", path: url.pathname, query: url.search, headers: request.headers, body: Buffer.concat(chunks).toString("latin1") }
      requests.push(recorded)
      const failure = failures.find((f) => f.times > 0 && (f.path === undefined || f.path.test(url.pathname)))
      if (failure !== undefined) {
        failure.times--
        if (failure.reply === "hang") return void hanging.add(response)
        return send(response, failure.reply)
      }
      const reply = route(recorded, url) ?? { status: 404, body: { detail: "Not Found" } }
      const hold = holds.find((h) => h.times > 0 && (h.path === undefined || h.path.test(url.pathname)))
      if (hold === undefined) return send(response, reply)
      hold.times--
      hanging.add(response)
      setTimeout(() => {
        hanging.delete(response)
        if (!response.destroyed) send(response, reply)
      }, hold.ms)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    failNext: (reply, options = {}) => {
      failures.push({ reply, times: options.times ?? 1, ...(options.path === undefined ? {} : { path: options.path }) })
    },
    holdNext: (ms, options = {}) => {
      holds.push({ ms, times: options.times ?? 1, ...(options.path === undefined ? {} : { path: options.path }) })
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const response of hanging) response.destroy()
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

const send = (response: Http.ServerResponse, reply: Reply) => {
  // Bytes (a result file) go as they are; anything else as JSON.
  const text = reply.body === undefined ? "" : reply.body instanceof Uint8Array ? reply.body : typeof reply.body === "string" ? reply.body : JSON.stringify(reply.body)
  // A text body is labelled text (a proxy's error page), not JSON a client would fail to parse.
  const contentType = typeof reply.body === "string" ? "text/plain; charset=utf-8" : "application/json"
  response.writeHead(reply.status, { "content-type": contentType, ...reply.headers })
  response.end(text)
}

/** The JSON body of a recorded request. */
export const json = (request: Recorded): any => JSON.parse(request.body)
