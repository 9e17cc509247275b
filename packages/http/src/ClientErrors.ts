/**
 * Node's own answers, in the envelope. Requests node:http cannot parse (headers over its
 * size limit, control characters in the request line or headers, a method its parser does
 * not know, a request that takes too long to arrive) never reach the app: Node answers them
 * itself with a bare status line, or closes the connection (CONNECT). `install` answers
 * them as the app would: `{code, msg}` JSON, with `Connection: close`, after which the
 * socket is closed, since its stream can no longer be read.
 */
import type * as Http from "node:http"
import { STATUS_CODES } from "node:http"
import type { Duplex } from "node:stream"
import { allowedMethods, notFoundMessage } from "./Paths.js"

/** What a client error answers. */
export interface Answer {
  readonly code: number
  readonly msg: string
  readonly headers?: Readonly<Record<string, string>>
}

const token = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}$/

/** A method on a path: 405 with Allow where the path is known, 404 elsewhere. */
export const methodAnswer = (method: string, target: string): Answer => {
  const path = target.split("?")[0] ?? ""
  const allowed = path.startsWith("/") ? allowedMethods(path) : []
  const named = token.test(method) ? `method ${method}` : "this method"
  return allowed.length > 0
    ? { code: 405, msg: `${named} is not allowed here; use ${allowed.join(" or ")}`, headers: { allow: allowed.join(", ") } }
    : { code: 404, msg: notFoundMessage(path) }
}

/** The answer to a parse error of node:http (`clientError`). */
export const answerFor = (error: Error & { readonly code?: string; readonly rawPacket?: unknown }): Answer => {
  switch (error.code) {
    case "HPE_HEADER_OVERFLOW":
      return { code: 431, msg: "request headers are too large" }
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return { code: 408, msg: "the request took too long to arrive" }
    case "HPE_INVALID_METHOD": {
      // The request line as sent: the method the parser refused and the path it was for.
      const raw = error.rawPacket instanceof Uint8Array ? Buffer.from(error.rawPacket).subarray(0, 8192).toString("latin1") : ""
      const line = /^([^ \r\n]+) ([^ \r\n]+) HTTP\/\d\.\d\r?\n/.exec(raw)
      return line === null ? { code: 400, msg: "the request could not be read" } : methodAnswer(line[1]!, line[2]!)
    }
    default:
      return { code: 400, msg: "the request could not be read" }
  }
}

/** A whole HTTP/1.1 response carrying the envelope, for a socket no response object is left on. */
export const rawResponse = (answer: Answer): string => {
  const body = JSON.stringify({ code: answer.code, msg: answer.msg })
  const headers = {
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(body)),
    connection: "close",
    ...answer.headers
  }
  return [
    `HTTP/1.1 ${answer.code} ${STATUS_CODES[answer.code] ?? "Error"}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    "",
    body
  ].join("\r\n")
}

/** Writes `answer` on the socket if it can still take one, then closes it. */
const answerOn = (socket: Duplex, answer: Answer) => {
  // An answer already begun on this connection cannot be followed by another.
  const current = (socket as { readonly _httpMessage?: { readonly headersSent?: boolean } })._httpMessage
  if (!socket.writable || current?.headersSent === true) return void socket.destroy()
  socket.once("finish", () => socket.destroy())
  socket.end(rawResponse(answer))
}

/** The `clientError` listener: the envelope instead of Node's bare status line. */
export const onClientError = (error: Error & { readonly code?: string }, socket: Duplex): void => {
  // The client is gone: no one to answer.
  if (error.code === "ECONNRESET" || error.code === "EPIPE") return void socket.destroy()
  answerOn(socket, answerFor(error))
}

/** The `connect` listener: CONNECT is no method of ours (Node would close the connection without a word). */
export const onConnect = (request: Http.IncomingMessage, socket: Duplex): void =>
  answerOn(socket, methodAnswer("CONNECT", request.url ?? ""))

/** The `checkExpectation` listener: an `Expect` other than 100-continue is 417 in the envelope. */
export const onCheckExpectation = (_request: Http.IncomingMessage, response: Http.ServerResponse): void => {
  const body = JSON.stringify({ code: 417, msg: "only Expect: 100-continue is supported" })
  response.writeHead(417, { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), connection: "close" })
  response.end(body)
}

/**
 * Answers node:http's own errors on `server` in the envelope. Every request the server
 * takes is concerned, not only mediagate's: a host embedding the API on a server of its
 * own decides whether to call it. Answers a function that removes the listeners.
 */
export const install = (server: Http.Server): (() => void) => {
  server.on("clientError", onClientError)
  server.on("connect", onConnect)
  server.on("checkExpectation", onCheckExpectation)
  return () => {
    server.off("clientError", onClientError)
    server.off("connect", onConnect)
    server.off("checkExpectation", onCheckExpectation)
  }
}
