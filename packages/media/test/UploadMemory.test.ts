/**
 * Uploads never sit whole in memory: 20 uploads of 20 MiB at once (400 MiB in all) go into
 * the file store while the heap with its buffers, measured after full collections, grows by
 * less than 32 MiB (one 64 KiB piece an upload, about 2.5 MiB, is what it holds), and the
 * resident memory by less than 200 MiB (it is the whole process's: vitest's other threads
 * count in it). The S3 store spools the same way and then sends from the spool file: 50
 * uploads of 3 MiB at once (150 MiB) into the signature-checking server
 * (MEDIAGATE_TEST_S3_URL, Ceph RGW; skipped when it is not set), with 32 MiB of heap (about
 * 6.5 MiB held) and 100 MiB of resident growth at most. (3 MiB there: the test cluster keeps
 * its objects in 1 GiB of memory, and RGW frees the parts of an object past 4 MiB hours
 * after it is deleted, so 400 MiB a run would fill it.) The sources make their 64 KiB pieces
 * only when pulled, so they hold no more than a store does.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Ids, MediaStore } from "@mediagate/core"
import type { Layer } from "effect"
import { Effect, Option, Stream } from "effect"
import { createHash } from "node:crypto"
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { FileMediaStore } from "../src/index.js"
import { S3MediaStore } from "../src/s3.js"
import { checkingS3SkipReason, checkingS3Url, freshCheckingBucket, type TestS3 } from "./CheckingS3.js"

const piece = 64 * 1024
const mib = 1024 * 1024

const root = mkdtempSync(join(tmpdir(), "mediagate-upload-memory-"))
let checking: TestS3 | undefined
beforeAll(async () => {
  if (checkingS3Url !== undefined) checking = await freshCheckingBucket("memory")
}, 60_000)
afterAll(async () => {
  await checking?.close()
  rmSync(root, { recursive: true, force: true })
})

/** Upload `n`: `pieces` pieces made one by one, each filled with its own byte. */
const source = (n: number, pieces: number) =>
  Stream.unfold(0, (index) => index >= pieces ? Option.none() : Option.some([Buffer.alloc(piece, (n * 7 + index) % 256), index + 1] as const))

/** The SHA-256 of upload `n`'s bytes, computed piece by piece. */
const expectedHash = (n: number, pieces: number) => {
  const hash = createHash("sha256")
  for (let index = 0; index < pieces; index++) hash.update(Buffer.alloc(piece, (n * 7 + index) % 256))
  return hash.digest("hex")
}

// Full garbage collections before each sample, so that it measures what is held, not the
// garbage of pieces already written (up to tens of MB between two collections).
setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void
/**
 * Two full collections. V8 frees the memory of dead buffers on a thread of its own after a
 * collection, and `arrayBuffers` counts it until that sweep ends; the next collection
 * finishes it first. After one, a loaded machine showed up to 56 MB of buffers already dead
 * (where two showed the 1.3 MB the uploads held), and a CI run on Node 24 failed on it.
 */
const collectGarbage = () => {
  gc()
  gc()
}

/**
 * Peaks of resident memory and of heap plus buffers while `effect` runs, above where they
 * started, sampled every 250 ms after a full collection (a store that held the uploads would hold more at each).
 */
const peakGrowth = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      collectGarbage()
      const start = process.memoryUsage()
      const peak = { rss: 0, heap: 0 }
      const sample = () => {
        collectGarbage()
        const now = process.memoryUsage()
        peak.rss = Math.max(peak.rss, now.rss - start.rss)
        peak.heap = Math.max(peak.heap, now.heapUsed + now.arrayBuffers - start.heapUsed - start.arrayBuffers)
      }
      return { peak, sample, timer: setInterval(sample, 250) }
    }),
    ({ peak, sample }) => Effect.map(effect, (result) => (sample(), { result, peak })),
    ({ timer }) => Effect.sync(() => clearInterval(timer))
  )

const uploadAll = (
  store: Layer.Layer<MediaStore.MediaStore, unknown, Ids.Ids>,
  uploads: number,
  size: number,
  allowed: { readonly heap: number; readonly rss: number }
) =>
  Effect.gen(function*() {
    const pieces = size / piece
    const media = yield* MediaStore.MediaStore
    const keys = Array.from({ length: uploads }, (_, n) => `${(n + 1).toString(16).padStart(32, "0")}.mp4`)
    const { peak, result } = yield* peakGrowth(
      Effect.forEach(keys, (key, n) => media.putStream({ key, stream: source(n, pieces), maxBytes: size }), { concurrency: "unbounded" })
    )
    expect(result.map((answer) => answer.size)).toEqual(keys.map(() => size))
    for (const key of keys) expect(Option.getOrThrow(yield* media.stat(key)).size).toBe(size)
    // The bytes of the last one back, hashed as they stream.
    const hash = createHash("sha256")
    yield* Stream.runForEach(media.stream(keys[uploads - 1]!), (bytes) => Effect.sync(() => hash.update(bytes)))
    expect(hash.digest("hex")).toBe(expectedHash(uploads - 1, pieces))
    // Both peaks in the message, to see by how much a failure missed.
    expect(peak.rss, `peak growth ${JSON.stringify(peak)}`).toBeLessThan(allowed.rss)
    expect(peak.heap, `peak growth ${JSON.stringify(peak)}`).toBeLessThan(allowed.heap)
  }).pipe(Effect.provide(store), Effect.provide(Ids.layerTest))

describe("uploads stream into the stores in bounded memory", () => {
  it.live("20 uploads of 20 MiB at once into the file store", () => {
    const directory = join(root, "file")
    return uploadAll(FileMediaStore.layerWith({ directory, baseUrl: "http://127.0.0.1:8080/media" }), 20, 20 * mib, { heap: 32 * mib, rss: 200 * mib }).pipe(
      Effect.tap(() => Effect.sync(() => expect(readdirSync(directory).filter((name) => name.endsWith(".partial"))).toEqual([])))
    )
  }, 180_000)

  it.live.skipIf(checkingS3Url === undefined)(`50 uploads of 3 MiB at once into the S3 store${checkingS3SkipReason("upload-memory")}`, () => {
    const spoolDirectory = mkdtempSync(join(root, "spool-"))
    return uploadAll(
      S3MediaStore.layerWith({ bucket: checking!.bucket, prefix: "memory/", client: checking!.client, baseUrl: "http://127.0.0.1:8080/media", spoolDirectory }),
      50,
      3 * mib,
      { heap: 32 * mib, rss: 100 * mib }
    ).pipe(Effect.tap(() => Effect.sync(() => expect(readdirSync(spoolDirectory)).toEqual([]))))
  }, 120_000)
})
