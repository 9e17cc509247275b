/**
 * Compressed answers over a real loopback server, read with node:http (which, unlike fetch,
 * leaves the bytes as sent): the static pages (/docs, /playground, /openapi.json) and large
 * JSON answers in Brotli or gzip as Accept-Encoding asks (q-values honoured), with
 * `Vary: Accept-Encoding`; the static pages with an ETag, a day's Cache-Control and 304.
 * Events streams and result files, ranged or whole, are never compressed.
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { MediaStore } from "@mediagate/core"
import { MediagateHttp } from "@mediagate/http"
import { Backends, Deployment } from "@mediagate/server"
import { Effect, Layer, Redacted } from "effect"
import type { IncomingHttpHeaders } from "node:http"
import { request } from "node:http"
import { brotliDecompressSync, gunzipSync } from "node:zlib"
import { apiKey, testCredits } from "./support.js"

/** The standalone composition over memory backends on a loopback server, its media store reachable by the test. */
const served = MediagateHttp.serve.pipe(
  Layer.provideMerge(Deployment.services({
    simulatorProfile: "instant",
    allowPrivateUrls: false,
    backends: Backends.memoryBackends({ publicUrl: "http://127.0.0.1:1" }, [{ id: "acct_a", name: "a", apiKey: Redacted.make(apiKey), credits: testCredits }])
  })),
  Layer.provideMerge(NodeHttpServer.layerTest)
)

interface Raw {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  /** The bytes as sent. */
  readonly bytes: Buffer
}

const port = Effect.map(HttpServer.HttpServer, (server) => (server.address._tag === "TcpAddress" ? server.address.port : 0))

/** A GET with `headers`, its answer's bytes as they came over the wire. */
const get = (path: string, headers: Record<string, string> = {}, method = "GET") =>
  Effect.flatMap(port, (at) =>
    Effect.async<Raw>((resume) => {
      const sent = request({ host: "127.0.0.1", port: at, path, method, headers: { authorization: `Bearer ${apiKey}`, ...headers } }, (response) => {
        const chunks: Array<Buffer> = []
        response.on("data", (chunk: Buffer) => chunks.push(chunk))
        response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, headers: response.headers, bytes: Buffer.concat(chunks) })))
      })
      sent.end()
    }))

/** The bytes of an answer, decoded as its Content-Encoding says. */
const decoded = (answer: Raw): Buffer =>
  answer.headers["content-encoding"] === "br"
    ? brotliDecompressSync(answer.bytes)
    : answer.headers["content-encoding"] === "gzip"
    ? gunzipSync(answer.bytes)
    : answer.bytes

describe("compression and caching", () => {
  it.layer(served)((it) => {
    it.effect("the static pages: Brotli or gzip as asked, a fraction of their size, the same bytes once decoded", () =>
      Effect.gen(function*() {
        for (const path of ["/docs", "/playground", "/console", "/openapi.json"]) {
          const plain = yield* get(path)
          expect(plain.status).toBe(200)
          expect(plain.headers["content-encoding"]).toBeUndefined()
          expect(plain.headers["vary"]).toMatch(/Accept-Encoding/i)
          for (const [accept, encoding] of [["gzip, deflate, br", "br"], ["gzip", "gzip"], ["br;q=0.5, gzip", "gzip"], ["*", "br"]] as const) {
            const packed = yield* get(path, { "accept-encoding": accept })
            expect({ path, accept, encoding: packed.headers["content-encoding"] }).toEqual({ path, accept, encoding })
            expect(packed.headers["vary"]).toMatch(/Accept-Encoding/i)
            expect(Number(packed.headers["content-length"])).toBe(packed.bytes.length)
            expect(decoded(packed).equals(plain.bytes)).toBe(true)
            expect(packed.bytes.length).toBeLessThan(plain.bytes.length / 2)
          }
          // Refused encodings, and no usable one: the page as it is.
          for (const accept of ["identity", "br;q=0, gzip;q=0", "deflate"]) {
            const sent = yield* get(path, { "accept-encoding": accept })
            expect({ path, accept, encoding: sent.headers["content-encoding"] }).toEqual({ path, accept, encoding: undefined })
            expect(sent.bytes.equals(plain.bytes)).toBe(true)
          }
        }
        const docs = yield* get("/docs", { "accept-encoding": "br" })
        const docsPlain = yield* get("/docs")
        console.log(`compression: /docs ${docsPlain.bytes.length} bytes, ${docs.bytes.length} in Brotli, ${(yield* get("/docs", { "accept-encoding": "gzip" })).bytes.length} in gzip`)
        expect(docsPlain.bytes.length).toBeGreaterThan(1_000_000)
        expect(docs.bytes.length).toBeLessThan(docsPlain.bytes.length / 3)
      }))

    it.effect("the static pages carry an ETag and a day's Cache-Control; If-None-Match that names it is 304 with no body", () =>
      Effect.gen(function*() {
        for (const path of ["/docs", "/playground", "/console", "/openapi.json"]) {
          const first = yield* get(path, { "accept-encoding": "gzip" })
          const etag = first.headers["etag"]
          expect(etag).toMatch(/^W\/"[A-Za-z0-9_-]+"$/)
          expect(first.headers["cache-control"]).toBe("public, max-age=86400")
          // The same tag whatever the encoding: one representation, compared weakly.
          expect((yield* get(path)).headers["etag"]).toBe(etag)
          const tag = etag ?? ""
          for (const [accept, ifNoneMatch] of [["gzip", tag], ["br", tag.replace(/^W\//, "")], ["", `"other", ${tag}`]] as const) {
            const again = yield* get(path, { "if-none-match": ifNoneMatch, ...(accept === "" ? {} : { "accept-encoding": accept }) })
            expect({ path, ifNoneMatch, status: again.status, length: again.bytes.length }).toEqual({ path, ifNoneMatch, status: 304, length: 0 })
            expect(again.headers["etag"]).toBe(etag)
            expect(again.headers["cache-control"]).toBe("public, max-age=86400")
          }
          expect((yield* get(path, { "if-none-match": "\"stale\"" })).status).toBe(200)
        }
        // HEAD: the headers of GET, no body.
        const head = yield* get("/docs", { "accept-encoding": "gzip" }, "HEAD")
        expect(head.status).toBe(200)
        expect(head.bytes.length).toBe(0)
      }))

    it.effect("a large JSON answer is compressed; a small one is not", () =>
      Effect.gen(function*() {
        const body = JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "a kite over the sea, with a long tail" } })
        for (let i = 0; i < 12; i++) {
          yield* Effect.flatMap(port, (at) =>
            Effect.promise(() =>
              fetch(`http://127.0.0.1:${at}/api/v1/task/submit`, {
                method: "POST",
                headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
                body
              })
            ))
        }
        const plain = yield* get("/api/v1/tasks?limit=100")
        expect(plain.bytes.length).toBeGreaterThan(2048)
        const packed = yield* get("/api/v1/tasks?limit=100", { "accept-encoding": "gzip, br" })
        expect(packed.headers["content-encoding"]).toBe("br")
        expect(packed.headers["vary"]).toMatch(/Accept-Encoding/i)
        expect(packed.headers["etag"]).toBeUndefined()
        // The same tasks (their states may have moved on between the two requests: the engine runs).
        const ids = (bytes: Buffer) => (JSON.parse(bytes.toString("utf8")) as { data: { tasks: Array<{ taskId: string }> } }).data.tasks.map((task) => task.taskId)
        expect(ids(decoded(packed))).toEqual(ids(plain.bytes))
        expect(ids(plain.bytes)).toHaveLength(12)
        expect(packed.bytes.length).toBeLessThan(plain.bytes.length / 2)
        const small = yield* get("/api/v1/task/0190c8a4-0000-7000-8000-000000000000", { "accept-encoding": "gzip, br" })
        expect(small.status).toBe(404)
        expect(small.headers["content-encoding"]).toBeUndefined()
      }))

    it.effect("an events stream is not compressed and streams: its first event arrives while it stays open", () =>
      Effect.gen(function*() {
        const at = yield* port
        const created = yield* Effect.promise(() =>
          fetch(`http://127.0.0.1:${at}/api/v1/task/submit`, {
            method: "POST",
            headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
            body: JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "x".repeat(2000) } })
          }).then((response) => response.json() as Promise<{ data: { taskId: string } }>)
        )
        const first = yield* Effect.async<{ headers: IncomingHttpHeaders; text: string }>((resume) => {
          const sent = request({
            host: "127.0.0.1",
            port: at,
            path: `/api/v1/task/${created.data.taskId}/events`,
            headers: { authorization: `Bearer ${apiKey}`, "accept-encoding": "gzip, br" }
          }, (response) => {
            response.once("data", (chunk: Buffer) => {
              resume(Effect.succeed({ headers: response.headers, text: chunk.toString("utf8") }))
              sent.destroy()
            })
          })
          sent.on("error", () => {})
          sent.end()
        })
        expect(first.headers["content-type"]).toMatch(/^text\/event-stream/)
        expect(first.headers["content-encoding"]).toBeUndefined()
        expect(first.text).toMatch(/^event: task\ndata: \{/)
      }))

    it.effect("result files, whole or ranged, are sent as stored", () =>
      Effect.gen(function*() {
        // Highly compressible bytes, which are still sent as they are.
        const bytes = new Uint8Array(8000).fill(7)
        const url = yield* Effect.flatMap(MediaStore.MediaStore, (media) => media.put({ bytes, contentType: "audio/wav", extension: "wav" }))
        const key = url.split("/").pop()!
        const whole = yield* get(`/media/${key}`, { "accept-encoding": "gzip, br" })
        expect(whole.status).toBe(200)
        expect(whole.headers["content-encoding"]).toBeUndefined()
        expect(whole.bytes.equals(Buffer.from(bytes))).toBe(true)
        const part = yield* get(`/media/${key}`, { "accept-encoding": "gzip, br", range: "bytes=10-19" })
        expect(part.status).toBe(206)
        expect(part.headers["content-encoding"]).toBeUndefined()
        expect(part.bytes.equals(Buffer.from(bytes.subarray(10, 20)))).toBe(true)
      }))
  })
})
