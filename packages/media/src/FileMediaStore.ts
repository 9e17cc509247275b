/**
 * MediaStore on the local file system: result files survive restarts, served by the HTTP
 * layer under /media/<key>, read from disk piece by piece. With a retention, files stored
 * longer ago than that are deleted by a periodic sweep.
 */
import { Ids, MediaError, MediaStore } from "@mediagate/core"
import type { Context } from "effect"
import { Clock, Duration, Effect, Layer, Option, Stream } from "effect"
import { createReadStream } from "node:fs"
import { mkdir, readFile, rename, stat, unlink, utimes, writeFile } from "node:fs/promises"
import { join } from "node:path"
import * as NodeDigest from "./internal/NodeDigest.js"
import { deleteStale, discard, spool, sweepLeftovers } from "./Spool.js"

/** Options of the file media store. */
export interface Options {
  /** Folder the files are written to (created if missing). */
  readonly directory: string
  /** Public base URL, e.g. `http://127.0.0.1:8080/media`. */
  readonly baseUrl: string
  /** How long a file is kept after it was last stored; by default forever. */
  readonly retention?: Duration.DurationInput
  /** How often the layer sweeps when there is a retention; by default the retention, at most an hour. */
  readonly sweepInterval?: Duration.DurationInput
}

const errorCode = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause ? String(cause.code) : undefined

const attempt = <A>(run: () => Promise<A>, message: string): Effect.Effect<A, MediaError> =>
  Effect.tryPromise({ try: run, catch: (cause) => new MediaError({ message, cause }) })

/**
 * A storage failure (not a missing file) is logged here as a warning with the file's key, so
 * an operator sees a vanished or unwritable media folder whatever the caller does with it.
 */
const warn = (key: string) => (error: MediaError) =>
  Effect.logWarning(`mediagate: media storage failed: ${error.message}`, error.cause).pipe(Effect.annotateLogs("mediaKey", key))

/** A MediaStore writing files under `directory` (without the sweep: see `layerWith` and `sweep`). */
export const make = (options: Options): Effect.Effect<Context.Tag.Service<MediaStore.MediaStore>, MediaError, Ids.Ids> =>
  Effect.gen(function*() {
    const ids = yield* Ids.Ids
    const { directory } = options
    const base = options.baseUrl.replace(/\/+$/, "")
    yield* attempt(() => mkdir(directory, { recursive: true }), `cannot create media folder ${directory}`)

    /**
     * A file that is not there: no such file (none), unless the folder itself is gone, which
     * is a storage failure and must not pass for a 404.
     */
    const absent = (key: string, cause: unknown) =>
      Effect.tryPromise(() => stat(directory)).pipe(
        Effect.option,
        Effect.flatMap((folder) =>
          Option.isSome(folder) && folder.value.isDirectory()
            ? Effect.succeedNone
            : Effect.fail(new MediaError({ message: `media folder ${directory} is gone; cannot read ${key}`, cause }))
        )
      )

    /** Reads something of the file under a well-formed key; none when there is no such file. */
    const read = <A>(key: string, run: (path: string) => Promise<A>): Effect.Effect<Option.Option<A>, MediaError> =>
      Option.isNone(MediaStore.parseKey(key)) ? Effect.succeedNone : Effect.tryPromise({
        try: () => run(join(directory, key)),
        catch: (cause) => cause
      }).pipe(
        Effect.map(Option.some),
        Effect.catchAll((cause) =>
          errorCode(cause) === "ENOENT" ? absent(key, cause) : Effect.fail(new MediaError({ message: `cannot read ${key}`, cause }))
        ),
        Effect.tapError(warn(key))
      )

    /** Renews the time of a file already stored with these bytes; false when there is none. */
    const renew = (path: string, size: number, now: Date) =>
      Effect.tryPromise(async () => {
        if ((await stat(path)).size !== size) return false
        await utimes(path, now, now)
        return true
      }).pipe(Effect.orElseSucceed(() => false))

    return {
      put: ({ bytes, extension }) =>
        Effect.gen(function*() {
          const key = yield* MediaStore.keyOf(bytes, extension, NodeDigest.sha256)
          const path = join(directory, key)
          // The file's time is when it was last stored, from the Clock: the retention counts
          // from the latest put, so a URL just handed out is never already expiring.
          const now = new Date(yield* Clock.currentTimeMillis)
          if (yield* renew(path, bytes.length, now)) return `${base}/${key}`
          // Write then rename: a crash never leaves a half-written file under a served name, and
          // a temporary name per put keeps two puts of the same bytes out of each other's file.
          const partial = `${path}.${yield* ids.token(8)}.partial`
          yield* attempt(
            () =>
              writeFile(partial, bytes)
                .then(() => utimes(partial, now, now))
                .then(() => rename(partial, path))
                .catch((error: unknown) => unlink(partial).catch(() => undefined).then(() => Promise.reject(error))),
            `cannot write ${key}`
          ).pipe(Effect.tapError(warn(key)))
          return `${base}/${key}`
        }),
      get: (key) =>
        read(key, (path) => readFile(path)).pipe(
          Effect.map(Option.map((bytes) => ({
            bytes: new Uint8Array(bytes),
            contentType: Option.getOrThrow(MediaStore.parseKey(key)).contentType
          })))
        ),
      stat: (key) =>
        read(key, (path) => stat(path)).pipe(
          Effect.map(Option.flatMap((found) =>
            found.isFile()
              ? Option.map(MediaStore.parseKey(key), ({ contentType, hash }) => ({ contentType, hash, size: found.size }))
              : Option.none()
          ))
        ),
      stream: (key, range) =>
        Option.isNone(MediaStore.parseKey(key))
          ? Stream.fail(new MediaError({ message: `no file ${key}` }))
          : Stream.suspend(() =>
            Stream.fromAsyncIterable<Uint8Array, MediaError>(
              createReadStream(join(directory, key), range === undefined ? {} : { start: range.start, end: range.end }),
              (cause) => new MediaError({ message: `cannot read ${key}`, cause })
            )
          ),
      putStream: ({ key, maxBytes, stream }) =>
        Effect.gen(function*() {
          if (Option.isNone(MediaStore.parseKey(key))) return yield* Effect.fail(new MediaError({ message: `'${key}' is not a media key` }))
          const path = join(directory, key)
          const now = new Date(yield* Clock.currentTimeMillis)
          // As `put`: written under a temporary name the sweep knows, renamed into place once
          // whole, so a half-written upload is never served.
          const partial = `${path}.${yield* ids.token(8)}.partial`
          const size = yield* spool(partial, stream, maxBytes, key)
          yield* attempt(() => utimes(partial, now, now).then(() => rename(partial, path)), `cannot write ${key}`).pipe(
            Effect.tapError(() => discard(partial))
          )
          return { url: `${base}/${key}`, size }
        }).pipe(Effect.tapError((error) => error instanceof MediaError ? warn(key)(error) : Effect.void)),
      remove: (key) =>
        Option.isNone(MediaStore.parseKey(key)) ? Effect.void : Effect.tryPromise({
          try: () => unlink(join(directory, key)),
          catch: (cause) => cause
        }).pipe(
          Effect.catchAll((cause) =>
            errorCode(cause) === "ENOENT" ? Effect.void : Effect.fail(new MediaError({ message: `cannot delete ${key}`, cause }))
          ),
          Effect.tapError(warn(key))
        )
    }
  })

/** Names `sweep` may delete: our files and what interrupted writes left. Nothing else in the folder is touched. */
const sweepable = /^[0-9a-f]{32}\.[a-z0-9]+(\.[0-9a-f]+\.partial)?$/

/**
 * Deletes the files of `directory` last stored more than `retention` ago (by the Clock) and
 * returns how many went. A file that cannot be deleted is logged with its name and left.
 */
export const sweep = (
  options: { readonly directory: string; readonly retention: Duration.DurationInput }
): Effect.Effect<number, MediaError> =>
  deleteStale({ directory: options.directory, ours: sweepable, age: options.retention, what: "an expired media file" }).pipe(
    Effect.tap((count) => count > 0 ? Effect.logInfo(`mediagate: deleted ${count} expired media file(s)`) : Effect.void)
  )

/** The temporary names of `put` and `putStream` (`<key>.<random>.partial`): what a crash mid-write leaves. */
const partial = /^[0-9a-f]{32}\.[a-z0-9]+\.[0-9a-f]+\.partial$/

/**
 * The file MediaStore. When the layer starts it deletes the temporary files a crash left
 * (`Spool.sweepLeftovers`). With a `retention`, a sweep runs when the layer starts and then
 * every `sweepInterval` for as long as the layer's scope is open; a failed sweep is logged and
 * tried again at the next interval.
 */
export const layerWith = (options: Options): Layer.Layer<MediaStore.MediaStore, MediaError, Ids.Ids> =>
  Layer.scoped(
    MediaStore.MediaStore,
    Effect.gen(function*() {
      const store = yield* make(options)
      // Whatever the retention (none: files are kept forever), what a crash left half-written goes.
      yield* sweepLeftovers({ directory: options.directory, ours: partial })
      const { retention } = options
      if (retention !== undefined) {
        const interval = options.sweepInterval ?? Duration.min(Duration.decode(retention), Duration.hours(1))
        yield* sweep({ directory: options.directory, retention }).pipe(
          Effect.catchAll((error) => Effect.logWarning("mediagate: the sweep of expired media files failed", error)),
          Effect.zipRight(Effect.sleep(interval)),
          Effect.forever,
          Effect.forkScoped
        )
      }
      return store
    })
  )

/** The file MediaStore layer: `layerWith`, under the name the standalone server uses. */
export const layer: (options: Options) => Layer.Layer<MediaStore.MediaStore, MediaError, Ids.Ids> = layerWith
