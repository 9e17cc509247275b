import { afterAll, describe, expect, it } from "@effect/vitest"
import { Ids, MediaError, MediaStore } from "@mediagate/core"
import { Effect, Exit, HashMap, Layer, Logger, Option, Stream, TestClock } from "effect"
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { FileMediaStore } from "../src/index.js"
import * as NodeDigest from "../src/internal/NodeDigest.js"

const root = mkdtempSync(join(tmpdir(), "mediagate-media-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))
let folders = 0
/** A fresh folder per test, so no test sees another's files. */
const freshFolder = () => join(root, `store-${++folders}`, "nested")
const baseUrl = "http://127.0.0.1:8080/media/"

const withStore = <A, E>(
  f: (media: MediaStore.MediaStore["Type"], directory: string) => Effect.Effect<A, E>,
  options: Partial<FileMediaStore.Options> = {}
) => {
  const directory = freshFolder()
  return Effect.flatMap(MediaStore.MediaStore, (media) => f(media, directory)).pipe(
    Effect.provide(FileMediaStore.layerWith({ directory, baseUrl, ...options }).pipe(Layer.provide(Ids.layerTest)))
  )
}

const keyOfUrl = (url: string) => url.split("/").pop()!
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")
const bytesOf = (length: number, salt = 0) => Uint8Array.from({ length }, (_, i) => (i * 31 + salt) % 251)

/** Log lines, with their level, first message part and annotations. */
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

/** Lets the event loop run (file I/O of a forked fiber) until `done`, at most `turns` times, without waiting on time. */
const runEventLoop = (turns: number, done: () => boolean = () => false) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < turns && !done(); turn++) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
  })

describe("FileMediaStore", () => {
  // What every store does (keys, types, ranges, missing keys) is the contract's: test/media-store-contract.test.ts.

  it.effect("the same bytes stored twice are one file in the folder, named by their key", () =>
    withStore((media, directory) =>
      Effect.gen(function*() {
        const url = yield* media.put({ bytes: bytesOf(10), contentType: "image/png", extension: "png" })
        expect(yield* media.put({ bytes: bytesOf(10), contentType: "image/png", extension: "png" })).toBe(url)
        expect(keyOfUrl(url)).toBe(`${sha256(bytesOf(10)).slice(0, 32)}.png`)
        expect(readdirSync(directory)).toEqual([keyOfUrl(url)])
      })
    ))

  it.effect("files are named as MediaStore.keyOf names them: hashed at once up to the limit, in the thread pool above it", () =>
    withStore((media) =>
      Effect.gen(function*() {
        for (const length of [0, 1, NodeDigest.syncLimit, NodeDigest.syncLimit + 1]) {
          const bytes = bytesOf(length, length)
          const url = yield* media.put({ bytes, contentType: "image/png", extension: "png" })
          // The key every store gives these bytes (WebCrypto's SHA-256, core's default).
          expect(keyOfUrl(url)).toBe(yield* MediaStore.keyOf(bytes, "png"))
          expect(keyOfUrl(url)).toBe(`${sha256(bytes).slice(0, 32)}.png`)
          // runSync refuses an effect that waits for the thread pool.
          const atOnce = Exit.isSuccess(Effect.runSyncExit(NodeDigest.sha256(bytes)))
          expect(atOnce).toBe(length <= NodeDigest.syncLimit)
        }
      })
    ))

  it.effect("keys that are not ours are never read, whatever is on disk", () =>
    withStore((media, directory) =>
      Effect.gen(function*() {
        writeFileSync(join(directory, "secret.txt"), "secret")
        writeFileSync(join(directory, `${"a".repeat(32)}.txt`), "secret")
        for (const key of ["../secret.txt", "..%2Fsecret.txt", "secret.txt", `${"a".repeat(32)}.png/../../secret.txt`, `${"a".repeat(32)}.txt`, "", "0".repeat(32) + ".png"]) {
          expect(Option.isNone(yield* media.get(key))).toBe(true)
          expect(Option.isNone(yield* media.stat(key))).toBe(true)
        }
        expect(Exit.isFailure(yield* Effect.exit(Stream.runDrain(media.stream("../secret.txt"))))).toBe(true)
      })
    ))

  it.effect("sweep deletes only files last stored longer ago than the retention; storing again renews a file", () =>
    withStore((media, directory) =>
      Effect.gen(function*() {
        const old = yield* media.put({ bytes: bytesOf(100, 1), contentType: "image/png", extension: "png" })
        const renewed = yield* media.put({ bytes: bytesOf(100, 2), contentType: "image/png", extension: "png" })
        writeFileSync(join(directory, "notes.txt"), "not ours")
        utimesSync(join(directory, "notes.txt"), 0, 0)
        yield* TestClock.adjust("20 hours")
        const young = yield* media.put({ bytes: bytesOf(100, 3), contentType: "image/png", extension: "png" })
        expect(yield* media.put({ bytes: bytesOf(100, 2), contentType: "image/png", extension: "png" })).toBe(renewed)
        yield* TestClock.adjust("5 hours")

        expect(yield* FileMediaStore.sweep({ directory, retention: "1 day" })).toBe(1)
        expect(Option.isNone(yield* media.stat(keyOfUrl(old)))).toBe(true)
        expect(Option.isSome(yield* media.stat(keyOfUrl(renewed)))).toBe(true)
        expect(Option.isSome(yield* media.stat(keyOfUrl(young)))).toBe(true)
        expect(existsSync(join(directory, "notes.txt"))).toBe(true)
        expect(yield* FileMediaStore.sweep({ directory, retention: "1 day" })).toBe(0)
      })
    ))

  it.effect("a file the sweep cannot delete is logged at warning level with its name, and the sweep goes on", () => {
    const logs = captureLogs()
    return withStore((media, directory) =>
      Effect.gen(function*() {
        // A folder under a key's name: unlink refuses it (as it would refuse a file it has no permission for).
        const stuck = `${"b".repeat(32)}.png`
        mkdirSync(join(directory, stuck))
        utimesSync(join(directory, stuck), 0, 0)
        const old = yield* media.put({ bytes: bytesOf(10), contentType: "image/png", extension: "png" })
        yield* TestClock.adjust("2 days")
        expect(yield* FileMediaStore.sweep({ directory, retention: "1 day" })).toBe(1)
        expect(Option.isNone(yield* media.stat(keyOfUrl(old)))).toBe(true)
        expect(logs.lines).toContainEqual(expect.objectContaining({ level: "WARN", annotations: { file: stuck } }))
      })
    ).pipe(Effect.provide(logs.layer))
  })

  it.effect("with a retention, the layer sweeps by itself every interval of the Clock", () => {
    const logs = captureLogs()
    const swept = () => logs.lines.some((line) => line.message.includes("deleted 1 expired"))
    return withStore(
      (media, directory) =>
        Effect.gen(function*() {
          const old = yield* media.put({ bytes: bytesOf(10, 1), contentType: "image/png", extension: "png" })
          yield* TestClock.adjust("23 hours")
          const young = yield* media.put({ bytes: bytesOf(10, 2), contentType: "image/png", extension: "png" })
          expect(swept()).toBe(false)
          // Hour by hour, letting each sweep's file I/O finish: the first past 24 hours deletes `old`.
          for (let hour = 24; hour <= 30 && !swept(); hour++) {
            yield* TestClock.adjust("1 hour")
            yield* runEventLoop(200, swept)
          }
          expect(swept()).toBe(true)
          expect(existsSync(join(directory, keyOfUrl(old)))).toBe(false)
          expect(existsSync(join(directory, keyOfUrl(young)))).toBe(true)
        }),
      { retention: "1 day", sweepInterval: "1 hour" }
    ).pipe(Effect.provide(logs.layer))
  })

  it.effect("without a retention nothing is ever deleted", () =>
    withStore((media, directory) =>
      Effect.gen(function*() {
        const url = yield* media.put({ bytes: bytesOf(10), contentType: "image/png", extension: "png" })
        yield* TestClock.adjust("3650 days")
        yield* runEventLoop(50)
        expect(existsSync(join(directory, keyOfUrl(url)))).toBe(true)
      })
    ))

  it.effect("the folder removed under a running store is a MediaError, not a missing file, and each is logged at warning level", () => {
    const logs = captureLogs()
    return withStore((media, directory) =>
      Effect.gen(function*() {
        const key = keyOfUrl(yield* media.put({ bytes: bytesOf(10), contentType: "image/png", extension: "png" }))
        rmSync(directory, { recursive: true, force: true })
        expect(yield* Effect.flip(media.stat(key))).toBeInstanceOf(MediaError)
        expect(yield* Effect.flip(media.get(key))).toBeInstanceOf(MediaError)
        expect(yield* Effect.flip(media.put({ bytes: bytesOf(10), contentType: "image/png", extension: "png" }))).toBeInstanceOf(MediaError)
        expect(yield* Effect.flip(FileMediaStore.sweep({ directory, retention: "1 day" }))).toBeInstanceOf(MediaError)
        const warnings = logs.lines.filter((line) => line.level === "WARN" && line.annotations["mediaKey"] === key)
        expect(warnings).toHaveLength(3)
      })
    ).pipe(Effect.provide(logs.layer))
  })
})
