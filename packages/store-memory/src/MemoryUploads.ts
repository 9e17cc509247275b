/**
 * The metadata of uploaded files (core `Uploads`) in memory: as long as the process. A deleted
 * upload's record stays, marked, as history.
 */
import { Uploads } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option } from "effect"

/** Oldest first: by creation time, then id. */
const byAge = (a: Uploads.UploadRecord, b: Uploads.UploadRecord) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/** Past both its expiry and its pin at `now`. */
export const isExpired = (upload: Uploads.UploadRecord, now: number): boolean =>
  upload.expiresAt <= now && (upload.pinnedUntil === null || upload.pinnedUntil <= now)

/** An upload as the memory store keeps it: the record, and when it was deleted (null while it is not). */
interface Entry {
  readonly upload: Uploads.UploadRecord
  readonly deletedAt: number | null
}

/** The memory Uploads: a Map by id (deleted ones too), and one by media key. */
export const make: Effect.Effect<Context.Tag.Service<Uploads.Uploads>> = Effect.sync(() => {
  const entries = new Map<string, Entry>()
  const byKey = new Map<string, string>()
  /** The upload of this id, not deleted, if `owner` (when given) owns it. */
  const live = (id: string, owner?: string) =>
    Option.filter(Option.fromNullable(entries.get(id)), (entry) => entry.deletedAt === null && (owner === undefined || entry.upload.ownerId === owner))
  const all = () => [...entries.values()].map((entry) => entry.upload)
  const liveUploads = () => [...entries.values()].filter((entry) => entry.deletedAt === null).map((entry) => entry.upload)
  return {
    create: (upload) =>
      Effect.suspend(() => {
        // As the SQL table's primary and unique keys: a caller's bug, a defect.
        if (entries.has(upload.id) || byKey.has(upload.mediaKey)) return Effect.dieMessage(`upload ${upload.id} or its media key exists`)
        entries.set(upload.id, { upload, deletedAt: null })
        byKey.set(upload.mediaKey, upload.id)
        return Effect.void
      }),
    getOwned: (id, owner) => Effect.sync(() => Option.map(live(id, owner), (entry) => entry.upload)),
    byMediaKey: (mediaKey) => Effect.sync(() => Option.map(live(byKey.get(mediaKey) ?? ""), (entry) => entry.upload)),
    expire: (id, owner, at) =>
      Effect.sync(() =>
        Option.map(Option.filter(live(id, owner), (entry) => entry.upload.expiresAt > at), (entry) => {
          const upload = { ...entry.upload, expiresAt: at }
          entries.set(id, { upload, deletedAt: null })
          return upload
        })
      ),
    delete: (id, owner, at) =>
      Effect.sync(() =>
        Option.map(live(id, owner), (entry) => {
          entries.set(id, { upload: entry.upload, deletedAt: at })
          return entry.upload
        })
      ),
    pin: (id, until) =>
      Effect.sync(() => {
        const found = live(id)
        if (Option.isNone(found)) return
        const { upload } = found.value
        if (upload.pinnedUntil === null || upload.pinnedUntil < until) entries.set(id, { upload: { ...upload, pinnedUntil: until }, deletedAt: null })
      }),
    expired: (now, limit) => Effect.sync(() => liveUploads().filter((upload) => isExpired(upload, now)).sort(byAge).slice(0, Math.max(0, limit))),
    stored: (owner, from, to) =>
      Effect.sync(() => {
        let count = 0
        let bytes = 0
        for (const upload of all()) {
          if ((owner === null || upload.ownerId === owner) && upload.createdAt >= from && upload.createdAt < to) {
            count++
            bytes += upload.bytes
          }
        }
        return { count, bytes }
      }),
    created: (from, to) => Effect.sync(() => all().filter((upload) => upload.createdAt >= from && upload.createdAt < to).sort(byAge))
  }
})

/** The memory Uploads layer, empty. */
export const layer: Layer.Layer<Uploads.Uploads> = Layer.effect(Uploads.Uploads, make)
