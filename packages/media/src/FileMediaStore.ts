/**
 * MediaStore on the local file system: result files survive restarts, served by the HTTP
 * layer under /media/<key>.
 */
import { Ids, MediaError, MediaStore } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option } from "effect"
import { mkdir, readFile, rename, writeFile } from "node:fs/promises"
import { join } from "node:path"

/** Content types by extension, for the files we write. */
export const contentTypes: Readonly<Record<string, string>> = {
  png: "image/png",
  jpg: "image/jpeg",
  webp: "image/webp",
  mp4: "video/mp4"
}

/** Keys we hand out: 32 hex characters and a known extension. Anything else is never a file of ours. */
const keyPattern = /^[0-9a-f]{32}\.([a-z0-9]{2,4})$/

/** Options of the file media store. */
export interface Options {
  /** Folder the files are written to (created if missing). */
  readonly directory: string
  /** Public base URL, e.g. `http://127.0.0.1:8080/media`. */
  readonly baseUrl: string
}

/** A MediaStore writing files under `directory`. */
export const make = (options: Options): Effect.Effect<Context.Tag.Service<MediaStore.MediaStore>, MediaError, Ids.Ids> =>
  Effect.gen(function*() {
    const ids = yield* Ids.Ids
    const base = options.baseUrl.replace(/\/+$/, "")
    yield* Effect.tryPromise({
      try: () => mkdir(options.directory, { recursive: true }),
      catch: (cause) => new MediaError({ message: `cannot create media folder ${options.directory}`, cause })
    })
    return {
      put: ({ bytes, extension }) =>
        Effect.gen(function*() {
          const key = `${yield* ids.token(16)}.${extension}`
          const path = join(options.directory, key)
          // Write then rename: a crash never leaves a half-written file under a served name.
          yield* Effect.tryPromise({
            try: async () => {
              await writeFile(`${path}.partial`, bytes)
              await rename(`${path}.partial`, path)
            },
            catch: (cause) => new MediaError({ message: `cannot write ${key}`, cause })
          })
          return `${base}/${key}`
        }),
      get: (key) => {
        const match = keyPattern.exec(key)
        if (match === null) return Effect.succeed(Option.none())
        return Effect.tryPromise({
          try: () => readFile(join(options.directory, key)),
          catch: (cause) => cause as NodeJS.ErrnoException
        }).pipe(
          Effect.map((bytes) =>
            Option.some({ bytes: new Uint8Array(bytes), contentType: contentTypes[match[1]!] ?? "application/octet-stream" })
          ),
          Effect.catchAll((error) =>
            error.code === "ENOENT"
              ? Effect.succeed(Option.none())
              : Effect.fail(new MediaError({ message: `cannot read ${key}`, cause: error }))
          )
        )
      }
    }
  })

/** The file MediaStore layer. */
export const layer = (options: Options): Layer.Layer<MediaStore.MediaStore, MediaError, Ids.Ids> =>
  Layer.effect(MediaStore.MediaStore, make(options))
