/**
 * What only the S3 store has, on s3rver started on loopback: s3rver itself checked with the
 * SDK (so the store's tests prove something about S3), the s3:// URL and the SDK's variables,
 * the bucket checked at start, a store that is down, and retention by sweep; and the
 * credentials checked at start, on the S3 server at MEDIAGATE_TEST_S3_URL that checks SigV4
 * signatures as s3rver does not (Ceph RGW, scripts/ceph/start.sh; skipped when it is not
 * set). The contract every store passes is test/media-store-contract.test.ts.
 */
import {
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand
} from "@aws-sdk/client-s3"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type AddressInfo, createServer, type Socket } from "node:net"
import { MediaError, MediaStore } from "@mediagate/core"
import { ConfigProvider, Effect, Either, HashMap, Layer, Logger, Option, Stream, TestClock } from "effect"
import { S3MediaStore } from "../src/s3.js"
import { checkingS3SkipReason, checkingS3Url, freshCheckingBucket, type TestS3 } from "./CheckingS3.js"
import { bytesOf, collect } from "./MediaStoreContract.js"
import { type RunningS3rver, startS3rver } from "./S3rver.js"

let s3: RunningS3rver
beforeAll(async () => {
  s3 = await startS3rver()
})
afterAll(() => s3.close())

let prefixes = 0
const freshPrefix = () => `s3test-${++prefixes}/`
const baseUrl = "http://127.0.0.1:8080/media"
const keyOfUrl = (url: string) => url.split("/").pop()!

/** The SDK's error name and status, or none when the promise resolved. */
const failureOf = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: { name: string; $metadata?: { httpStatusCode?: number } }) => ({ name: error.name, status: error.$metadata?.httpStatusCode })
  )

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

/** Lets the event loop run (the sweep's requests) until `done`, at most `turns` times, without waiting on the Clock. */
const runEventLoop = (turns: number, done: () => boolean) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < turns && !done(); turn++) yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
  })

describe("s3rver, checked with @aws-sdk/client-s3", () => {
  it("puts, heads, gets, ranges, lists and deletes as S3 does; a missing key is 404 NotFound / NoSuchKey", async () => {
    const client = S3MediaStore.makeClient(s3.client)
    try {
      const Bucket = s3.bucket
      const Key = `${freshPrefix()}file.bin`
      const Body = bytesOf(70_000, 3)
      await client.send(new PutObjectCommand({ Bucket, Key, Body, ContentLength: Body.length, ContentType: "video/mp4" }))
      const head = await client.send(new HeadObjectCommand({ Bucket, Key }))
      expect([head.ContentLength, head.ContentType, head.LastModified instanceof Date]).toEqual([70_000, "video/mp4", true])

      const whole = await client.send(new GetObjectCommand({ Bucket, Key }))
      expect(Buffer.from(await whole.Body!.transformToByteArray()).equals(Body)).toBe(true)
      const part = await client.send(new GetObjectCommand({ Bucket, Key, Range: "bytes=10-19" }))
      expect(part.ContentRange).toBe("bytes 10-19/70000")
      expect(Buffer.from(await part.Body!.transformToByteArray()).equals(Body.subarray(10, 20))).toBe(true)
      const tail = await client.send(new GetObjectCommand({ Bucket, Key, Range: "bytes=69990-69999" }))
      expect(tail.ContentRange).toBe("bytes 69990-69999/70000")
      // A known gap: s3rver answers bytes=0-0 with the whole file (its end 0 reads as none), so
      // the store checks what came back and cuts it. On S3 this is one byte.
      const first = await client.send(new GetObjectCommand({ Bucket, Key, Range: "bytes=0-0" }))
      expect((await first.Body!.transformToByteArray()).length).toBe(70_000)

      const listed = await client.send(new ListObjectsV2Command({ Bucket, Prefix: Key.split("/")[0] + "/" }))
      expect(listed.Contents?.map((object) => [object.Key, object.Size])).toEqual([[Key, 70_000]])
      expect(listed.Contents?.[0]?.LastModified).toBeInstanceOf(Date)

      const deleted = await client.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects: [{ Key }], Quiet: true } }))
      expect(deleted.Errors ?? []).toEqual([])
      expect(await failureOf(client.send(new HeadObjectCommand({ Bucket, Key })))).toEqual({ name: "NotFound", status: 404 })
      expect(await failureOf(client.send(new GetObjectCommand({ Bucket, Key })))).toEqual({ name: "NoSuchKey", status: 404 })
      expect(await failureOf(client.send(new HeadBucketCommand({ Bucket: "no-such-bucket" })))).toMatchObject({ status: 404 })
    } finally {
      client.destroy()
    }
  })
})

describe("S3MediaStore configuration", () => {
  it("parseMediaUrl: s3://bucket and s3://bucket/prefix; anything else is the rule it breaks", () => {
    expect(S3MediaStore.parseMediaUrl("s3://media")).toEqual(Either.right({ bucket: "media", prefix: "" }))
    expect(S3MediaStore.parseMediaUrl("s3://media/")).toEqual(Either.right({ bucket: "media", prefix: "" }))
    expect(S3MediaStore.parseMediaUrl("s3://my.bucket-1/results/2026/")).toEqual(Either.right({ bucket: "my.bucket-1", prefix: "results/2026/" }))
    expect(S3MediaStore.parseMediaUrl("s3://media//a//b")).toEqual(Either.right({ bucket: "media", prefix: "a/b/" }))
    for (const raw of ["", "media", "https://media/x", "s3://", "s3://Media", "s3://a", "s3://under_score", "s3://media/../x", "s3://media?x=1"]) {
      expect([raw, Either.isLeft(S3MediaStore.parseMediaUrl(raw))]).toEqual([raw, true])
    }
  })

  it.effect("clientConfig: AWS_REGION (default us-east-1), and AWS_ENDPOINT_URL_S3 before AWS_ENDPOINT_URL", () =>
    Effect.gen(function*() {
      const read = (env: Record<string, string>) =>
        Effect.withConfigProvider(S3MediaStore.clientConfig, ConfigProvider.fromMap(new Map(Object.entries(env))))
      expect(yield* read({})).toEqual({ region: "us-east-1" })
      expect(yield* read({ AWS_REGION: "eu-west-3" })).toEqual({ region: "eu-west-3" })
      expect(yield* read({ AWS_DEFAULT_REGION: "auto" })).toEqual({ region: "auto" })
      expect(yield* read({ AWS_ENDPOINT_URL: "http://minio:9000" })).toEqual({ region: "us-east-1", endpoint: "http://minio:9000" })
      expect(yield* read({ AWS_ENDPOINT_URL: "http://other", AWS_ENDPOINT_URL_S3: "http://minio:9000" })).toEqual({
        region: "us-east-1",
        endpoint: "http://minio:9000"
      })
    }))
})

describe("S3MediaStore", () => {
  const layer = (options: Partial<S3MediaStore.Options> = {}) =>
    S3MediaStore.layerWith({ bucket: s3.bucket, prefix: freshPrefix(), client: s3.client, baseUrl, ...options })

  it.effect("a bucket that does not exist fails the layer at start, with one line naming it", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Layer.build(layer({ bucket: "no-such-bucket" })).pipe(Effect.scoped))
      expect(error).toBeInstanceOf(MediaError)
      expect(error.message).toBe(`cannot use bucket no-such-bucket at ${s3.endpoint}: no such bucket`)
    }))

  it.effect("a store that is down: the layer fails at start; a running store that goes down is a MediaError, never a missing file", () =>
    Effect.gen(function*() {
      const other = yield* Effect.promise(() => startS3rver())
      const options = { bucket: other.bucket, prefix: "", client: other.client, baseUrl }
      const result = yield* Effect.gen(function*() {
        const media = yield* MediaStore.MediaStore
        const key = keyOfUrl(yield* media.put({ bytes: bytesOf(10), contentType: "image/png", extension: "png" }))
        yield* Effect.promise(() => other.close())
        return {
          stat: yield* Effect.flip(media.stat(key)),
          get: yield* Effect.flip(media.get(key)),
          put: yield* Effect.flip(media.put({ bytes: bytesOf(11), contentType: "image/png", extension: "png" })),
          stream: yield* Effect.flip(Stream.runDrain(media.stream(key)))
        }
      }).pipe(Effect.provide(S3MediaStore.layerWith(options)))
      for (const error of Object.values(result)) expect(error).toBeInstanceOf(MediaError)
      const down = yield* Effect.flip(Layer.build(S3MediaStore.layerWith(options)).pipe(Effect.scoped))
      expect(down.message).toMatch(new RegExp(`^cannot use bucket media at ${other.endpoint}: `))
      expect(down.message).toContain("ECONNREFUSED")
      expect(down.message).not.toContain("\n")
    }))

  it.effect("a store that accepts connections and never answers fails the request after the idle timeout", () =>
    Effect.gen(function*() {
      const sockets: Array<Socket> = []
      const silent = createServer((socket) => void sockets.push(socket))
      yield* Effect.promise(() => new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve)))
      const { port } = silent.address() as AddressInfo
      const client = { ...s3.client, endpoint: `http://127.0.0.1:${port}`, timeouts: { connect: 1_000, idle: 300 } }
      const error = yield* Effect.flip(Layer.build(S3MediaStore.layerWith({ bucket: "media", prefix: "", client, baseUrl })).pipe(Effect.scoped))
      for (const socket of sockets) socket.destroy()
      silent.close()
      expect(error).toBeInstanceOf(MediaError)
      expect(error.message).toMatch(new RegExp(`^cannot use bucket media at http://127.0.0.1:${port}: `))
    }))

  it.effect("objects go under the prefix with the extension's Content-Type", () =>
    Effect.gen(function*() {
      const prefix = freshPrefix()
      const url = yield* Effect.flatMap(MediaStore.MediaStore, (media) => media.put({ bytes: bytesOf(20), contentType: "x/y", extension: "webp" })).pipe(
        Effect.provide(layer({ prefix }))
      )
      const client = S3MediaStore.makeClient(s3.client)
      const head = yield* Effect.promise(() => client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: `${prefix}${keyOfUrl(url)}` })))
      client.destroy()
      expect([head.ContentType, head.ContentLength]).toEqual(["image/webp", 20])
    }))

  it.effect("a range at the end of a 2 MB file is exactly those bytes", () =>
    Effect.gen(function*() {
      const bytes = bytesOf(2_000_000, 7)
      const got = yield* Effect.gen(function*() {
        const media = yield* MediaStore.MediaStore
        const key = keyOfUrl(yield* media.put({ bytes, contentType: "video/mp4", extension: "mp4" }))
        return yield* collect(media.stream(key, { start: 1_999_000, end: 1_999_999 }))
      }).pipe(Effect.provide(layer()))
      expect(got.equals(bytes.subarray(1_999_000))).toBe(true)
    }))

  it.effect("sweep deletes only our objects under the prefix last stored longer ago than the retention; storing again renews one", () =>
    Effect.gen(function*() {
      const now = Date.now()
      yield* TestClock.setTime(now)
      const prefix = freshPrefix()
      const client = S3MediaStore.makeClient(s3.client)
      const stored = yield* Effect.gen(function*() {
        const media = yield* MediaStore.MediaStore
        const put = (salt: number) => Effect.map(media.put({ bytes: bytesOf(100, salt), contentType: "image/png", extension: "png" }), keyOfUrl)
        const old = yield* put(1)
        const renewed = yield* put(2)
        const young = yield* put(3)
        for (const Key of [`${prefix}notes.txt`, `other-${prefix}${old}`]) {
          yield* Effect.promise(() => client.send(new PutObjectCommand({ Bucket: s3.bucket, Key, Body: "x", ContentLength: 1 })))
        }
        const longAgo = new Date(now - 25 * 3_600_000)
        for (const key of [`${prefix}${old}`, `${prefix}${renewed}`, `${prefix}notes.txt`, `other-${prefix}${old}`]) s3.setLastModified(key, longAgo)
        // Stored again: uploaded anew, so its LastModified is now.
        yield* put(2)
        return { old, renewed, young }
      }).pipe(Effect.provide(layer({ prefix, retention: "1 day", sweepInterval: "1000 days" })))

      const sweep = S3MediaStore.acquireClient({ bucket: s3.bucket, prefix, client: s3.client }).pipe(
        Effect.flatMap((bucket) => S3MediaStore.sweep({ ...bucket, retention: "1 day" })),
        Effect.scoped
      )
      expect(yield* sweep).toBe(1)
      expect(yield* sweep).toBe(0)
      const listed = yield* Effect.promise(() => client.send(new ListObjectsV2Command({ Bucket: s3.bucket })))
      const keys = (listed.Contents ?? []).map((object) => object.Key)
      client.destroy()
      expect(keys).not.toContain(`${prefix}${stored.old}`)
      for (const kept of [`${prefix}${stored.renewed}`, `${prefix}${stored.young}`, `${prefix}notes.txt`, `other-${prefix}${stored.old}`]) {
        expect(keys).toContain(kept)
      }
    }))

  it.effect("without a retention, storing the same bytes again uploads nothing", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      const prefix = freshPrefix()
      const key = yield* Effect.gen(function*() {
        const media = yield* MediaStore.MediaStore
        const key = keyOfUrl(yield* media.put({ bytes: bytesOf(100, 1), contentType: "image/png", extension: "png" }))
        s3.setLastModified(`${prefix}${key}`, new Date(1_000_000_000_000))
        yield* media.put({ bytes: bytesOf(100, 1), contentType: "image/png", extension: "png" })
        return key
      }).pipe(Effect.provide(layer({ prefix })))
      const client = S3MediaStore.makeClient(s3.client)
      const head = yield* Effect.promise(() => client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: `${prefix}${key}` })))
      client.destroy()
      expect(head.LastModified?.getTime()).toBe(1_000_000_000_000)
    }))

  it.effect("with a retention, the layer sweeps by itself every interval of the Clock", () => {
    const logs = captureLogs()
    const swept = () => logs.lines.some((line) => line.message.includes("deleted 1 expired"))
    return Effect.gen(function*() {
      const now = Date.now()
      yield* TestClock.setTime(now)
      const prefix = freshPrefix()
      yield* Effect.gen(function*() {
        const media = yield* MediaStore.MediaStore
        const old = keyOfUrl(yield* media.put({ bytes: bytesOf(10, 1), contentType: "image/png", extension: "png" }))
        const young = keyOfUrl(yield* media.put({ bytes: bytesOf(10, 2), contentType: "image/png", extension: "png" }))
        s3.setLastModified(`${prefix}${old}`, new Date(now - 23.5 * 3_600_000))
        expect(swept()).toBe(false)
        yield* TestClock.adjust("1 hour")
        yield* runEventLoop(400, swept)
        expect(swept()).toBe(true)
        expect(Option.isNone(yield* media.stat(old))).toBe(true)
        expect(Option.isSome(yield* media.stat(young))).toBe(true)
      }).pipe(Effect.provide(layer({ prefix, retention: "1 day", sweepInterval: "1 hour" })))
    }).pipe(Effect.provide(logs.layer))
  })
})

const checkingSkipped = checkingS3SkipReason("media S3MediaStore")

describe.skipIf(checkingS3Url === undefined)(`S3MediaStore on a server that checks signatures${checkingSkipped}`, () => {
  let checking: TestS3
  beforeAll(async () => {
    checking = await freshCheckingBucket("s3store")
  })
  afterAll(() => checking?.close())

  it.effect("a wrong secret or access key fails the layer at start, with one line: access denied", () =>
    Effect.gen(function*() {
      const credentials = checking.client.credentials!
      const start = (wrong: Partial<typeof credentials>) =>
        Effect.flip(
          Layer.build(S3MediaStore.layerWith({
            bucket: checking.bucket,
            prefix: freshPrefix(),
            client: { ...checking.client, credentials: { ...credentials, ...wrong } },
            baseUrl
          })).pipe(Effect.scoped)
        )
      const denied = `cannot use bucket ${checking.bucket} at ${checking.endpoint}: access denied (check the credentials)`
      expect((yield* start({ secretAccessKey: "not-the-secret" })).message).toBe(denied)
      expect((yield* start({ accessKeyId: "NOSUCHACCESSKEY00000" })).message).toBe(denied)
    }))

  it.effect("presigned redirects: the URL serves the bytes and a range; moved to another key, or signed with a wrong secret, it is refused", () =>
    Effect.gen(function*() {
      // Presigned URLs are signed at the Clock's now, which the server checks against its own.
      yield* TestClock.setTime(Date.now())
      const prefix = freshPrefix()
      const presigned = Layer.suspend(() =>
        S3MediaStore.layerWith({ bucket: checking.bucket, prefix, client: checking.client, baseUrl, serve: "presigned" })
      )
      const { key, other, url } = yield* Effect.gen(function*() {
        const media = yield* MediaStore.MediaStore
        const key = keyOfUrl(yield* media.put({ bytes: bytesOf(3_000, 5), contentType: "image/png", extension: "png" }))
        const other = keyOfUrl(yield* media.put({ bytes: bytesOf(3_000, 6), contentType: "image/png", extension: "png" }))
        return { key, other, url: (yield* media.redirect!(key)).url }
      }).pipe(Effect.provide(presigned))
      const whole = yield* Effect.promise(() => fetch(url))
      expect(whole.status).toBe(200)
      expect(Buffer.from(yield* Effect.promise(() => whole.arrayBuffer())).equals(Buffer.from(bytesOf(3_000, 5)))).toBe(true)
      const part = yield* Effect.promise(() => fetch(url, { headers: { range: "bytes=10-19" } }))
      expect([part.status, Buffer.from(yield* Effect.promise(() => part.arrayBuffer())).equals(Buffer.from(bytesOf(3_000, 5).subarray(10, 20)))])
        .toEqual([206, true])

      const moved = yield* Effect.promise(() => fetch(url.replace(key, other)))
      expect(moved.status).toBe(403)
      // The presigner over a client with a wrong secret (a store would not have started with it).
      const wrongClient = S3MediaStore.makeClient({ ...checking.client, credentials: { ...checking.client.credentials!, secretAccessKey: "not-the-secret" } })
      const sign = yield* S3MediaStore.presigner({ client: wrongClient, bucket: checking.bucket, prefix }, "1 hour")
      const wrongUrl = (yield* sign(key)).url
      wrongClient.destroy()
      expect(new URL(wrongUrl).pathname).toBe(new URL(url).pathname)
      expect((yield* Effect.promise(() => fetch(wrongUrl))).status).toBe(403)
    }))

  it.effect("with the right secret the store puts and reads back", () =>
    Effect.gen(function*() {
      const media = yield* MediaStore.MediaStore
      const url = yield* media.put({ bytes: bytesOf(5_000, 4), contentType: "image/png", extension: "png" })
      expect(Option.getOrThrow(yield* media.get(keyOfUrl(url))).bytes).toEqual(bytesOf(5_000, 4))
    }).pipe(Effect.provide(Layer.suspend(() =>
      S3MediaStore.layerWith({ bucket: checking.bucket, prefix: freshPrefix(), client: checking.client, baseUrl })
    ))))
})
