/**
 * The temporary files a crash mid-upload leaves (issue 36): the file store's `<key>.<random>.partial`
 * in its folder and the S3 store's `mediagate-upload-<key>.partial` spool files are deleted
 * when the store's layer starts, once unwritten for an hour (`Spool.leftoverAge`, by file
 * time against the Clock); younger ones (an upload in progress, maybe in another process)
 * and every other file stay. Real files in temporary folders, aged with utimes.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Ids, MediaStore } from "@mediagate/core"
import { Duration, Effect, Layer, TestClock } from "effect"
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { FileMediaStore } from "../src/index.js"
import { S3MediaStore } from "../src/s3.js"
import { leftoverAge, sweepLeftovers } from "../src/Spool.js"
import { startS3rver } from "./S3rver.js"

const root = mkdtempSync(join(tmpdir(), "mediagate-leftovers-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))
let folders = 0

/** The Clock's now: the test's own, fixed. */
const now = Date.UTC(2030, 0, 1)
const key = (n: number) => `${String(n).padStart(32, "0")}.png`

/** A fresh folder holding `files`, each written `age` before `now`. */
const folderWith = (files: Record<string, Duration.DurationInput>) => {
  const directory = join(root, `folder-${++folders}`)
  mkdirSync(directory)
  for (const [name, age] of Object.entries(files)) {
    const path = join(directory, name)
    writeFileSync(path, "half an upload")
    const at = new Date(now - Duration.toMillis(age))
    utimesSync(path, at, at)
  }
  return directory
}

const atNow = TestClock.setTime(now)
const justOld = Duration.sum(leftoverAge, "1 second")
const justYoung = Duration.subtract(leftoverAge, "1 second")

describe("temporary files left by interrupted uploads", () => {
  it.effect("sweepLeftovers deletes the files it names unwritten for an hour; younger ones and other names stay", () =>
    Effect.gen(function*() {
      yield* atNow
      const directory = folderWith({ "ours-old": justOld, "ours-young": justYoung, "theirs-old": "1 day" })
      expect(yield* sweepLeftovers({ directory, ours: /^ours-/ })).toBe(1)
      expect(readdirSync(directory).sort()).toEqual(["ours-young", "theirs-old"])
      // A folder that cannot be listed: logged, no failure.
      expect(yield* sweepLeftovers({ directory: join(directory, "missing"), ours: /^ours-/ })).toBe(0)
    }))

  it.effect("the file store's layer deletes the partial files a crash left, with or without a retention; its stored files stay", () =>
    Effect.gen(function*() {
      yield* atNow
      const files: Record<string, Duration.DurationInput> = {
        [`${key(1)}.0123456789abcdef.partial`]: justOld,
        [`${key(2)}.fedcba9876543210.partial`]: justYoung,
        // A stored file as old: no retention, kept forever.
        [key(3)]: "30 days",
        "notes.txt.0123.partial": "30 days"
      }
      const directory = folderWith(files)
      yield* Effect.provide(MediaStore.MediaStore, FileMediaStore.layerWith({ directory, baseUrl: "http://127.0.0.1:1/media" }).pipe(Layer.provide(Ids.layerTest)))
      expect(readdirSync(directory).sort()).toEqual([`${key(2)}.fedcba9876543210.partial`, key(3), "notes.txt.0123.partial"])
      const kept = folderWith(files)
      const retention = FileMediaStore.layerWith({ directory: kept, baseUrl: "http://127.0.0.1:1/media", retention: "300 days" })
      yield* Effect.provide(MediaStore.MediaStore, retention.pipe(Layer.provide(Ids.layerTest)))
      // Before the retention's own sweep (forked) has run: the partial file went as the layer started.
      expect(readdirSync(kept)).not.toContain(`${key(1)}.0123456789abcdef.partial`)
      expect(readdirSync(kept)).toContain(`${key(2)}.fedcba9876543210.partial`)
    }))

  it.effect("the S3 store's layer deletes the spool files a crash left in its spool folder; younger ones and other files stay", () =>
    Effect.gen(function*() {
      yield* atNow
      const spoolDirectory = folderWith({
        [`mediagate-upload-${key(1)}.partial`]: justOld,
        [`mediagate-upload-${key(2)}.partial`]: justYoung,
        [`other-${key(3)}.partial`]: "1 day",
        [key(4)]: "1 day"
      })
      const s3 = yield* Effect.acquireRelease(Effect.promise(startS3rver), (server) => Effect.promise(() => server.close()))
      const layer = S3MediaStore.layerWith({ bucket: s3.bucket, prefix: "leftovers/", client: s3.client, baseUrl: "http://127.0.0.1:1/media", spoolDirectory })
      yield* Effect.provide(MediaStore.MediaStore, layer)
      expect(readdirSync(spoolDirectory).sort()).toEqual([key(4), `mediagate-upload-${key(2)}.partial`, `other-${key(3)}.partial`])
    }).pipe(Effect.scoped))
})
