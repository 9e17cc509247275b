/**
 * A stream of bytes written to a new file as it arrives, counted on the way: what the file
 * store's and the S3 store's `putStream` build on. Memory holds one piece at a time, never
 * the file: the next piece is pulled only once the last one is on disk. And the sweep of the
 * files a crashed process left half-written (`sweepLeftovers`).
 */
import { MediaError, MediaTooLarge } from "@mediagate/core"
import { Clock, Duration, Effect, Exit, Stream } from "effect"
import type { FileHandle } from "node:fs/promises"
import { open, readdir, stat, unlink } from "node:fs/promises"
import { join } from "node:path"

/** Writes all of `bytes` (a write may take only part of them). */
const writeAll = async (handle: FileHandle, bytes: Uint8Array) => {
  let offset = 0
  while (offset < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, offset, bytes.length - offset)
    offset += bytesWritten
  }
}

/** Deletes `path`, quietly: it may never have been created. */
export const discard = (path: string): Effect.Effect<void> => Effect.promise(() => unlink(path).catch(() => undefined))

/**
 * Writes `stream` to a new file at `path` (it must not exist) and answers its size. Past
 * `maxBytes` it stops pulling and fails with MediaTooLarge; the stream's own failure fails it
 * as it is. On any failure or interruption the file is deleted: nothing half-written stays.
 */
export const spool = <E>(
  path: string,
  stream: Stream.Stream<Uint8Array, E>,
  maxBytes: number,
  label: string
): Effect.Effect<number, MediaError | MediaTooLarge | E> =>
  Effect.acquireUseRelease(
    Effect.tryPromise({ try: () => open(path, "wx"), catch: (cause) => new MediaError({ message: `cannot write ${label}`, cause }) }),
    (handle) =>
      Stream.runFoldEffect(stream, 0, (size, bytes): Effect.Effect<number, MediaError | MediaTooLarge> => {
        const next = size + bytes.length
        if (next > maxBytes) return Effect.fail(new MediaTooLarge({ maxBytes }))
        return Effect.as(
          Effect.tryPromise({ try: () => writeAll(handle, bytes), catch: (cause) => new MediaError({ message: `cannot write ${label}`, cause }) }),
          next
        )
      }),
    // Deleted only once opened here: a name that already existed (EEXIST) is someone else's.
    (handle, exit) =>
      Effect.zipRight(
        Effect.promise(() => handle.close().catch(() => undefined)),
        Exit.isSuccess(exit) ? Effect.void : discard(path)
      )
  )

/**
 * Deletes the files of `directory` that `ours` names and that were last written more than
 * `age` ago (by the Clock); how many went. A file that cannot be deleted is logged (as `what`,
 * with its name) and left; one gone already is no matter; a folder that cannot be listed fails.
 * Nothing else in the folder is looked at.
 */
export const deleteStale = (options: {
  readonly directory: string
  readonly ours: RegExp
  readonly age: Duration.DurationInput
  readonly what: string
}): Effect.Effect<number, MediaError> =>
  Effect.gen(function*() {
    const cutoff = (yield* Clock.currentTimeMillis) - Duration.toMillis(options.age)
    const names = yield* Effect.tryPromise({
      try: () => readdir(options.directory),
      catch: (cause) => new MediaError({ message: `cannot list folder ${options.directory}`, cause })
    })
    const deleted = yield* Effect.forEach(names.filter((name) => options.ours.test(name)), (name) =>
      Effect.tryPromise({
        try: async () => {
          const path = join(options.directory, name)
          if ((await stat(path)).mtimeMs >= cutoff) return false
          await unlink(path)
          return true
        },
        catch: (cause) => cause
      }).pipe(
        Effect.catchAll((cause) =>
          typeof cause === "object" && cause !== null && "code" in cause && cause.code === "ENOENT"
            ? Effect.succeed(false)
            : Effect.logWarning(`mediagate: cannot delete ${options.what}`, cause).pipe(Effect.annotateLogs({ file: name }), Effect.as(false))
        )
      ))
    return deleted.filter(Boolean).length
  })

/**
 * How long a temporary file must have gone unwritten to be a crash's leftover: 1 hour. A
 * file being written is written piece by piece as its body arrives, and a body that stops for
 * `MEDIAGATE_BODY_TIMEOUT` (10 s by default; even raised for slow links, minutes) fails and
 * deletes its file; an S3 spool file is read by one PutObject once whole. An hour without a
 * write is far past both, so an upload in progress (in this process or another one spooling
 * to the same folder) is never touched.
 */
export const leftoverAge: Duration.Duration = Duration.hours(1)

/**
 * Deletes the temporary files of `directory` that `ours` names, unwritten for `leftoverAge`:
 * what a process that crashed mid-write left (it runs when a store starts, so a process that
 * crashed sweeps its own when it comes back). Never fails: what cannot be listed or deleted
 * is logged and left. Answers how many went.
 */
export const sweepLeftovers = (options: { readonly directory: string; readonly ours: RegExp; readonly age?: Duration.DurationInput }): Effect.Effect<number> =>
  deleteStale({ ...options, age: options.age ?? leftoverAge, what: "a temporary file left by an interrupted upload" }).pipe(
    Effect.tap((count) =>
      count === 0 ? Effect.void : Effect.logInfo(`mediagate: deleted ${count} temporary file(s) left by interrupted uploads in ${options.directory}`)
    ),
    Effect.catchAll((error) => Effect.as(Effect.logWarning(`mediagate: temporary files left by interrupted uploads not swept: ${error.message}`, error.cause), 0))
  )
