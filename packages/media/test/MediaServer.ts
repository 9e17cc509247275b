/**
 * Loopback http and https servers for the media tests: the fixtures (always with a lying
 * Content-Type), redirects, an announced size, an endless body, silence and a stalled body.
 * The https one has the fixture certificate of media.example.test.
 */
import { Effect, Layer } from "effect"
import { Outbound } from "@mediagate/core"
import { readFileSync } from "node:fs"
import * as Http from "node:http"
import * as Https from "node:https"
import type { AddressInfo } from "node:net"

const here = new URL("./fixtures/", import.meta.url)

/** The bytes of a fixture file. */
export const fixture = (name: string): Uint8Array => new Uint8Array(readFileSync(new URL(name, here)))

/** Every media fixture and what a probe must find in it. */
export const fixtures = [
  { file: "image-64x48.jpg", kind: "image", format: "jpeg", contentType: "image/jpeg" },
  { file: "image-64x48.png", kind: "image", format: "png", contentType: "image/png" },
  { file: "image-64x48.webp", kind: "image", format: "webp", contentType: "image/webp" },
  { file: "image-64x48.gif", kind: "image", format: "gif", contentType: "image/gif" },
  { file: "image-64x48.bmp", kind: "image", format: "bmp", contentType: "image/bmp" },
  { file: "video-3s.mp4", kind: "video", format: "mp4", contentType: "video/mp4", durationSeconds: 3 },
  { file: "video-3s-fragmented.mp4", kind: "video", format: "mp4", contentType: "video/mp4", durationSeconds: 3 },
  { file: "video-2s.mov", kind: "video", format: "mov", contentType: "video/quicktime", durationSeconds: 2 },
  { file: "video-1s.m4v", kind: "video", format: "m4v", contentType: "video/x-m4v", durationSeconds: 1 },
  { file: "audio-4s.mp3", kind: "audio", format: "mp3", contentType: "audio/mpeg", durationSeconds: 4 },
  { file: "audio-4s-noid3.mp3", kind: "audio", format: "mp3", contentType: "audio/mpeg", durationSeconds: 4 },
  { file: "audio-1.5s.wav", kind: "audio", format: "wav", contentType: "audio/wav", durationSeconds: 1.5 }
] as const

/** A Content-Type no fixture is, so that a right answer can only come from the bytes. */
export const lyingContentType = "text/html; charset=utf-8"

/**
 * Answers by path:
 * - `/files/<name>`: the fixture, with Content-Length (`?chunked`: without it);
 * - `/redirect/<n>`: a relative redirect to `/redirect/<n-1>`; `/redirect/0` is the PNG;
 * - `/to?location=<url>`: a 302 to the given Location;
 * - `/status/<code>`: that status, no body;
 * - `/bytes/<n>`: n zero bytes;
 * - `/announced/<n>`: headers announcing n bytes, then nothing;
 * - `/endless`: a body without Content-Length that never ends (stops when the client closes);
 * - `/silent`: no answer at all;
 * - `/stalled`: headers and a few bytes, then nothing.
 */
const handler = (log: { readonly received: Array<string>; readonly closedEarly: Array<string> }) =>
(request: Http.IncomingMessage, response: Http.ServerResponse) => {
  const url = new URL(request.url ?? "/", "http://server")
  const path = url.pathname
  log.received.push(`${path}${url.search}`)
  response.on("close", () => {
    if (!response.writableFinished) log.closedEarly.push(path)
  })
  const [, route, argument = ""] = path.split("/")
  switch (route) {
    case "files": {
      const bytes = fixture(argument)
      const headers: Record<string, string> = { "content-type": lyingContentType }
      if (!url.searchParams.has("chunked")) headers["content-length"] = String(bytes.length)
      return response.writeHead(200, headers).end(bytes)
    }
    case "redirect": {
      const left = Number(argument)
      return left === 0
        ? response.writeHead(200).end(fixture("image-64x48.png"))
        : response.writeHead(302, { location: `/redirect/${left - 1}` }).end()
    }
    case "to":
      return response.writeHead(302, { location: url.searchParams.get("location") ?? "" }).end()
    case "status":
      return response.writeHead(Number(argument)).end()
    case "bytes":
      return response.writeHead(200, { "content-length": argument }).end(new Uint8Array(Number(argument)))
    case "announced":
      return response.writeHead(200, { "content-length": argument }).flushHeaders()
    case "endless": {
      response.writeHead(200, { "content-type": "video/mp4" })
      const pump = () => {
        if (response.destroyed) return
        response.write(new Uint8Array(1024), () => setImmediate(pump))
      }
      return pump()
    }
    case "silent":
      return
    case "stalled":
      return response.writeHead(200, { "content-length": "1000" }).write(new Uint8Array(100))
    default:
      return response.writeHead(404).end()
  }
}

/** The servers and what they received; `start` and `stop` them in beforeAll and afterAll. */
export const mediaServer = () => {
  const log = { received: [] as Array<string>, closedEarly: [] as Array<string> }
  const http = Http.createServer(handler(log))
  const https = Https.createServer({
    key: readFileSync(new URL("tls-key.pem", here)),
    cert: readFileSync(new URL("tls-cert.pem", here))
  }, handler(log))
  const port = (server: Http.Server) => (server.address() as AddressInfo).port
  const listen = (server: Http.Server) => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const close = (server: Http.Server) => {
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  }
  return {
    ...log,
    /** The http server's port. */
    port: () => port(http),
    /** The https server's port. */
    tlsPort: () => port(https),
    /** `http://127.0.0.1:<port><path>`. */
    url: (path: string) => `http://127.0.0.1:${port(http)}${path}`,
    /** The certificate the https server presents, for media.example.test. */
    ca: readFileSync(new URL("tls-cert.pem", here), "utf8"),
    start: () => Promise.all([listen(http), listen(https)]),
    stop: () => Promise.all([close(http), close(https)])
  }
}

/** A resolver answering `answers[n]` on its n-th call (the last one repeats), counting calls. */
export const scriptedResolver = (...answers: ReadonlyArray<ReadonlyArray<string>>) => {
  const calls: Array<string> = []
  const layer = Layer.succeed(Outbound.Resolver, {
    resolve: (hostname) =>
      Effect.sync(() => {
        calls.push(hostname)
        return answers[Math.min(calls.length, answers.length) - 1] ?? []
      })
  })
  return { calls, layer }
}

/** Lets real I/O happen: event-loop turns, not timed sleeps. */
export const until = (done: () => boolean) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 2_000 && !done(); turn++) {
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
    if (!done()) return yield* Effect.dieMessage("condition not reached")
  })
