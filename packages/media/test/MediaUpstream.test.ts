/**
 * The media rules around an Upstream, against real files on a loopback server: WebP input of
 * alpha-image-2 image-to-image becomes our hosted JPEG; motion materials are typed from their
 * bytes and checked in the spec's order; results of alpha-image-2 and beta-imagine are hosted:
 * `hostResult` copies them to our MediaStore (the engine calls it), others returned as given.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Task } from "@mediagate/core"
import { Ids, MediaStore, ModelCatalog, Upstream } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryMediaStore } from "@mediagate/store-memory"
import { Effect, Either, Layer, Ref } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import sharp from "sharp"
import { MediaProbe, MediaUpstream, NodeResolver, SafeFetch, Transcoder } from "../src/index.js"
import { fixture } from "./MediaServer.js"

const mediaBase = "https://cdn.mediagate.test/media"

/** Serves `/files/<fixture>` and answers 404 for anything else. */
const files = Effect.acquireRelease(
  Effect.async<{ readonly base: string; readonly server: Http.Server }>((resume) => {
    const server = Http.createServer((request, response) => {
      const name = (request.url ?? "").replace(/^\/files\//, "")
      try {
        const bytes = name === "notes.txt" ? new TextEncoder().encode("not a picture") : fixture(name)
        response.writeHead(200, { "content-type": "application/octet-stream", "content-length": bytes.length }).end(bytes)
      } catch {
        response.writeHead(404).end()
      }
    })
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ base: `http://127.0.0.1:${(server.address() as AddressInfo).port}/files`, server })))
  }),
  ({ server }) => Effect.promise(() => new Promise<void>((done) => server.close(() => done())))
)

/** An upstream that records the jobs it is given and answers with `result`. */
const recording = (seen: Ref.Ref<ReadonlyArray<Task.UpstreamJob>>, result: Task.TaskResult): Upstream.Upstream["Type"] => ({
  submit: (job) => Effect.as(Ref.update(seen, (all) => [...all, job]), { _tag: "Completed" as const, result }),
  poll: () => Effect.succeed({ _tag: "Completed" as const, result })
})

const services = Layer.mergeAll(
  MediaProbe.layer,
  Transcoder.layer(),
  MemoryMediaStore.layer({ baseUrl: mediaBase }),
  ModelCatalog.layer
).pipe(Layer.provideMerge(SafeFetch.layer({ allowPrivate: true })), Layer.provide(NodeResolver.layer), Layer.provideMerge(Ids.layerTest))

const context: Upstream.SubmitContext = { taskId: Ids.TaskId.make("t1"), idempotencyKey: "t1.1", request: { model: "x", prompt: "p" } }

/** Submits `job` through the wrapper around a recording upstream; answers the outcome and the jobs the upstream saw. */
const run = (job: Task.UpstreamJob, result: Task.TaskResult = { type: "image", urls: [] }) =>
  Effect.gen(function*() {
    const seen = yield* Ref.make<ReadonlyArray<Task.UpstreamJob>>([])
    const wrapped = yield* MediaUpstream.make(recording(seen, result), { mediaBaseUrl: mediaBase })
    const outcome = yield* Effect.either(wrapped.submit(job, context))
    return { outcome, seen: yield* Ref.get(seen) }
  })

const motion = (model: string, urls: ReadonlyArray<string>) =>
  Testing.job({ model, mode: "undetermined", output: "video", sync: false, duration: 5, params: { materials: urls.map((url) => ({ url, type: "unknown" })) } })

const failure = (outcome: Either.Either<unknown, { readonly message: string; readonly reason?: unknown; readonly retryable: boolean }>) =>
  Either.match(outcome, { onLeft: (error) => ({ message: error.message, reason: error.reason, retryable: error.retryable }), onRight: () => undefined })

describe("MediaUpstream", () => {
  it.scoped("alpha-image-2 image-to-image: a WebP input reaches the upstream as our hosted JPEG of the same size; a PNG as given", () =>
    Effect.gen(function*() {
      const { base } = yield* files
      const i2i = (url: string) => Testing.job({ mode: "image-to-image", imageUrls: [url] })
      const webp = yield* run(i2i(`${base}/image-64x48.webp`))
      expect(Either.isRight(webp.outcome)).toBe(true)
      const hosted = webp.seen[0]!.imageUrls[0]!
      expect(hosted).toMatch(new RegExp(`^${mediaBase}/[0-9a-f]{32}\\.jpg$`))
      const stored = yield* Effect.flatMap(MediaStore.MediaStore, (media) => media.get(hosted.split("/").pop()!))
      expect(stored._tag).toBe("Some")
      const bytes = stored._tag === "Some" ? stored.value.bytes : new Uint8Array()
      const metadata = yield* Effect.promise(() => sharp(bytes).metadata())
      expect([metadata.format, metadata.width, metadata.height]).toEqual(["jpeg", 64, 48])
      const png = yield* run(i2i(`${base}/image-64x48.png`))
      expect(png.seen[0]!.imageUrls).toEqual([`${base}/image-64x48.png`])
      const missing = yield* run(i2i(`${base}/gone.webp`))
      expect(failure(missing.outcome)).toMatchObject({ reason: "INVALID_PARAMETERS", retryable: false })
      expect(failure(missing.outcome)!.message).toMatch(/^input\.imageUrls\[0\]: .*404/)
      expect(missing.seen).toEqual([])
    }).pipe(Effect.provide(services)))

  it.scoped("motion materials: typed from their bytes, the spec's rules in its order, each naming the rule", () =>
    Effect.gen(function*() {
      const { base } = yield* files
      const f = (name: string) => `${base}/${name}`
      const image = f("image-64x48.png")
      const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, RegExp]> = [
        // 10 images and 18 s of video: the image rule comes first.
        ["motion-2.0", [...Array(10).fill(image), ...Array(6).fill(f("video-3s.mp4"))], /at most 9 images \(it has 10\)/],
        ["motion-2.0", [image, f("video-3s.mp4"), f("video-3s.mp4"), f("video-3s.mp4"), f("video-3s.mp4"), f("video-3s.mp4"), f("video-1s.m4v")], /video materials last 16 s in all; at most 15 s/],
        ["motion-2.0-fast", [f("audio-4s.mp3"), f("audio-4s.mp3"), f("audio-4s.mp3"), f("audio-4s-noid3.mp3")], /audio materials last 16(\.\d)? s in all; at most 15 s/],
        ["motion-2.0", [image, f("missing.png")], /^input\.mediaUrls\[1\]: .*404/],
        ["motion-2.0", [image, f("notes.txt")], /^input\.mediaUrls\[1\]: .*not a supported file/],
        ["motion-1.5-pro", [image, f("video-2s.mov")], /motion-1\.5-pro accepts images only/]
      ]
      for (const [model, urls, message] of cases) {
        const { outcome, seen } = yield* run(motion(model, urls))
        expect(failure(outcome)).toMatchObject({ reason: "INVALID_PARAMETERS", retryable: false })
        expect(failure(outcome)!.message).toMatch(message)
        expect(seen).toEqual([])
      }
      // Within every rule: 15 s of video and 15 s of audio exactly, typed and moded from the files.
      const fine = yield* run(motion("motion-2.0", [image, f("video-3s.mp4"), f("video-3s.mp4"), f("video-3s.mp4"), f("video-3s.mp4"), f("video-2s.mov"), f("audio-4s.mp3"), f("audio-1.5s.wav")]))
      expect(Either.isRight(fine.outcome)).toBe(true)
      const job = fine.seen[0]!
      expect(job.mode).toBe("multimodal-reference")
      expect((job.params["materials"] as ReadonlyArray<{ type: string }>).map((m) => m.type)).toEqual(["image", "video", "video", "video", "video", "video", "audio", "audio"])
      expect(job.imageUrls).toEqual([image])
    }).pipe(Effect.provide(services)))

  it.scoped("results of alpha-image-2 and beta-imagine are hosted (hostResult copies them to our MediaStore); submit answers the upstream's result as given", () =>
    Effect.gen(function*() {
      const { base } = yield* files
      const wrapped = yield* MediaUpstream.make(recording(yield* Ref.make<ReadonlyArray<Task.UpstreamJob>>([]), { type: "image", urls: [] }), { mediaBaseUrl: mediaBase })
      const hostResult = wrapped.hostResult!
      const external = { type: "image" as const, urls: [`${base}/image-64x48.png`, `${mediaBase}/${"a".repeat(32)}.png`] }
      // Submit no longer copies: the engine copies as a step of its own, after the job is recorded as done.
      const alpha = yield* run(Testing.job(), external)
      expect((Either.getOrThrow(alpha.outcome) as { result: Task.TaskResult }).result).toEqual(external)
      expect(wrapped.hostsResults!(Testing.job(), external)).toBe(true)
      expect(wrapped.hostsResults!(Testing.job({ model: "beta-imagine", mode: "text-to-image-pro" }), external)).toBe(true)
      expect(wrapped.hostsResults!(Testing.job({ model: "dream-4" }), external)).toBe(false)
      // Files in our MediaStore already (the simulator's): nothing to copy.
      expect(wrapped.hostsResults!(Testing.job(), { type: "image", urls: [external.urls[1]!] })).toBe(false)
      const urls = (yield* hostResult(Testing.job(), external)).urls
      expect(urls[0]).toMatch(new RegExp(`^${mediaBase}/[0-9a-f]{32}\\.png$`))
      // Already ours: not fetched again.
      expect(urls[1]).toBe(external.urls[1])
      const beta = yield* hostResult(Testing.job({ model: "beta-imagine", mode: "text-to-image-pro" }), { type: "image", urls: [`${base}/image-64x48.jpg`] })
      expect(beta.urls[0]).toMatch(/\.jpg$/)
      // A download that fails is worth another try; a file we do not serve is not.
      const gone = yield* Effect.either(hostResult(Testing.job(), { type: "image", urls: [`${base}/gone.png`] }))
      expect(failure(gone)).toMatchObject({ retryable: true })
      expect(failure(gone)!.message).toMatch(/^copying the result failed: .*404/)
      const text = yield* Effect.either(hostResult(Testing.job(), { type: "image", urls: [`${base}/notes.txt`] }))
      expect(failure(text)).toMatchObject({ retryable: false })
      expect(failure(text)!.message).toMatch(/is not an image or video we serve/)
    }).pipe(Effect.provide(services)))
})
