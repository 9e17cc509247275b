/**
 * Result files served like a CDN, over a real loopback server: content-addressed URLs,
 * content types, validators, caching, HEAD, 304, byte ranges and 416, on the memory, file
 * and S3 stores alike (S3 on s3rver on loopback); on the
 * file store, retention and a media folder that vanishes.
 */
import { HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { Ids, MediaError } from "@mediagate/core"
import { MediaStore } from "@mediagate/core"
import { Backends, Deployment } from "@mediagate/server"
import { MediagateHttp, Routes } from "@mediagate/http"
import { FileMediaStore } from "@mediagate/media"
import { S3MediaStore } from "@mediagate/media/s3"
import { MemoryMediaStore } from "@mediagate/store-memory"
import { Mp4, Png } from "@mediagate/upstream"
import { Effect, HashMap, Layer, Logger, TestClock } from "effect"
import { createHash } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type RunningS3rver, startS3rver } from "../packages/media/test/S3rver.js"

const root = mkdtempSync(join(tmpdir(), "mediagate-serving-"))
let s3: RunningS3rver | undefined
beforeAll(async () => {
  s3 = await startS3rver()
})
afterAll(async () => {
  await s3?.close()
  rmSync(root, { recursive: true, force: true })
})
let folders = 0
const freshFolder = () => join(root, `media-${++folders}`)

type MediaLayer = (baseUrl: string) => Layer.Layer<MediaStore.MediaStore, MediaError, Ids.Ids>

/** The standalone composition over memory stores with `media` for files, which the test can reach too. */
const serverWith = (media: MediaLayer) =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      const publicUrl = `http://127.0.0.1:${server.address._tag === "TcpAddress" ? server.address.port : 0}`
      return MediagateHttp.serve.pipe(
        Layer.provideMerge(
          Deployment.services({
            simulatorProfile: "instant",
            allowPrivateUrls: false,
            backends: { ...Backends.memoryBackends({ publicUrl }, []), media: media(`${publicUrl}${Routes.mediaPrefix}`) }
          })
        )
      )
    })
  ).pipe(Layer.provideMerge(NodeHttpServer.layerTest))

/** Stores bytes through the server's own MediaStore; the path of the URL it gives. */
const store = (bytes: Uint8Array, extension: string) =>
  Effect.flatMap(MediaStore.MediaStore, (media) => media.put({ bytes, contentType: "application/octet-stream", extension })).pipe(
    Effect.map((url) => new URL(url).pathname)
  )

const send = (request: HttpClientRequest.HttpClientRequest) =>
  Effect.gen(function*() {
    const response = yield* (yield* HttpClient.HttpClient).execute(request)
    const body = Buffer.from(yield* response.arrayBuffer)
    return { status: response.status, headers: response.headers, body }
  })

const get = (path: string, headers: Record<string, string> = {}) => send(HttpClientRequest.get(path).pipe(HttpClientRequest.setHeaders(headers)))

const envelopeOf = (answer: { readonly headers: Record<string, string>; readonly body: Buffer }) => {
  expect(answer.headers["content-type"]).toMatch(/^application\/json/)
  return JSON.parse(answer.body.toString("utf8")) as unknown
}

const hashOf = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex").slice(0, 32)

const png = Png.encodePng({ width: 64, height: 48, seed: 7 })
/** 1.4 MB: ranges cross the chunks the file store reads. */
const mp4 = Mp4.encodeMp4({ width: 1280, height: 720, seconds: 5, seed: 1 })

const stores: ReadonlyArray<readonly [string, () => MediaLayer]> = [
  ["memory", () => (baseUrl) => MemoryMediaStore.layer({ baseUrl })],
  ["file", () => {
    const directory = freshFolder()
    return (baseUrl) => FileMediaStore.layerWith({ directory, baseUrl })
  }],
  ["S3 (s3rver)", () => {
    const prefix = `serving-${++folders}/`
    return (baseUrl) => S3MediaStore.layerWith({ bucket: s3!.bucket, prefix, client: s3!.client, baseUrl })
  }]
]

stores.forEach(([label, media]) =>
  describe(`/media/<key> on the ${label} store`, () => {
    const withServer = <A, E, R>(effect: Effect.Effect<A, E, R>) => effect.pipe(Effect.provide(serverWith(media())))

    it.effect("the same bytes stored twice are one URL; GET serves them with type, length, ETag and a year of caching", () =>
      withServer(Effect.gen(function*() {
        const path = yield* store(png, "png")
        expect(yield* store(Uint8Array.from(png), "png")).toBe(path)
        expect(yield* store(Png.encodePng({ width: 64, height: 48, seed: 8 }), "png")).not.toBe(path)
        expect(path).toBe(`/media/${hashOf(png)}.png`)

        const answer = yield* get(path)
        expect(answer.status).toBe(200)
        expect(answer.headers).toMatchObject({
          "content-type": "image/png",
          "content-length": String(png.length),
          etag: `"${hashOf(png)}"`,
          "cache-control": "public, max-age=31536000, immutable",
          "accept-ranges": "bytes"
        })
        expect(answer.body.equals(png)).toBe(true)
        expect(Png.readPngSize(answer.body)).toEqual({ width: 64, height: 48 })
      })))

    it.effect("each extension is served with its content type", () =>
      withServer(Effect.gen(function*() {
        const types = {
          jpg: "image/jpeg",
          jpeg: "image/jpeg",
          webp: "image/webp",
          gif: "image/gif",
          mp4: "video/mp4",
          mov: "video/quicktime",
          mp3: "audio/mpeg",
          wav: "audio/wav"
        }
        for (const [extension, contentType] of Object.entries(types)) {
          const answer = yield* get(yield* store(new TextEncoder().encode(`a ${extension} file`), extension))
          expect([extension, answer.status, answer.headers["content-type"]]).toEqual([extension, 200, contentType])
        }
      })))

    it.effect("HEAD answers GET's headers without the body", () =>
      withServer(Effect.gen(function*() {
        const path = yield* store(mp4, "mp4")
        const answer = yield* send(HttpClientRequest.head(path))
        expect(answer.status).toBe(200)
        expect(answer.headers).toMatchObject({
          "content-type": "video/mp4",
          "content-length": String(mp4.length),
          etag: `"${hashOf(mp4)}"`,
          "accept-ranges": "bytes"
        })
        expect(answer.body.length).toBe(0)
      })))

    it.effect("If-None-Match naming the ETag is 304 without a body; another tag gets the file", () =>
      withServer(Effect.gen(function*() {
        const path = yield* store(png, "png")
        const etag = `"${hashOf(png)}"`
        for (const header of [etag, `W/${etag}`, `"other", ${etag}`, "*"]) {
          const answer = yield* get(path, { "if-none-match": header })
          expect([header, answer.status, answer.body.length]).toEqual([header, 304, 0])
          expect(answer.headers).toMatchObject({ etag, "cache-control": "public, max-age=31536000, immutable" })
        }
        const other = yield* get(path, { "if-none-match": `"${"0".repeat(32)}"` })
        expect(other.status).toBe(200)
        expect(other.body.equals(png)).toBe(true)
      })))

    it.effect("a single byte range is 206 with exactly those bytes: start-end, open-ended and suffix", () =>
      withServer(Effect.gen(function*() {
        const path = yield* store(mp4, "mp4")
        const size = mp4.length
        const cases: ReadonlyArray<readonly [string, number, number]> = [
          ["bytes=0-99", 0, 99],
          ["bytes=65000-200000", 65_000, 200_000],
          [`bytes=1000000-`, 1_000_000, size - 1],
          ["bytes=-500", size - 500, size - 1],
          [`bytes=${size - 10}-${size + 1000}`, size - 10, size - 1],
          [`bytes=-${size + 5}`, 0, size - 1]
        ]
        for (const [range, start, end] of cases) {
          const answer = yield* get(path, { range })
          expect([range, answer.status]).toEqual([range, 206])
          expect(answer.headers).toMatchObject({
            "content-type": "video/mp4",
            "content-range": `bytes ${start}-${end}/${size}`,
            "content-length": String(end - start + 1),
            etag: `"${hashOf(mp4)}"`
          })
          expect(answer.body.equals(mp4.subarray(start, end + 1))).toBe(true)
        }
        // The start of a real MP4 is its ftyp box.
        expect((yield* get(path, { range: "bytes=4-7" })).body.toString("latin1")).toBe("ftyp")
      })))

    it.effect("a range past the end is 416 with Content-Range bytes */size, in the envelope", () =>
      withServer(Effect.gen(function*() {
        const path = yield* store(png, "png")
        for (const range of [`bytes=${png.length}-`, `bytes=${png.length + 10}-${png.length + 20}`, "bytes=-0"]) {
          const answer = yield* get(path, { range })
          expect([range, answer.status]).toEqual([range, 416])
          expect(answer.headers["content-range"]).toBe(`bytes */${png.length}`)
          expect(envelopeOf(answer)).toEqual({ code: 416, msg: "range not satisfiable" })
        }
      })))

    it.effect("several ranges, a malformed range, or If-Range naming another version get the whole file", () =>
      withServer(Effect.gen(function*() {
        const path = yield* store(png, "png")
        for (
          const headers of [
            { range: "bytes=0-1,5-9" },
            { range: "bytes=9-5" },
            { range: "items=0-5" },
            { range: "bytes=0-5", "if-range": `"${"0".repeat(32)}"` }
          ]
        ) {
          const answer = yield* get(path, headers)
          expect([headers, answer.status, answer.headers["content-range"]]).toEqual([headers, 200, undefined])
          expect(answer.body.equals(png)).toBe(true)
        }
        const ranged = yield* get(path, { range: "bytes=0-5", "if-range": `"${hashOf(png)}"` })
        expect(ranged.status).toBe(206)
      })))

    it.effect("an unknown key, or a name that is not a key, is the 404 envelope", () =>
      withServer(Effect.gen(function*() {
        yield* store(png, "png")
        for (const path of [`/media/${"0".repeat(32)}.png`, `/media/${hashOf(png)}.txt`, "/media/secret.txt", `/media/${hashOf(png).toUpperCase()}.png`]) {
          const answer = yield* get(path)
          expect([path, answer.status]).toEqual([path, 404])
          expect(envelopeOf(answer)).toEqual({ code: 404, msg: `not found: ${path}` })
        }
      })))
  })
)

/** Log lines with their level, first message part and annotations. */
const captureLogs = () => {
  const lines: Array<{ level: string; message: string; annotations: Record<string, unknown> }> = []
  const logger = Logger.make(({ annotations, logLevel, message }) =>
    void lines.push({
      level: logLevel.label,
      message: String(Array.isArray(message) ? message[0] : message),
      annotations: Object.fromEntries(HashMap.toEntries(annotations))
    })
  )
  return { lines, layer: Logger.add(logger) }
}

describe("/media/<key> on the file store, over time and failures", () => {
  it.effect("the sweep deletes only files older than the retention (by the Clock); a deleted file is 404", () => {
    const directory = freshFolder()
    return Effect.gen(function*() {
      // Seconds rather than days: the whole service runs here, and its engine wakes with the Clock.
      const old = yield* store(png, "png")
      yield* TestClock.adjust("600 millis")
      const young = yield* store(mp4, "mp4")
      yield* TestClock.adjust("600 millis")
      expect(yield* FileMediaStore.sweep({ directory, retention: "1 second" })).toBe(1)
      expect((yield* get(old)).status).toBe(404)
      expect(envelopeOf(yield* get(old))).toEqual({ code: 404, msg: `not found: ${old}` })
      expect((yield* get(young)).status).toBe(200)
    }).pipe(Effect.provide(serverWith((baseUrl) => FileMediaStore.layerWith({ directory, baseUrl }))))
  })

  it.effect("the media folder removed under the running server: 503 with Retry-After in the envelope, a warning naming the key", () => {
    const directory = freshFolder()
    const logs = captureLogs()
    return Effect.gen(function*() {
      const path = yield* store(png, "png")
      rmSync(directory, { recursive: true, force: true })
      for (const request of [HttpClientRequest.get(path), HttpClientRequest.get(path).pipe(HttpClientRequest.setHeader("range", "bytes=0-9"))]) {
        const answer = yield* send(request)
        expect(answer.status).toBe(503)
        expect(answer.headers["retry-after"]).toBe("5")
        expect(envelopeOf(answer)).toEqual({ code: 503, msg: "media storage is unavailable; try again later" })
        expect(answer.body.toString("utf8")).not.toMatch(/ENOENT|at .*\.ts|stack|media-/)
      }
      const key = path.split("/").pop()
      const warnings = logs.lines.filter((line) => line.annotations["key"] === key)
      expect(warnings.length).toBeGreaterThanOrEqual(2)
      expect(warnings.every((line) => line.level === "WARN")).toBe(true)
    }).pipe(
      Effect.provide(serverWith((baseUrl) => FileMediaStore.layerWith({ directory, baseUrl }))),
      Effect.provide(logs.layer)
    )
  })
})

describe("/media/<key> on the S3 store with presigned redirects", () => {
  /** A GET of `path` on the test server, redirects not followed. */
  const fetchManual = (path: string, headers: Record<string, string> = {}) =>
    Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      const port = server.address._tag === "TcpAddress" ? server.address.port : 0
      return yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}${path}`, { headers, redirect: "manual" }))
    })

  it.effect("a stored file is a 302 to a presigned URL of the bucket, cached for half its life; the URL serves the bytes and ranges", () => {
    const prefix = `presigned-${++folders}/`
    const test = Effect.gen(function*() {
      const path = yield* store(mp4, "mp4")
      const answer = yield* fetchManual(path)
      expect(answer.status).toBe(302)
      expect(answer.headers.get("cache-control")).toBe("public, max-age=1800")
      const location = new URL(answer.headers.get("location") ?? "")
      expect(`${location.origin}${location.pathname}`).toBe(`${s3!.endpoint}/${s3!.bucket}/${prefix}${path.split("/").pop()}`)
      expect(location.searchParams.get("X-Amz-Expires")).toBe("3600")
      const bytes = yield* Effect.promise(() => fetch(location).then((response) => response.arrayBuffer()))
      expect(Buffer.from(bytes).equals(mp4)).toBe(true)
      const part = yield* Effect.promise(() => fetch(location, { headers: { range: "bytes=4-7" } }))
      expect([part.status, Buffer.from(yield* Effect.promise(() => part.arrayBuffer())).toString("latin1")]).toEqual([206, "ftyp"])

      // What the route knows stays ours: a 304 for the ETag, the 404 envelope for a missing key.
      const cached = yield* fetchManual(path, { "if-none-match": `"${hashOf(mp4)}"` })
      expect(cached.status).toBe(304)
      const missing = yield* fetchManual(`/media/${"0".repeat(32)}.mp4`)
      expect(missing.status).toBe(404)
    }).pipe(
      Effect.provide(serverWith((baseUrl) =>
        S3MediaStore.layerWith({ bucket: s3!.bucket, prefix, client: s3!.client, baseUrl, serve: "presigned" })
      ))
    )
    // Presigned URLs are signed at the Clock's now, and s3rver refuses one that has expired:
    // the Clock is set to the real time before the service starts (the engine runs on it).
    return Effect.zipRight(TestClock.setTime(Date.now()), test)
  })
})
