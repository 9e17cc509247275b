/**
 * MediaStore in memory: files live as long as the process.
 */
import { Ids, MediaStore } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option } from "effect"

/** Options of the memory media store. */
export interface Options {
  /** Public base URL the files are served under, e.g. `http://127.0.0.1:8080/media`. */
  readonly baseUrl: string
}

/** A MediaStore over a Map; keys are 128-bit random tokens plus the extension. */
export const make = (
  options: Options
): Effect.Effect<Context.Tag.Service<MediaStore.MediaStore>, never, Ids.Ids> =>
  Effect.gen(function*() {
    const ids = yield* Ids.Ids
    const files = new Map<string, MediaStore.MediaObject>()
    const base = options.baseUrl.replace(/\/+$/, "")
    return {
      put: ({ bytes, contentType, extension }) =>
        Effect.map(ids.token(16), (token) => {
          const key = `${token}.${extension}`
          files.set(key, { bytes, contentType })
          return `${base}/${key}`
        }),
      get: (key) => Effect.sync(() => Option.fromNullable(files.get(key)))
    }
  })

/** The memory MediaStore layer. */
export const layer = (options: Options): Layer.Layer<MediaStore.MediaStore, never, Ids.Ids> =>
  Layer.effect(MediaStore.MediaStore, make(options))
