/**
 * Uploads in memory for the files tests (test/files.test.ts), until a composition provides
 * the backends' own; and how many uploads it holds.
 */
import { Uploads } from "@mediagate/core"
import { Effect, Layer, Option } from "effect"

export const memoryUploads: Layer.Layer<Uploads.Uploads> = Layer.sync(Uploads.Uploads, () => {
  const rows = new Map<string, Uploads.UploadRecord>()
  const owned = (id: string, owner: string) => Option.fromNullable(rows.get(id)).pipe(Option.filter((row) => row.ownerId === owner))
  return {
    create: (upload) => Effect.sync(() => void rows.set(upload.id, upload)),
    getOwned: (id, owner) => Effect.sync(() => owned(id, owner)),
    byMediaKey: (mediaKey) => Effect.sync(() => Option.fromNullable([...rows.values()].find((row) => row.mediaKey === mediaKey))),
    delete: (id, owner) =>
      Effect.sync(() => {
        const found = owned(id, owner)
        if (Option.isSome(found)) rows.delete(id)
        return found
      }),
    pin: (id, until) =>
      Effect.sync(() => {
        const row = rows.get(id)
        if (row !== undefined) rows.set(id, { ...row, pinnedUntil: Math.max(row.pinnedUntil ?? 0, until) })
      }),
    expired: (now, limit) =>
      Effect.sync(() =>
        [...rows.values()]
          .filter((row) => row.expiresAt <= now && (row.pinnedUntil === null || row.pinnedUntil <= now))
          .sort((a, b) => a.expiresAt - b.expiresAt)
          .slice(0, limit)
      ),
    stored: (owner, from, to) =>
      Effect.sync(() => {
        const chosen = [...rows.values()].filter((row) => (owner === null || row.ownerId === owner) && row.createdAt >= from && row.createdAt < to)
        return { count: chosen.length, bytes: chosen.reduce((sum, row) => sum + row.bytes, 0) }
      })
  }
})

/** How many uploads the Uploads in context holds. */
export const uploadCount = Effect.flatMap(Uploads.Uploads, (uploads) => uploads.stored(null, 0, Number.MAX_SAFE_INTEGER)).pipe(
  Effect.map(({ count }) => count),
  Effect.orDie
)
