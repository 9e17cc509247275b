/**
 * The contract of `MediaStore.putStream` and `remove` (uploads), one suite that every store
 * runs unchanged (test/media-upload-contract.test.ts): the bytes come back byte for byte, past
 * the limit or when the client's stream fails nothing is stored and nothing is left behind
 * (`leftovers` lists what a store holds on disk or in its bucket: no temporary file, no
 * object), and reading stops at the limit.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Ids } from "@mediagate/core"
import { MediaError, MediaStore, MediaTooLarge } from "@mediagate/core"
import { Data, Deferred, Effect, Fiber, Option, Stream } from "effect"
import { bytesOf, collect, type FreshStore } from "./MediaStoreContract.js"

/** A fresh store and what it leaves behind: names of files in its folders, objects under its prefix. */
export interface FreshStreamStore {
  readonly store: FreshStore
  readonly leftovers: () => Promise<ReadonlyArray<string>>
}

/** The client's stream failing on its own. */
export class SourceFailed extends Data.TaggedError("SourceFailed")<{ readonly at: number }> {}

const baseUrl = "http://127.0.0.1:8080/media"

let keys = 0
/** A fresh well-formed key (as random hex would be). */
export const freshKey = (extension: string) => `${(++keys).toString(16).padStart(32, "0")}.${extension}`

/** `count` pieces of `size` bytes made one at a time when pulled; `pulled` counts them. */
export const lazyPieces = (count: number, size: number, salt = 0) => {
  const state = { pulled: 0 }
  const stream = Stream.unfold(0, (index) => {
    if (index >= count) return Option.none()
    state.pulled++
    return Option.some([bytesOf(size, index + salt), index + 1] as const)
  })
  return { stream, state }
}

/** Registers the contract's tests for the stores `fresh` makes (skipped with a reason, as MediaStoreContract). */
export const streamStoreContract = (
  label: string,
  fresh: () => FreshStreamStore,
  provide: <A, E>(effect: Effect.Effect<A, E, Ids.Ids>) => Effect.Effect<A, E, never>,
  skipped = ""
) =>
  describe.skipIf(skipped !== "")(`MediaStore putStream and remove: ${label}${skipped}`, () => {
    const withStore = <A, E>(f: (media: MediaStore.MediaStore["Type"], leftovers: () => Effect.Effect<ReadonlyArray<string>>) => Effect.Effect<A, E>) => {
      const { leftovers, store } = fresh()
      return provide(Effect.flatMap(MediaStore.MediaStore, (media) => f(media, () => Effect.promise(leftovers))).pipe(Effect.provide(store(baseUrl))))
    }

    it.effect("a streamed file comes back byte for byte under its key, with its size, type and range", () =>
      withStore((media) =>
        Effect.gen(function*() {
          const key = freshKey("mp4")
          const { stream } = lazyPieces(40, 65_536 + 7)
          const expected = Buffer.concat(Array.from({ length: 40 }, (_, index) => bytesOf(65_536 + 7, index)))
          const answer = yield* media.putStream({ key, stream, maxBytes: expected.length })
          expect(answer).toEqual({ url: `${baseUrl}/${key}`, size: expected.length })
          expect(Option.getOrThrow(yield* media.stat(key))).toEqual({ contentType: "video/mp4", size: expected.length, hash: key.slice(0, 32) })
          expect((yield* collect(media.stream(key))).equals(expected)).toBe(true)
          expect(Buffer.from(Option.getOrThrow(yield* media.get(key)).bytes).equals(expected)).toBe(true)
          const range = yield* collect(media.stream(key, { start: 65_000, end: 1_000_000 }))
          expect(range.equals(expected.subarray(65_000, 1_000_001))).toBe(true)
        })
      ))

    it.effect("an empty stream is an empty file; a file of exactly the limit is stored", () =>
      withStore((media) =>
        Effect.gen(function*() {
          const empty = freshKey("png")
          expect(yield* media.putStream({ key: empty, stream: Stream.empty, maxBytes: 10 })).toEqual({ url: `${baseUrl}/${empty}`, size: 0 })
          expect(Option.getOrThrow(yield* media.stat(empty)).size).toBe(0)
          const exact = freshKey("png")
          expect((yield* media.putStream({ key: exact, stream: lazyPieces(10, 1000).stream, maxBytes: 10_000 })).size).toBe(10_000)
          expect(Option.getOrThrow(yield* media.stat(exact)).size).toBe(10_000)
        })
      ))

    it.effect("past the limit: MediaTooLarge, reading stops, nothing stored and nothing left behind", () =>
      withStore((media, leftovers) =>
        Effect.gen(function*() {
          const before = yield* leftovers()
          const key = freshKey("png")
          const { state, stream } = lazyPieces(1000, 1000)
          const error = yield* Effect.flip(media.putStream({ key, stream, maxBytes: 10_500 }))
          expect(error).toEqual(new MediaTooLarge({ maxBytes: 10_500 }))
          expect(state.pulled).toBeLessThanOrEqual(12)
          expect(Option.isNone(yield* media.stat(key))).toBe(true)
          expect(Option.isNone(yield* media.get(key))).toBe(true)
          expect(yield* leftovers()).toEqual(before)
        })
      ))

    it.effect("a failing source stream fails the upload with its own error and leaves nothing", () =>
      withStore((media, leftovers) =>
        Effect.gen(function*() {
          const before = yield* leftovers()
          const key = freshKey("jpg")
          const stream = Stream.concat(lazyPieces(20, 10_000).stream, Stream.fail(new SourceFailed({ at: 200_000 })))
          const error = yield* Effect.flip(media.putStream({ key, stream, maxBytes: 10_000_000 }))
          expect(error).toEqual(new SourceFailed({ at: 200_000 }))
          expect(Option.isNone(yield* media.stat(key))).toBe(true)
          expect(yield* leftovers()).toEqual(before)
        })
      ))

    it.effect("an upload interrupted halfway leaves nothing", () =>
      withStore((media, leftovers) =>
        Effect.gen(function*() {
          const before = yield* leftovers()
          const key = freshKey("gif")
          const started = yield* Deferred.make<void>()
          const stream = Stream.concat(
            lazyPieces(5, 10_000).stream,
            Stream.fromEffect(Deferred.succeed(started, undefined)).pipe(Stream.flatMap(() => Stream.never))
          )
          const fiber = yield* Effect.fork(media.putStream({ key, stream, maxBytes: 10_000_000 }))
          yield* Deferred.await(started)
          yield* Fiber.interrupt(fiber)
          expect(Option.isNone(yield* media.stat(key))).toBe(true)
          expect(yield* leftovers()).toEqual(before)
        })
      ))

    it.effect("remove deletes the file; removing it again, or a name that is not a key, does nothing", () =>
      withStore((media, leftovers) =>
        Effect.gen(function*() {
          const key = freshKey("webp")
          yield* media.putStream({ key, stream: lazyPieces(3, 100).stream, maxBytes: 1000 })
          const kept = yield* media.put({ bytes: bytesOf(50), contentType: "image/png", extension: "png" })
          expect(Option.isSome(yield* media.stat(key))).toBe(true)
          yield* media.remove(key)
          expect(Option.isNone(yield* media.stat(key))).toBe(true)
          expect(Option.isNone(yield* media.get(key))).toBe(true)
          yield* media.remove(key)
          yield* media.remove("../secret.txt")
          expect(Option.isSome(yield* media.stat(kept.split("/").pop()!))).toBe(true)
          expect((yield* leftovers()).filter((name) => name.includes(key.slice(0, 32)))).toEqual([])
        })
      ))

    it.effect("a name that is not a key is refused before anything is read", () =>
      withStore((media) =>
        Effect.gen(function*() {
          for (const key of ["../x.png", `${"a".repeat(32)}.html`, `${"A".repeat(32)}.png`, "upload.png"]) {
            const { state, stream } = lazyPieces(3, 10)
            expect(yield* Effect.flip(media.putStream({ key, stream, maxBytes: 1000 }))).toBeInstanceOf(MediaError)
            expect(state.pulled).toBe(0)
          }
        })
      ))
  })
