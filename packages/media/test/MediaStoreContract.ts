/**
 * The MediaStore contract: one suite that every store runs unchanged (memory, file, S3;
 * test/media-store-contract.test.ts). Each test gets a store of its own from `fresh`, so no
 * test sees another's files. What only one store has (a folder on disk, a bucket's
 * retention) stays in that store's own tests.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Ids } from "@mediagate/core"
import { MediaError, MediaStore } from "@mediagate/core"
import type { Layer } from "effect"
import { Chunk, Effect, Exit, Option, Stream } from "effect"
import { createHash } from "node:crypto"

/** A fresh, empty store whose URLs start with `baseUrl`. */
export type FreshStore = (baseUrl: string) => Layer.Layer<MediaStore.MediaStore, MediaError, Ids.Ids>

const baseUrl = "http://127.0.0.1:8080/media/"
const keyOfUrl = (url: string) => url.split("/").pop()!
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")
/** Bytes that differ by `salt`. */
export const bytesOf = (length: number, salt = 0) => Uint8Array.from({ length }, (_, i) => (i * 31 + salt) % 251)

/** A stream's bytes in one buffer. */
export const collect = (stream: Stream.Stream<Uint8Array, MediaError>) =>
  Effect.map(Stream.runCollect(stream), (chunks) => Buffer.concat(Chunk.toReadonlyArray(chunks)))

/**
 * Registers the contract's tests for the store `fresh` makes; `provide` gives what the
 * store's layer still needs (Ids). With `skipped` (why, for the suite's name) they are
 * registered skipped: a store whose server this run does not have.
 */
export const mediaStoreContract = (
  label: string,
  fresh: () => FreshStore,
  provide: <A, E>(effect: Effect.Effect<A, E, Ids.Ids>) => Effect.Effect<A, E, never>,
  skipped = ""
) =>
  describe.skipIf(skipped !== "")(`MediaStore contract: ${label}${skipped}`, () => {
    const withStore = <A, E>(f: (media: MediaStore.MediaStore["Type"]) => Effect.Effect<A, E>) =>
      provide(Effect.flatMap(MediaStore.MediaStore, f).pipe(Effect.provide(fresh()(baseUrl))))

    it.effect("the key is the SHA-256 of the bytes: the same bytes give one URL, other bytes another", () =>
      withStore((media) =>
        Effect.gen(function*() {
          const bytes = new Uint8Array([137, 80, 78, 71])
          const url = yield* media.put({ bytes, contentType: "image/png", extension: "png" })
          expect(url).toBe(`http://127.0.0.1:8080/media/${sha256(bytes).slice(0, 32)}.png`)
          expect(yield* media.put({ bytes: Uint8Array.from(bytes), contentType: "image/png", extension: "png" })).toBe(url)
          const other = yield* media.put({ bytes: new Uint8Array([137, 80, 78, 72]), contentType: "image/png", extension: "png" })
          expect(other).not.toBe(url)
          expect(Option.getOrThrow(yield* media.get(keyOfUrl(url)))).toEqual({ bytes, contentType: "image/png" })
          expect(Option.getOrThrow(yield* media.get(keyOfUrl(other))).bytes).toEqual(new Uint8Array([137, 80, 78, 72]))
        })
      ))

    it.effect("the stored bytes are a copy: the caller may reuse its buffer", () =>
      withStore((media) =>
        Effect.gen(function*() {
          const bytes = bytesOf(1000, 9)
          const key = keyOfUrl(yield* media.put({ bytes, contentType: "image/png", extension: "png" }))
          const original = Uint8Array.from(bytes)
          bytes.fill(0)
          expect(Option.getOrThrow(yield* media.get(key)).bytes).toEqual(original)
        })
      ))

    it.effect("the type served is the extension's; an extension that is not served is refused", () =>
      withStore((media) =>
        Effect.gen(function*() {
          const expected = {
            png: "image/png",
            jpg: "image/jpeg",
            JPEG: "image/jpeg",
            webp: "image/webp",
            gif: "image/gif",
            mp4: "video/mp4",
            mov: "video/quicktime",
            mp3: "audio/mpeg",
            wav: "audio/wav"
          }
          for (const [extension, contentType] of Object.entries(expected)) {
            const url = yield* media.put({ bytes: bytesOf(10, extension.length), contentType: "application/octet-stream", extension })
            expect(url.endsWith(`.${extension.toLowerCase()}`)).toBe(true)
            expect(Option.getOrThrow(yield* media.stat(keyOfUrl(url)))).toMatchObject({ contentType, size: 10 })
            expect(Option.getOrThrow(yield* media.get(keyOfUrl(url))).contentType).toBe(contentType)
          }
          const refused = yield* Effect.flip(media.put({ bytes: bytesOf(10), contentType: "text/html", extension: "html" }))
          expect(refused).toBeInstanceOf(MediaError)
        })
      ))

    it.effect("stat gives size and hash; stream gives all bytes or exactly the range, first and last byte included", () =>
      withStore((media) =>
        Effect.gen(function*() {
          const bytes = bytesOf(300_000)
          const key = keyOfUrl(yield* media.put({ bytes, contentType: "video/mp4", extension: "mp4" }))
          expect(Option.getOrThrow(yield* media.stat(key))).toEqual({ contentType: "video/mp4", size: 300_000, hash: sha256(bytes).slice(0, 32) })
          expect((yield* collect(media.stream(key))).equals(bytes)).toBe(true)
          const ranges: ReadonlyArray<readonly [number, number]> = [[65_000, 200_000], [0, 0], [0, 99], [1, 1], [299_999, 299_999], [100, 299_999]]
          for (const [start, end] of ranges) {
            const got = yield* collect(media.stream(key, { start, end }))
            expect([start, end, got.length]).toEqual([start, end, end - start + 1])
            expect(got.equals(bytes.subarray(start, end + 1))).toBe(true)
          }
        })
      ))

    it.effect("an empty file is stored and served", () =>
      withStore((media) =>
        Effect.gen(function*() {
          const key = keyOfUrl(yield* media.put({ bytes: new Uint8Array(0), contentType: "image/png", extension: "png" }))
          expect(Option.getOrThrow(yield* media.stat(key)).size).toBe(0)
          expect((yield* collect(media.stream(key))).length).toBe(0)
        })
      ))

    it.effect("a key never stored is none for get and stat, and a failed stream", () =>
      withStore((media) =>
        Effect.gen(function*() {
          const key = `${"0".repeat(32)}.png`
          expect(Option.isNone(yield* media.get(key))).toBe(true)
          expect(Option.isNone(yield* media.stat(key))).toBe(true)
          const exit = yield* Effect.exit(Stream.runDrain(media.stream(key)))
          expect(Exit.isFailure(exit)).toBe(true)
        })
      ))

    it.effect("names that are not keys are never looked up: none, and a failed stream", () =>
      withStore((media) =>
        Effect.gen(function*() {
          yield* media.put({ bytes: bytesOf(10), contentType: "image/png", extension: "png" })
          for (const key of ["../secret.txt", "..%2Fsecret.txt", "secret.txt", `${"a".repeat(32)}.png/../../secret.txt`, `${"a".repeat(32)}.txt`, "", `${"A".repeat(32)}.png`]) {
            expect(Option.isNone(yield* media.get(key))).toBe(true)
            expect(Option.isNone(yield* media.stat(key))).toBe(true)
          }
          expect(Exit.isFailure(yield* Effect.exit(Stream.runDrain(media.stream("../secret.txt"))))).toBe(true)
        })
      ))

    it.effect("a stream is lazy: a file stored after the stream was made is read when it runs", () =>
      withStore((media) =>
        Effect.gen(function*() {
          const bytes = bytesOf(5000, 4)
          const key = keyOfUrl(yield* media.put({ bytes, contentType: "image/png", extension: "png" }))
          const later = bytesOf(5000, 5)
          const laterKey = `${sha256(later).slice(0, 32)}.png`
          const stream = media.stream(laterKey)
          yield* media.put({ bytes: later, contentType: "image/png", extension: "png" })
          expect((yield* collect(stream)).equals(later)).toBe(true)
          expect((yield* collect(media.stream(key))).equals(bytes)).toBe(true)
        })
      ))
  })
