/**
 * Tasks whose inputs are uploads (issue 36), over HTTP on a loopback server whose private
 * addresses are NOT allowed: its own upload URLs (`<public URL>/media/<key>`) are judged and
 * read by its MediaStore, never over the network, while any other private URL is refused.
 * Uploads are made over HTTP (`POST /api/v1/files`, the bytes the media package's real
 * fixtures), their metadata in memory (`MemoryUploads`). A provider (the fal fake) gets the upload's
 * URL as any other and fetches the file's bytes from the server's media route, after the
 * upload expired or was deleted too when a task pinned it, until the sweep after the task's
 * deadline. The store-reading cases run on the S3 store
 * (s3rver) too, the pin on SQLite (tasks, uploads and files of `SqlBackends`) too.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import type { MediaError } from "@mediagate/core"
import { Files, Ids, MediaStore, Uploads } from "@mediagate/core"
import { MediagateHttp } from "@mediagate/http"
import { MediaProbe, NodeResolver, SafeFetch } from "@mediagate/media"
import { S3MediaStore } from "@mediagate/media/s3"
import { Backends, Deployment } from "@mediagate/server"
import { SqlBackends } from "@mediagate/server/sql"
import { Clock, Duration, Effect, Layer, Option, Redacted, TestClock } from "effect"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type RunningS3rver, startS3rver } from "../packages/media/test/S3rver.js"
import * as FakeFal from "../packages/upstream/test/fakes/FakeFal.js"
import { apiKey, client, otherApiKey, testCredits } from "./support.js"

const testAccount = Ids.AccountId.make("acct_test")
const dir = mkdtempSync(join(tmpdir(), "mediagate-upload-inputs-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const fixtures = join(import.meta.dirname, "../packages/media/test/fixtures")
const fixture = (name: string) => new Uint8Array(readFileSync(join(fixtures, name)))

/**
 * The deployment with its media rules (media base `<publicUrl>/media`, the loopback server's
 * own address unless given) on a loopback test server, private addresses refused.
 */
const uploadServer = (options: {
  readonly publicUrl?: string
  readonly profile?: "instant" | "demo"
  readonly routing?: Deployment.Routing
  /** Deadlines by model family (default the models' own). */
  readonly deadlines?: Deployment.Config["deadlines"]
  /** How long an upload lives (default a day). */
  readonly retention?: Duration.DurationInput
  /** The media store at this base URL; default in memory. */
  readonly media?: (baseUrl: string) => Layer.Layer<MediaStore.MediaStore, MediaError, Ids.Ids>
  /** Tasks, uploads and files in a new SQLite database (accounts and credits in memory). */
  readonly sqlite?: boolean
} = {}) =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      const port = server.address._tag === "TcpAddress" ? server.address.port : 0
      const publicUrl = options.publicUrl ?? `http://127.0.0.1:${port}`
      const memory = Backends.memoryBackends({ publicUrl }, [
        { id: "acct_test", name: "test", apiKey: Redacted.make(apiKey), credits: testCredits },
        { id: "acct_other", name: "other", apiKey: Redacted.make(otherApiKey), credits: testCredits }
      ])
      const sql = options.sqlite !== true ? undefined : SqlBackends.make({
        publicUrl,
        databaseUrl: `sqlite:${join(mkdtempSync(join(dir, "db-")), "mediagate.db")}`,
        mediaDir: join(dir, `media-${port}`)
      })
      const backends = sql !== undefined
        ? { ...memory, store: sql.store, uploads: sql.uploads, media: sql.media }
        : options.media === undefined
        ? memory
        : { ...memory, media: options.media(`${publicUrl}/media`) }
      const services = Deployment.services({
        simulatorProfile: options.profile ?? "instant",
        allowPrivateUrls: false,
        mediaRules: { mediaBaseUrl: `${publicUrl}/media` },
        ...(options.routing === undefined ? {} : { routing: options.routing }),
        ...(options.deadlines === undefined ? {} : { deadlines: options.deadlines }),
        backends,
        uploads: { ...Files.defaults, retention: Duration.decode(options.retention ?? "1 day") }
      }).pipe(Layer.provideMerge(backends.uploads))
      // The files endpoints' use case over the same uploads and store, files probed as the server does.
      const files = Files.layer.pipe(Layer.provide(MediaProbe.layer.pipe(Layer.provide(SafeFetch.layer()), Layer.provide(NodeResolver.layer))))
      const settings = Layer.succeed(Files.FilesSettings, { ...Files.defaults, retention: Duration.decode(options.retention ?? "1 day") })
      return MediagateHttp.serve.pipe(Layer.provideMerge(Layer.provideMerge(files, services)), Layer.provide(settings))
    })
  ).pipe(Layer.provideMerge(NodeHttpServer.layerTest))

/** `name` uploaded by the test account (`POST /api/v1/files`, the raw body); its fileId and URL. */
const upload = (name: string) =>
  Effect.gen(function*() {
    const request = HttpClientRequest.post("/api/v1/files").pipe(
      HttpClientRequest.bearerToken(apiKey),
      HttpClientRequest.bodyUint8Array(fixture(name), "application/octet-stream")
    )
    const answer = yield* HttpClient.execute(request)
    const body = (yield* answer.json) as { readonly data: { readonly fileId: string; readonly url: string } }
    expect(answer.status, JSON.stringify(body)).toBe(200)
    return { id: body.data.fileId, url: body.data.url }
  })

const api = client()

/** The task's answer once it ended (the instant profile ends tasks within a few steps). */
const ended = (taskId: string) =>
  Effect.gen(function*() {
    for (let step = 0; step < 600; step++) {
      const answer = yield* api.query(taskId)
      const status = answer.body.data.status as string
      if (status === "SUCCESS" || status === "FAILURE" || status === "TIMEOUT" || status === "CANCELLED") return answer.body.data
      yield* TestClock.adjust("100 millis")
    }
    return yield* Effect.fail(new Error(`task ${taskId} did not end`))
  })

const refusal = (answer: { readonly status: number; readonly body: any }) => ({ status: answer.status, msg: answer.body?.msg as string })

describe("tasks with upload URLs as inputs, private addresses refused", () => {
  it.effect("an image-to-image and an image-to-video task succeed with upload URLs; other private URLs are still refused", () =>
    Effect.gen(function*() {
      const png = yield* upload("image-64x48.png")
      expect(png.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/media\/[0-9a-f]{32}\.png$/)
      const image = yield* ended(yield* api.submitId({ model: "dream-4.5", input: { prompt: "same scene at night", imageUrls: [png.url] } }))
      expect(image).toMatchObject({ status: "SUCCESS" })
      expect(image["input"]).toMatchObject({ imageUrls: [png.url] })
      const video = yield* ended(yield* api.submitId({ model: "beta-imagine/image-to-video", input: { prompt: "it moves", duration: 6, imageUrls: [png.url] } }))
      expect(video).toMatchObject({ status: "SUCCESS" })

      const refused = refusal(yield* api.submit({ model: "dream-4.5", input: { prompt: "p", imageUrls: ["http://127.0.0.1:1/x.png"] } }))
      expect(refused.status).toBe(400)
      expect(refused.msg).toMatch(/^input\.imageUrls\[0\] must name a public host/)
      // The same path on another port is another deployment: judged by its host, so refused here.
      const elsewhere = png.url.replace(/:(\d+)\//, (_, port) => `:${Number(port) + 1}/`)
      const other = refusal(yield* api.submit({ model: "dream-4.5", input: { prompt: "p", imageUrls: [elsewhere] } }))
      expect(other.msg).toMatch(/^input\.imageUrls\[0\] must name a public host/)
    }).pipe(Effect.provide(uploadServer())))

  it.effect("a model that takes https URLs only takes this http server's own upload, which reaches the job as it came (a WebP transcoded from it)", () =>
    Effect.gen(function*() {
      const webp = yield* upload("image-64x48.webp")
      expect(webp.url).toMatch(/^http:\/\/127\.0\.0\.1:/)
      const model = "alpha-image-2/image-to-image"
      const estimate = yield* api.call("POST", "/api/v1/task/estimate", { body: { model, input: { prompt: "p", imageUrls: [webp.url] } } })
      expect(estimate.status).toBe(200)
      // The transcode reads the upload through the job's URL: an https form of it would name no file of ours.
      const done = yield* ended(yield* api.submitId({ model, input: { prompt: "p", imageUrls: [webp.url] } }))
      expect(done).toMatchObject({ status: "SUCCESS", input: { imageUrls: [webp.url] } })
      const other = refusal(yield* api.submit({ model, input: { prompt: "p", imageUrls: ["http://example.com/a.png"] } }))
      expect(other).toEqual({ status: 400, msg: expect.stringContaining("must be an absolute https URL") })
    }).pipe(Effect.provide(uploadServer())))

  it.effect("an own URL naming no file, an expired upload and a path that is no key are refused with 400 naming the field", () =>
    Effect.gen(function*() {
      const png = yield* upload("image-64x48.png")
      const base = png.url.slice(0, png.url.lastIndexOf("/"))
      const submitWith = (url: string) => Effect.map(api.submit({ model: "dream-4.5", input: { prompt: "p", imageUrls: [url] } }), refusal)
      const unknown = yield* submitWith(`${base}/${"ab".repeat(16)}.png`)
      expect(unknown).toEqual({ status: 400, msg: expect.stringMatching(/^input\.imageUrls\[0\] names no file of this server .*upload the file again/) })
      expect((yield* submitWith(`${base}/../etc/passwd.png`)).status).toBe(400)
      expect((yield* submitWith(`${base}/sub/${"ab".repeat(16)}.png`)).msg).toMatch(/^input\.imageUrls\[0\] names no file of this server/)
      yield* TestClock.adjust("61 seconds")
      const expired = yield* submitWith(png.url)
      expect(expired).toEqual({ status: 400, msg: expect.stringMatching(/^input\.imageUrls\[0\] is an upload that expired at .*Z: upload the file again/) })
    }).pipe(Effect.provide(uploadServer({ retention: "60 seconds" }))))

  it.effect.each([["in memory", false], ["on SQLite", true]] as const)("%s: a task accepted with an upload pins it to the task's deadline, and succeeds after the upload expired", ([, sqlite]) =>
    Effect.gen(function*() {
      const png = yield* upload("image-64x48.png")
      const taskId = yield* api.submitId({ model: "beta-imagine/image-to-video", input: { prompt: "p", duration: 6, imageUrls: [png.url] } })
      const pinned = yield* Effect.flatMap(Uploads.Uploads, (uploads) => uploads.getOwned(png.id, testAccount))
      const now = yield* Clock.currentTimeMillis
      expect(Option.getOrThrow(pinned).pinnedUntil).toBeGreaterThan(now + 60_000)
      yield* TestClock.adjust("3 seconds")
      const later = yield* Clock.currentTimeMillis
      expect(yield* Effect.flatMap(Uploads.Uploads, (uploads) => uploads.expired(later, 10))).toEqual([])
      expect((yield* api.call("GET", `/api/v1/files/${png.id}`)).status).toBe(404)
      const done = yield* ended(taskId)
      expect(done).toMatchObject({ status: "SUCCESS" })
      // The upload itself is over: a new task cannot use it.
      const again = yield* api.submit({ model: "beta-imagine/image-to-video", input: { prompt: "p", duration: 6, imageUrls: [png.url] } })
      expect(again.status).toBe(400)
    }).pipe(Effect.provide(uploadServer({ profile: "demo", retention: "2 seconds", sqlite }))))
})

let s3: RunningS3rver | undefined
beforeAll(async () => {
  s3 = await startS3rver()
})
afterAll(() => s3?.close())
let prefixes = 0

/** The S3 store (s3rver), a prefix of its own per server. */
const onS3 = (baseUrl: string) => S3MediaStore.layerWith({ bucket: s3!.bucket, prefix: `upload-inputs-${++prefixes}/`, client: s3!.client, baseUrl })

describe.each([["memory", undefined], ["S3", onS3]] as const)("own media URLs are read from the %s store, not over the network", (_, media) => {
  const stored = media === undefined ? {} : { media }

  it.effect("a WebP upload under an https public URL that resolves nowhere is transcoded for alpha-image-2 image-to-image", () =>
    Effect.gen(function*() {
      const webp = yield* upload("image-64x48.webp")
      expect(webp.url).toMatch(/^https:\/\/mediagate\.invalid\/media\//)
      const done = yield* ended(yield* api.submitId({ model: "alpha-image-2/image-to-image", input: { prompt: "p", imageUrls: [webp.url] } }))
      expect(done).toMatchObject({ status: "SUCCESS" })
    }).pipe(Effect.provide(Layer.suspend(() => uploadServer({ publicUrl: "https://mediagate.invalid", ...stored })))))

  it.effect("motion materials that are uploads are typed and timed from the stored bytes; an own URL naming no file is refused", () =>
    Effect.gen(function*() {
      const png = yield* upload("image-64x48.png")
      const mov = yield* upload("video-2s.mov")
      const done = yield* ended(yield* api.submitId({ model: "motion-2.0", input: { prompt: "p", duration: 5, mediaUrls: [png.url, mov.url] } }))
      expect(done).toMatchObject({ status: "SUCCESS" })
      const long = yield* ended(yield* api.submitId({ model: "motion-2.0", input: { prompt: "p", duration: 5, mediaUrls: [png.url, ...Array(8).fill(mov.url)] } }))
      expect(long["error"]).toMatch(/the video materials last 16(\.\d+)? s in all; at most 15 s/)
      const gone = png.url.replace(/[0-9a-f]{32}/, "ab".repeat(16))
      expect((yield* api.submit({ model: "motion-2.0", input: { prompt: "p", duration: 5, mediaUrls: [gone] } })).status).toBe(400)
    }).pipe(Effect.provide(Layer.suspend(() => uploadServer({ publicUrl: "https://mediagate.invalid", ...stored })))))
})

/** fal's image-to-image as the fake runs it: it takes `image_url`, and fetches it when the job is read back. */
const falEdit = "fal-ai/flux/dev/image-to-image"
/** What the fake got for each URL it fetched: the bytes, or why not. */
const fetchedByFal: Array<Promise<Uint8Array | Error>> = []
/** The fake, whose jobs end after a few polls; `lateFal`'s when the test says (`complete`). */
let fal: Awaited<ReturnType<typeof FakeFal.start>>
let lateFal: Awaited<ReturnType<typeof FakeFal.start>>
const falOptions: FakeFal.Options = {
  key: "fal-key",
  endpoints: { [falEdit]: { input: { prompt: { type: "string", required: true }, image_url: { type: "string", required: true } }, output: "image" } },
  result: (job, id) => {
    fetchedByFal.push(fetch(String(job.input["image_url"])).then(async (answer) => {
      if (answer.status !== 200) throw new Error(`the provider's GET of ${String(job.input["image_url"])} answered ${answer.status}`)
      return new Uint8Array(await answer.arrayBuffer())
    }).catch((error: Error) => error))
    return FakeFal.defaultResult(job, id, "image")
  }
}
beforeAll(async () => {
  fal = await FakeFal.start(falOptions)
  lateFal = await FakeFal.start({ ...falOptions, steps: Infinity })
})
afterAll(() => Promise.all([fal.close(), lateFal.close()]))

/** dream-4 on the fal fake at `url`, its first image as `image_url`. */
const viaFal = (url: string): Deployment.Routing => ({
  routes: [{ model: "dream-4", targets: [{ provider: "fal", model: falEdit, input: (job) => ({ prompt: job.prompt, image_url: job.imageUrls[0] }) }] }],
  unrouted: "simulator",
  providers: {
    fal: Option.some({ key: "fal-key", baseUrl: Option.some(url), jwksUrl: Option.none() }),
    replicate: Option.none(),
    openai: Option.none(),
    relay: Option.none()
  }
})

describe("a provider gets the upload's URL", () => {
  it.effect("the fal fake receives the upload URL in its input and the file's bytes when it fetches it", () =>
    Effect.gen(function*() {
      const png = yield* upload("image-64x48.png")
      const taskId = yield* api.submitId({ model: "dream-4", input: { prompt: "the same cat, in winter", imageUrls: [png.url] } })
      expect(yield* ended(taskId)).toMatchObject({ status: "SUCCESS" })
      const received = yield* Effect.promise(() => Promise.all(fetchedByFal.splice(0)))
      expect(received.length).toBeGreaterThan(0)
      for (const bytes of received) expect(Buffer.from(bytes as Uint8Array).equals(Buffer.from(fixture("image-64x48.png"))), String(bytes)).toBe(true)
    }).pipe(Effect.provide(Layer.suspend(() => uploadServer({ routing: viaFal(fal.url) })))))

  it.effect("a task accepted before its upload expired: the provider still fetches the file after the expiry, while the upload is 404", () =>
    Effect.gen(function*() {
      const png = yield* upload("image-64x48.png")
      const taskId = yield* api.submitId({ model: "dream-4", input: { prompt: "the same cat, in spring", imageUrls: [png.url] } })
      yield* TestClock.adjust("3 seconds")
      expect((yield* api.call("GET", `/api/v1/files/${png.id}`)).status).toBe(404)
      // Another task cannot take it any more.
      expect((yield* api.submit({ model: "dream-4", input: { prompt: "p", imageUrls: [png.url] } })).status).toBe(400)
      const [job] = [...lateFal.jobs.keys()]
      yield* Effect.promise(() => lateFal.complete(job!))
      expect(yield* ended(taskId)).toMatchObject({ status: "SUCCESS" })
      const [received] = yield* Effect.promise(() => Promise.all(fetchedByFal.splice(0)))
      expect(Buffer.from(received as Uint8Array).equals(Buffer.from(fixture("image-64x48.png"))), String(received)).toBe(true)
    }).pipe(Effect.provide(Layer.suspend(() => uploadServer({ routing: viaFal(lateFal.url), retention: "2 seconds" })))))

  it.effect("an upload deleted while a task uses it is gone at once but for the task's provider, and swept after the task's deadline; one no task uses goes at once", () =>
    Effect.gen(function*() {
      const uploads = yield* Uploads.Uploads
      const store = yield* MediaStore.MediaStore
      const png = yield* upload("image-64x48.png")
      const mediaKey = png.url.slice(png.url.lastIndexOf("/") + 1)
      const prompt = "the same cat, deleted under it"
      const taskId = yield* api.submitId({ model: "dream-4", input: { prompt, imageUrls: [png.url] } })
      const pinnedUntil = Option.getOrThrow(yield* uploads.getOwned(png.id, testAccount)).pinnedUntil!
      expect((yield* api.call("DELETE", `/api/v1/files/${png.id}`)).status).toBe(200)
      expect((yield* api.call("GET", `/api/v1/files/${png.id}`)).status).toBe(404)
      expect((yield* api.call("DELETE", `/api/v1/files/${png.id}`)).status).toBe(404)
      expect(refusal(yield* api.submit({ model: "dream-4", input: { prompt: "p", imageUrls: [png.url] } }))).toEqual({
        status: 400,
        msg: expect.stringMatching(/^input\.imageUrls\[0\] is an upload that expired at /)
      })
      // The provider fetches it only now, after the DELETE.
      const [job] = [...lateFal.jobs].filter(([, found]) => found.input["prompt"] === prompt).map(([id]) => id)
      yield* Effect.promise(() => lateFal.complete(job!))
      expect(yield* ended(taskId)).toMatchObject({ status: "SUCCESS" })
      const [received] = yield* Effect.promise(() => Promise.all(fetchedByFal.splice(0)))
      expect(Buffer.from(received as Uint8Array).equals(Buffer.from(fixture("image-64x48.png"))), String(received)).toBe(true)
      // Past the task's deadline, the next sweep (every 5 minutes) deletes the file; the upload stays counted.
      yield* TestClock.adjust(pinnedUntil - (yield* Clock.currentTimeMillis) - 1)
      expect((yield* HttpClient.get(`/media/${mediaKey}`)).status).toBe(200)
      yield* TestClock.adjust(Duration.sum(Files.sweepInterval, "1 millis"))
      expect((yield* HttpClient.get(`/media/${mediaKey}`)).status).toBe(404)
      expect(yield* store.stat(mediaKey)).toEqual(Option.none())
      expect(yield* uploads.stored(testAccount, 0, Number.MAX_SAFE_INTEGER)).toMatchObject({ count: 1 })

      // An upload no task uses: its file goes with the DELETE.
      const other = yield* upload("image-64x48.png")
      const otherKey = other.url.slice(other.url.lastIndexOf("/") + 1)
      expect(Option.isSome(yield* store.stat(otherKey))).toBe(true)
      expect((yield* api.call("DELETE", `/api/v1/files/${other.id}`)).status).toBe(200)
      expect(yield* store.stat(otherKey)).toEqual(Option.none())
      expect(yield* uploads.stored(testAccount, 0, Number.MAX_SAFE_INTEGER)).toMatchObject({ count: 2 })
    }).pipe(Effect.provide(Layer.suspend(() => uploadServer({ routing: viaFal(lateFal.url), deadlines: { dream: "1 minute" } })))))
})
