/**
 * MediaStore in memory: files live as long as the process (or until removed).
 */
import { MediaError, MediaStore, MediaTooLarge } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option, Stream } from "effect"

/** Options of the memory media store. */
export interface Options {
  /** Public base URL the files are served under, e.g. `http://127.0.0.1:8080/media`. */
  readonly baseUrl: string
}

/** A MediaStore over a Map, keyed by content (`MediaStore.keyOf`). */
export const make = (
  options: Options
): Effect.Effect<Context.Tag.Service<MediaStore.MediaStore>> =>
  Effect.sync(() => {
    const files = new Map<string, MediaStore.MediaObject>()
    const base = options.baseUrl.replace(/\/+$/, "")
    const find = (key: string) => Option.flatMap(MediaStore.parseKey(key), () => Option.fromNullable(files.get(key)))
    return {
      put: ({ bytes, extension }) =>
        Effect.map(MediaStore.keyOf(bytes, extension), (key) => {
          // A copy: the caller may reuse its buffer, and a key must keep naming these bytes.
          if (!files.has(key)) files.set(key, { bytes: bytes.slice(), contentType: Option.getOrThrow(MediaStore.parseKey(key)).contentType })
          return `${base}/${key}`
        }),
      get: (key) => Effect.sync(() => find(key)),
      stat: (key) =>
        Effect.sync(() =>
          Option.map(find(key), (file) => ({
            contentType: file.contentType,
            size: file.bytes.length,
            hash: Option.getOrThrow(MediaStore.parseKey(key)).hash
          }))
        ),
      stream: (key, range) =>
        Stream.suspend(() =>
          Option.match(find(key), {
            onNone: () => Stream.fail(new MediaError({ message: `no file ${key}` })),
            onSome: ({ bytes }) => Stream.succeed(range === undefined ? bytes : bytes.subarray(range.start, range.end + 1))
          })
        ),
      putStream: ({ key, maxBytes, stream }) =>
        Option.match(MediaStore.parseKey(key), {
          onNone: () => Effect.fail(new MediaError({ message: `'${key}' is not a media key` })),
          onSome: ({ contentType }) =>
            // The pieces are kept as they come (this store is memory), but reading stops at
            // the first one past `maxBytes`, and only a whole file is stored.
            Stream.runFoldEffect(stream, { parts: [] as Array<Uint8Array>, size: 0 }, (acc, bytes) => {
              const size = acc.size + bytes.length
              if (size > maxBytes) return Effect.fail(new MediaTooLarge({ maxBytes }))
              acc.parts.push(bytes.slice())
              return Effect.succeed({ parts: acc.parts, size })
            }).pipe(Effect.map(({ parts, size }) => {
              const bytes = new Uint8Array(size)
              parts.reduce((offset, part) => (bytes.set(part, offset), offset + part.length), 0)
              files.set(key, { bytes, contentType })
              return { url: `${base}/${key}`, size }
            }))
        }),
      remove: (key) => Effect.sync(() => void files.delete(key))
    }
  })

/** The memory MediaStore layer. */
export const layer = (options: Options): Layer.Layer<MediaStore.MediaStore> =>
  Layer.effect(MediaStore.MediaStore, make(options))
