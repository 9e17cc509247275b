/**
 * A stream of bytes written to a new file as it arrives, counted on the way: what the file
 * store's and the S3 store's `putStream` build on. Memory holds one piece at a time, never
 * the file: the next piece is pulled only once the last one is on disk.
 */
import { MediaError, MediaTooLarge } from "@mediagate/core"
import { Effect, Exit, Stream } from "effect"
import type { FileHandle } from "node:fs/promises"
import { open, unlink } from "node:fs/promises"

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
