/**
 * The metadata of uploaded files (core `Uploads`) in memory: as long as the process.
 */
import { Uploads } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option } from "effect"

/** Oldest first: by creation time, then id. */
const byAge = (a: Uploads.UploadRecord, b: Uploads.UploadRecord) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/** Past both its expiry and its pin at `now`. */
export const isExpired = (upload: Uploads.UploadRecord, now: number): boolean =>
  upload.expiresAt <= now && (upload.pinnedUntil === null || upload.pinnedUntil <= now)

/** The memory Uploads: a Map by id, and one by media key. */
export const make: Effect.Effect<Context.Tag.Service<Uploads.Uploads>> = Effect.sync(() => {
  const uploads = new Map<string, Uploads.UploadRecord>()
  const byKey = new Map<string, string>()
  return {
    create: (upload) =>
      Effect.suspend(() => {
        // As the SQL table's primary and unique keys: a caller's bug, a defect.
        if (uploads.has(upload.id) || byKey.has(upload.mediaKey)) return Effect.dieMessage(`upload ${upload.id} or its media key exists`)
        uploads.set(upload.id, upload)
        byKey.set(upload.mediaKey, upload.id)
        return Effect.void
      }),
    getOwned: (id, owner) => Effect.sync(() => Option.filter(Option.fromNullable(uploads.get(id)), (upload) => upload.ownerId === owner)),
    byMediaKey: (mediaKey) => Effect.sync(() => Option.fromNullable(uploads.get(byKey.get(mediaKey) ?? ""))),
    delete: (id, owner) =>
      Effect.sync(() => {
        const upload = uploads.get(id)
        if (upload === undefined || upload.ownerId !== owner) return Option.none()
        uploads.delete(id)
        byKey.delete(upload.mediaKey)
        return Option.some(upload)
      }),
    pin: (id, until) =>
      Effect.sync(() => {
        const upload = uploads.get(id)
        if (upload !== undefined && (upload.pinnedUntil === null || upload.pinnedUntil < until)) uploads.set(id, { ...upload, pinnedUntil: until })
      }),
    expired: (now, limit) => Effect.sync(() => [...uploads.values()].filter((upload) => isExpired(upload, now)).sort(byAge).slice(0, Math.max(0, limit))),
    stored: (owner, from, to) =>
      Effect.sync(() => {
        let count = 0
        let bytes = 0
        for (const upload of uploads.values()) {
          if ((owner === null || upload.ownerId === owner) && upload.createdAt >= from && upload.createdAt < to) {
            count++
            bytes += upload.bytes
          }
        }
        return { count, bytes }
      })
  }
})

/** The memory Uploads layer, empty. */
export const layer: Layer.Layer<Uploads.Uploads> = Layer.effect(Uploads.Uploads, make)
