/**
 * The files endpoints (issue 36) black-box over HTTP on a loopback server, on the memory,
 * file and S3 stores, the last twice: on s3rver, and on a bucket of its own on the S3 server
 * at MEDIAGATE_TEST_S3_URL, which checks SigV4 signatures as s3rver does not (Ceph RGW:
 * scripts/ceph/start.sh; skipped when it is not set; the row stores a few hundred KB). Real PNG, JPEG, WebP, MP4 and MOV files uploaded raw and as
 * multipart, served back byte for byte from their URLs; text 415, a cut PNG and MP4 400, too
 * large 413, no key 401, another account's fileId 404, an expired upload 404 (TestClock) and
 * swept, file and metadata; the per-key upload rate 429 (each key of an account has its own).
 */
import { HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import type { MediaError } from "@mediagate/core"
import { Accounts, Files, Ids, MediaStore, Uploads } from "@mediagate/core"
import { FilesHandlers, MediagateHttp, Routes } from "@mediagate/http"
import { FileMediaStore } from "@mediagate/media"
import { S3MediaStore } from "@mediagate/media/s3"
import { Backends, Deployment } from "@mediagate/server"
import { MemoryMediaStore } from "@mediagate/store-memory"
import { Mp4 } from "@mediagate/upstream"
import { Duration, Effect, Layer, Option, Redacted, TestClock } from "effect"
import { createHash } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { checkingS3SkipReason, checkingS3Url, freshCheckingBucket, type TestS3 } from "../packages/media/test/CheckingS3.js"
import { type RunningS3rver, startS3rver } from "../packages/media/test/S3rver.js"
import { until } from "./support.js"

const root = mkdtempSync(join(tmpdir(), "mediagate-files-"))
let s3: RunningS3rver | undefined
let checking: TestS3 | undefined
beforeAll(async () => {
  s3 = await startS3rver()
  if (checkingS3Url !== undefined) checking = await freshCheckingBucket("files")
})
afterAll(async () => {
  await s3?.close()
  await checking?.close()
  rmSync(root, { recursive: true, force: true })
})
let folders = 0

const key = "mg_files_key_0123456789"
const otherKey = "mg_files_other_9876543210"

/** How many uploads the composition's Uploads holds. */
const uploadCount = Effect.flatMap(Uploads.Uploads, (uploads) => uploads.stored(null, 0, Number.MAX_SAFE_INTEGER)).pipe(
  Effect.map(({ count }) => count),
  Effect.orDie
)

type MediaLayer = (baseUrl: string) => Layer.Layer<MediaStore.MediaStore, MediaError, Ids.Ids>

/** The standalone composition over memory stores, `media` for files, and uploads with `settings`. */
const serverWith = (media: MediaLayer, settings: Partial<Files.Settings> = {}, rate: FilesHandlers.UploadRate = Option.none()) =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      const publicUrl = `http://127.0.0.1:${server.address._tag === "TcpAddress" ? server.address.port : 0}`
      const services = Deployment.services({
        simulatorProfile: "instant",
        allowPrivateUrls: false,
        backends: {
          ...Backends.memoryBackends({ publicUrl }, [
            { id: "acct_files", name: "files", apiKey: Redacted.make(key) },
            { id: "acct_other", name: "other", apiKey: Redacted.make(otherKey) }
          ]),
          media: media(`${publicUrl}${Routes.mediaPrefix}`)
        },
        uploads: { ...Files.defaults, ...settings }
      })
      return MediagateHttp.serve.pipe(Layer.provide(Layer.succeed(FilesHandlers.UploadRateLimit, rate)), Layer.provideMerge(services))
    })
  ).pipe(Layer.provideMerge(NodeHttpServer.layerTest))

const fixture = (name: string) => new Uint8Array(readFileSync(join(import.meta.dirname, "../packages/media/test/fixtures", name)))

interface Answer {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: Buffer
}

const send = (request: HttpClientRequest.HttpClientRequest, bearer: string | null = key) =>
  Effect.gen(function*() {
    const authorized = bearer === null ? request : HttpClientRequest.bearerToken(request, bearer)
    const response = yield* (yield* HttpClient.HttpClient).execute(authorized)
    return { status: response.status, headers: response.headers, body: Buffer.from(yield* response.arrayBuffer) } satisfies Answer
  })

const json = (answer: Answer) => JSON.parse(answer.body.toString("utf8")) as { code: number; msg: string; data: Record<string, unknown> }

const uploadRaw = (bytes: Uint8Array, bearer: string | null = key, contentType = "application/octet-stream") =>
  send(HttpClientRequest.post("/api/v1/files").pipe(HttpClientRequest.bodyUint8Array(bytes, contentType)), bearer)

const uploadForm = (bytes: Uint8Array, field = "file") => {
  const form = new FormData()
  form.append("note", "a field that is not the file")
  form.append(field, new Blob([bytes as Uint8Array<ArrayBuffer>]), "input.bin")
  return send(HttpClientRequest.post("/api/v1/files").pipe(HttpClientRequest.bodyFormData(form)))
}

/** The path of a URL the server gave. */
const pathOf = (url: unknown) => new URL(String(url)).pathname

const inputs = [
  { name: "image-64x48.png", contentType: "image/png", width: 64, height: 48, durationSeconds: null },
  { name: "image-64x48.jpg", contentType: "image/jpeg", width: 64, height: 48, durationSeconds: null },
  { name: "image-64x48.webp", contentType: "image/webp", width: 64, height: 48, durationSeconds: null },
  { name: "video-3s.mp4", contentType: "video/mp4", width: expect.any(Number), height: expect.any(Number), durationSeconds: 3 },
  { name: "video-2s.mov", contentType: "video/quicktime", width: expect.any(Number), height: expect.any(Number), durationSeconds: 2 }
] as const

/** The S3 store on `server`'s bucket, under a prefix of its own. */
const s3Store = (server: () => TestS3) => (): MediaLayer => {
  const prefix = `files-${++folders}/`
  return (baseUrl) => S3MediaStore.layerWith({ bucket: server().bucket, prefix, client: server().client, baseUrl })
}

/** Each store's label, its layer, and why its cases are skipped (empty: they run). */
const stores: ReadonlyArray<readonly [string, () => MediaLayer, string]> = [
  ["memory", () => (baseUrl) => MemoryMediaStore.layer({ baseUrl }), ""],
  ["file", () => {
    const directory = join(root, `media-${++folders}`)
    return (baseUrl) => FileMediaStore.layerWith({ directory, baseUrl })
  }, ""],
  ["S3 (s3rver)", s3Store(() => s3!), ""],
  ["S3 (Ceph RGW, which checks signatures)", s3Store(() => checking!), checkingS3SkipReason("files")]
]

stores.forEach(([label, media, skipped]) =>
  describe.skipIf(skipped !== "")(`POST /api/v1/files on the ${label} store${skipped}`, () => {
    const withServer = <A, E, R>(effect: Effect.Effect<A, E, R>, settings: Partial<Files.Settings> = {}) =>
      effect.pipe(Effect.provide(serverWith(media(), settings)))

    it.effect("a PNG, a JPEG, a WebP, an MP4 and a MOV, raw and multipart: typed by their bytes, measured, served back byte for byte", () =>
      withServer(Effect.gen(function*() {
        for (const input of inputs) {
          const bytes = fixture(input.name)
          for (const [how, answer] of [["raw", yield* uploadRaw(bytes, key, "text/plain")], ["multipart", yield* uploadForm(bytes)]] as const) {
            expect([input.name, how, answer.status]).toEqual([input.name, how, 200])
            const { data } = json(answer)
            expect(data).toEqual({
              fileId: expect.stringMatching(/^file_[0-9a-f]{24}$/),
              url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/media\/[0-9a-f]{32}\.(png|jpg|webp|mp4|mov)$/),
              contentType: input.contentType,
              bytes: bytes.length,
              width: input.width,
              height: input.height,
              durationSeconds: input.durationSeconds,
              expiresAt: new Date(Duration.toMillis("24 hours")).toISOString()
            })
            if (input.durationSeconds === null) expect([data["width"], data["height"]]).toEqual([64, 48])
            else expect([data["width"], data["height"]]).toEqual([expect.any(Number), expect.any(Number)])
            const served = yield* send(HttpClientRequest.get(pathOf(data["url"])), null)
            expect([input.name, served.status, served.headers["content-type"]]).toEqual([input.name, 200, input.contentType])
            expect(served.body.equals(Buffer.from(bytes))).toBe(true)
            const shown = yield* send(HttpClientRequest.get(`/api/v1/files/${data["fileId"]}`))
            expect([shown.status, json(shown).data]).toEqual([200, data])
          }
        }
        // A larger video from the simulator's encoder: its movie header read back from the store.
        const mp4 = Mp4.encodeMp4({ width: 640, height: 360, seconds: 4, seed: 3 })
        const answer = yield* uploadRaw(mp4)
        expect([answer.status, json(answer).data["width"], json(answer).data["height"], json(answer).data["durationSeconds"]]).toEqual([200, 640, 360, 4])
        expect((yield* send(HttpClientRequest.get(pathOf(json(answer).data["url"])), null)).body.equals(Buffer.from(mp4))).toBe(true)
      })))

    it.effect("text is 415 naming what it is, a GIF 415, a cut PNG and a cut MP4 400, an empty body 400: nothing stored", () =>
      withServer(Effect.gen(function*() {
        const text = yield* uploadRaw(new TextEncoder().encode("just some words, not a picture\n"), key, "image/png")
        expect([text.status, json(text)]).toEqual([415, { code: 415, msg: "the file is text; an upload may be JPEG, PNG or WebP images, MP4 or MOV videos" }])
        const gif = yield* uploadForm(fixture("image-64x48.gif"))
        expect([gif.status, json(gif).msg]).toEqual([415, "the file is a GIF image; an upload may be JPEG, PNG or WebP images, MP4 or MOV videos"])
        const png = fixture("image-64x48.png")
        const cut = yield* uploadRaw(png.subarray(0, png.length - 20))
        expect([cut.status, json(cut)]).toEqual([400, { code: 400, msg: "the PNG file is cut short (it has no IEND chunk at its end)" }])
        const mp4 = fixture("video-3s.mp4")
        const cutVideo = yield* uploadRaw(mp4.subarray(0, mp4.length - 100))
        expect([cutVideo.status, json(cutVideo).msg]).toEqual([400, "the MP4 file is cut short (its last box ends past the end of the file)"])
        const empty = yield* uploadRaw(new Uint8Array(0))
        expect([empty.status, json(empty).code]).toEqual([400, 400])
        expect(yield* uploadCount).toBe(0)
      })))

    it.effect("over the size limit is 413, declared or found while streaming (multipart); nothing stored", () =>
      withServer(
        Effect.gen(function*() {
          const big = fixture("image-64x48.jpg")
          expect(big.length).toBeGreaterThan(1000)
          const declared = yield* uploadRaw(big)
          expect([declared.status, json(declared)]).toEqual([413, { code: 413, msg: "the file is larger than 1000 bytes, the most an upload may be" }])
          const streamed = yield* uploadForm(big)
          expect([streamed.status, json(streamed).code]).toEqual([413, 413])
          expect(yield* uploadCount).toBe(0)
          // Within the limit, the same server takes a file.
          expect((yield* uploadRaw(fixture("image-64x48.png"))).status).toBe(200)
        }),
        { maxBytes: 1000 }
      ))

    it.effect("no key is 401 on every files path; another account's fileId is 404 on GET and DELETE", () =>
      withServer(Effect.gen(function*() {
        const png = fixture("image-64x48.png")
        expect((yield* uploadRaw(png, null)).status).toBe(401)
        const { data } = json(yield* uploadRaw(png))
        const fileId = String(data["fileId"])
        for (const request of [HttpClientRequest.get(`/api/v1/files/${fileId}`), HttpClientRequest.del(`/api/v1/files/${fileId}`)]) {
          const anonymous = yield* send(request, null)
          expect([anonymous.status, json(anonymous)]).toEqual([401, { code: 401, msg: "unauthorized" }])
          const other = yield* send(request, otherKey)
          expect([other.status, json(other)]).toEqual([404, { code: 404, msg: `file not found: ${fileId}` }])
        }
        const unknown = yield* send(HttpClientRequest.get("/api/v1/files/file_000000000000000000000000"))
        expect(unknown.status).toBe(404)
        // The owner deletes it: file and metadata gone.
        const deleted = yield* send(HttpClientRequest.del(`/api/v1/files/${fileId}`))
        expect([deleted.status, json(deleted).data]).toEqual([200, data])
        expect((yield* send(HttpClientRequest.get(`/api/v1/files/${fileId}`))).status).toBe(404)
        expect((yield* send(HttpClientRequest.get(pathOf(data["url"])), null)).status).toBe(404)
        expect((yield* send(HttpClientRequest.del(`/api/v1/files/${fileId}`))).status).toBe(404)
      })))

    it.effect("past expiresAt the upload and its URL are 404; the sweep (every 5 minutes) deletes the file and marks the metadata", () =>
      withServer(
        Effect.gen(function*() {
          const { data } = json(yield* uploadRaw(fixture("image-64x48.jpg")))
          const mediaKey = pathOf(data["url"]).split("/").pop()!
          expect(data["expiresAt"]).toBe(new Date(Duration.toMillis("1 minute")).toISOString())
          yield* TestClock.adjust("59 seconds")
          expect((yield* send(HttpClientRequest.get(`/api/v1/files/${data["fileId"]}`))).status).toBe(200)
          yield* TestClock.adjust("1 second")
          expect((yield* send(HttpClientRequest.get(`/api/v1/files/${data["fileId"]}`))).status).toBe(404)
          expect((yield* send(HttpClientRequest.del(`/api/v1/files/${data["fileId"]}`))).status).toBe(404)
          expect((yield* send(HttpClientRequest.get(pathOf(data["url"])), null)).status).toBe(404)
          const store = yield* MediaStore.MediaStore
          // Not swept yet: the file is there, only not served.
          expect(Option.isSome(yield* store.stat(mediaKey))).toBe(true)
          yield* TestClock.adjust("3 minutes")
          expect(Option.isSome(yield* store.stat(mediaKey))).toBe(true)
          yield* TestClock.adjust("1 minute")
          // The sweep's deletion is real I/O (an S3 DELETE): its turn comes, not a timed wait. It
          // deletes the file first, then marks the metadata: waiting on the mark waits for both.
          const byMediaKey = Effect.flatMap(Uploads.Uploads, (uploads) => uploads.byMediaKey(mediaKey)).pipe(Effect.orDie)
          // Its metadata marked deleted, no longer found, still counted in usage; the file gone.
          yield* until(byMediaKey, Option.isNone)
          expect(Option.isNone(yield* store.stat(mediaKey))).toBe(true)
          expect(yield* uploadCount).toBe(1)
        }),
        { retention: Duration.minutes(1) }
      ))
  })
)

describe("the upload rate", () => {
  it.effect("a key past its burst of uploads is 429 with Retry-After; another key of the same account is not, nor another account", () =>
    Effect.gen(function*() {
      // A second key of the test account.
      const secondKey = "mg_files_second_key_0123456789"
      const added = yield* Effect.flatMap(Accounts.AccountAdmin, (admin) =>
        admin.createKey(Ids.AccountId.make("acct_files"), {
          id: "key_files_second",
          hash: createHash("sha256").update(secondKey, "utf8").digest("hex"),
          hint: "6789",
          label: null,
          createdAt: 0,
          expiresAt: null
        })).pipe(Effect.orDie)
      expect(added).toBe(true)
      const png = fixture("image-64x48.png")
      expect((yield* uploadRaw(png)).status).toBe(200)
      expect((yield* uploadRaw(png)).status).toBe(200)
      const limited = yield* uploadRaw(png)
      expect([limited.status, json(limited), limited.headers["retry-after"]]).toEqual([
        429,
        { code: 429, msg: "too many uploads for this API key (at most 0.1 a second); slow down" },
        "10"
      ])
      // The same account's other key has its whole budget, and spends it alone.
      const second = json(yield* uploadRaw(png, secondKey))
      expect(second.code).toBe(0)
      expect((yield* uploadRaw(png, secondKey)).status).toBe(200)
      expect((yield* uploadRaw(png, secondKey)).status).toBe(429)
      expect((yield* uploadRaw(png, otherKey)).status).toBe(200)
      yield* TestClock.adjust("10 seconds")
      expect((yield* uploadRaw(png)).status).toBe(200)
      expect((yield* uploadRaw(png, secondKey)).status).toBe(200)
    }).pipe(Effect.provide(serverWith((baseUrl) => MemoryMediaStore.layer({ baseUrl }), {}, Option.some({ perSecond: 0.1, burst: 2 })))))
})
