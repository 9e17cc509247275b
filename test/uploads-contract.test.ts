/**
 * The Uploads contract (the metadata of uploaded files), one suite over the memory store,
 * SQLite and PostgreSQL (when MEDIAGATE_TEST_PG_URL is set): create and read back, another
 * owner sees none, by media key, delete (a mark: no lookup finds it) once, expire once, a pin
 * keeps the later time, what the sweep gets (past both times, oldest first, at most the limit)
 * and the counts for usage reports, which deleted uploads keep.
 */
import type { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Ids, Uploads } from "@mediagate/core"
import { MemoryUploads } from "@mediagate/store-memory"
import { Database, SqlUploads } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason } from "@mediagate/store-sql/testing"
import { Effect, Layer, Option, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

let counter = 0
const uniquePrefix = () => `u${process.pid}_${++counter}_`

const sqliteDir = mkdtempSync(join(tmpdir(), "mediagate-uploads-"))
afterAll(() => rmSync(sqliteDir, { recursive: true, force: true }))
const pgUrl = process.env["MEDIAGATE_TEST_PG_URL"]
pgSkipReason("uploads-contract")

type Backend = {
  readonly name: string
  readonly shared: Layer.Layer<SqlClient.SqlClient, unknown> | undefined
  readonly uploads: (prefix: string) => Layer.Layer<Uploads.Uploads, unknown, SqlClient.SqlClient>
}

const backends: ReadonlyArray<Backend> = [
  { name: "memory", shared: undefined, uploads: () => MemoryUploads.layer },
  { name: "sqlite", shared: Database.layerSqlite(join(sqliteDir, "uploads.db")), uploads: (tablePrefix) => SqlUploads.layerWith({ tablePrefix }) },
  ...(pgUrl === undefined ? [] : [{
    name: "postgres",
    shared: Layer.unwrapScoped(Effect.map(freshPgDatabase(pgUrl, "uploads"), (url) => Database.layerPg(Redacted.make(url)))),
    uploads: (tablePrefix: string) => SqlUploads.layerWith({ tablePrefix })
  }])
]

const alice = Ids.AccountId.make("alice")
const bob = Ids.AccountId.make("bob")
const t0 = 1_800_000_000_000
const hour = 3_600_000

/** An upload `n` of alice's, created at `t0 + n` seconds, expiring an hour later. */
const upload = (n: number, overrides: Partial<Uploads.UploadRecord> = {}): Uploads.UploadRecord => ({
  id: `file_${String(n).padStart(24, "0")}`,
  ownerId: alice,
  keyId: "key_1",
  mediaKey: `${String(n).padStart(32, "0")}.png`,
  url: `http://127.0.0.1:8080/media/${String(n).padStart(32, "0")}.png`,
  contentType: "image/png",
  bytes: 1000 + n,
  width: 640,
  height: 480,
  durationSeconds: null,
  createdAt: t0 + n * 1000,
  expiresAt: t0 + n * 1000 + hour,
  pinnedUntil: null,
  ...overrides
})

for (const backend of backends) {
  const suite = (it: { readonly effect: (name: string, self: () => Effect.Effect<unknown, unknown, any>) => unknown }) => {
    const withUploads = <A, E>(body: (uploads: Uploads.Uploads["Type"]) => Effect.Effect<A, E>) =>
      Effect.flatMap(Uploads.Uploads, body).pipe(Effect.provide(backend.uploads(uniquePrefix())))

    it.effect("an upload reads back as it was created, to its owner only, and by its media key to anyone", () =>
      withUploads((uploads) =>
        Effect.gen(function*() {
          const video = upload(1, { contentType: "video/mp4", mediaKey: `${"a".repeat(32)}.mp4`, keyId: null, width: 1920, height: 1080, durationSeconds: 4.5, bytes: 5_000_000_000 })
          yield* uploads.create(video)
          yield* uploads.create(upload(2))
          expect(yield* uploads.getOwned(video.id, alice)).toEqual(Option.some(video))
          expect(yield* uploads.getOwned(video.id, bob)).toEqual(Option.none())
          expect(yield* uploads.getOwned("file_missing", alice)).toEqual(Option.none())
          expect(yield* uploads.byMediaKey(video.mediaKey)).toEqual(Option.some(video))
          expect(yield* uploads.byMediaKey(upload(2).mediaKey)).toEqual(Option.some(upload(2)))
          expect(yield* uploads.byMediaKey(`${"b".repeat(32)}.png`)).toEqual(Option.none())
        })
      ))

    it.effect("delete marks an owner's upload once and answers it; no lookup finds it then; another owner's stays", () =>
      withUploads((uploads) =>
        Effect.gen(function*() {
          yield* uploads.create(upload(1))
          yield* uploads.create(upload(2, { ownerId: bob }))
          yield* uploads.create(upload(3))
          const later = upload(1).expiresAt + hour
          expect(yield* uploads.delete(upload(2).id, alice, t0)).toEqual(Option.none())
          expect(Option.isSome(yield* uploads.getOwned(upload(2).id, bob))).toBe(true)
          expect(yield* uploads.delete(upload(1).id, alice, t0)).toEqual(Option.some(upload(1)))
          expect(yield* uploads.delete(upload(1).id, alice, t0)).toEqual(Option.none())
          expect(yield* uploads.getOwned(upload(1).id, alice)).toEqual(Option.none())
          expect(yield* uploads.byMediaKey(upload(1).mediaKey)).toEqual(Option.none())
          expect(yield* uploads.expire(upload(1).id, alice, t0)).toEqual(Option.none())
          // A pin leaves it deleted, and the sweep never lists it again.
          yield* uploads.pin(upload(1).id, later)
          expect(yield* uploads.getOwned(upload(1).id, alice)).toEqual(Option.none())
          expect((yield* uploads.expired(later, 10)).map((item) => item.id)).toEqual([upload(2).id, upload(3).id])
        })
      ))

    it.effect("expire ends an upload at the time given, once, keeping its pin; an expired or deleted one is none", () =>
      withUploads((uploads) =>
        Effect.gen(function*() {
          yield* uploads.create(upload(1))
          yield* uploads.create(upload(2))
          yield* uploads.create(upload(3))
          yield* uploads.pin(upload(1).id, t0 + 5 * hour)
          const at = t0 + 10_000
          expect(yield* uploads.expire(upload(1).id, bob, at)).toEqual(Option.none())
          const ended = { ...upload(1), expiresAt: at, pinnedUntil: t0 + 5 * hour }
          expect(yield* uploads.expire(upload(1).id, alice, at)).toEqual(Option.some(ended))
          // Of two at once only one answers it: it is expired at `at` already.
          expect(yield* uploads.expire(upload(1).id, alice, at)).toEqual(Option.none())
          expect(yield* uploads.getOwned(upload(1).id, alice)).toEqual(Option.some(ended))
          expect(yield* uploads.byMediaKey(upload(1).mediaKey)).toEqual(Option.some(ended))
          // Swept once past the pin, not before.
          expect(yield* uploads.expired(at, 10)).toEqual([])
          expect((yield* uploads.expired(t0 + 5 * hour - 1, 10)).map((item) => item.id)).not.toContain(upload(1).id)
          expect(yield* uploads.expired(t0 + 5 * hour, 1)).toEqual([ended])
          // Past its own expiry already: nothing to end.
          expect(yield* uploads.expire(upload(2).id, alice, upload(2).expiresAt)).toEqual(Option.none())
          yield* uploads.delete(upload(3).id, alice, t0)
          expect(yield* uploads.expire(upload(3).id, alice, at)).toEqual(Option.none())
        })
      ))

    it.effect("a pin keeps the later time: an earlier pin never shortens it; pinning no upload does nothing", () =>
      withUploads((uploads) =>
        Effect.gen(function*() {
          yield* uploads.create(upload(1))
          yield* uploads.pin(upload(1).id, t0 + 5 * hour)
          expect(Option.getOrThrow(yield* uploads.getOwned(upload(1).id, alice)).pinnedUntil).toBe(t0 + 5 * hour)
          yield* uploads.pin(upload(1).id, t0 + 2 * hour)
          expect(Option.getOrThrow(yield* uploads.getOwned(upload(1).id, alice)).pinnedUntil).toBe(t0 + 5 * hour)
          yield* uploads.pin(upload(1).id, t0 + 9 * hour)
          expect(Option.getOrThrow(yield* uploads.getOwned(upload(1).id, alice))).toEqual({ ...upload(1), pinnedUntil: t0 + 9 * hour })
          yield* uploads.pin("file_missing", t0)
        })
      ))

    it.effect("expired: past both the expiry and the pin, oldest first, at most the limit", () =>
      withUploads((uploads) =>
        Effect.gen(function*() {
          // Created in the order 3, 1, 2, 4 (by createdAt); 2 is pinned an hour past its expiry.
          yield* uploads.create(upload(1))
          yield* uploads.create(upload(2))
          yield* uploads.create(upload(3, { createdAt: t0 - 1000, expiresAt: t0 + hour }))
          yield* uploads.create(upload(4, { ownerId: bob }))
          yield* uploads.pin(upload(2).id, upload(2).expiresAt + hour)
          const ids = (list: ReadonlyArray<Uploads.UploadRecord>) => list.map((item) => item.id)
          expect(yield* uploads.expired(t0 + hour - 1, 10)).toEqual([])
          // At its expiresAt an upload is gone.
          expect(ids(yield* uploads.expired(t0 + hour, 10))).toEqual([upload(3).id])
          const later = t0 + 4000 + hour
          expect(ids(yield* uploads.expired(later, 10))).toEqual([upload(3).id, upload(1).id, upload(4).id])
          expect(ids(yield* uploads.expired(later, 2))).toEqual([upload(3).id, upload(1).id])
          expect(yield* uploads.expired(later, 0)).toEqual([])
          // The pinned one only once past its pin as well.
          expect(ids(yield* uploads.expired(upload(2).expiresAt + hour - 1, 10))).not.toContain(upload(2).id)
          expect(ids(yield* uploads.expired(upload(2).expiresAt + hour, 10))).toEqual([upload(3).id, upload(1).id, upload(2).id, upload(4).id])
          expect((yield* uploads.expired(later, 10))[0]).toEqual({ ...upload(3, { createdAt: t0 - 1000, expiresAt: t0 + hour }) })
        })
      ))

    it.effect("stored: an owner's (or everyone's) uploads created in [from, to), how many and their bytes", () =>
      withUploads((uploads) =>
        Effect.gen(function*() {
          expect(yield* uploads.stored(alice, t0, t0 + hour)).toEqual({ count: 0, bytes: 0 })
          yield* uploads.create(upload(1))
          yield* uploads.create(upload(2))
          yield* uploads.create(upload(3, { bytes: 3_000_000_000 }))
          yield* uploads.create(upload(4, { ownerId: bob }))
          expect(yield* uploads.stored(alice, t0, t0 + hour)).toEqual({ count: 3, bytes: 1001 + 1002 + 3_000_000_000 })
          expect(yield* uploads.stored(alice, t0 + 2000, t0 + 3000)).toEqual({ count: 1, bytes: 1002 })
          expect(yield* uploads.stored(alice, t0 + 1001, t0 + 2000)).toEqual({ count: 0, bytes: 0 })
          expect(yield* uploads.stored(bob, t0, t0 + hour)).toEqual({ count: 1, bytes: 1004 })
          expect(yield* uploads.stored(null, t0, t0 + hour)).toEqual({ count: 4, bytes: 1001 + 1002 + 3_000_000_000 + 1004 })
        })
      ))

    it.effect("stored and created keep counting uploads after they are expired, deleted or swept: a window's usage never changes", () =>
      withUploads((uploads) =>
        Effect.gen(function*() {
          yield* uploads.create(upload(1))
          yield* uploads.create(upload(2))
          yield* uploads.create(upload(3, { ownerId: bob }))
          yield* uploads.create(upload(4, { createdAt: t0 + hour }))
          const before = { alice: yield* uploads.stored(alice, t0, t0 + hour), all: yield* uploads.stored(null, t0, t0 + hour) }
          expect(before).toEqual({ alice: { count: 2, bytes: 1001 + 1002 }, all: { count: 3, bytes: 1001 + 1002 + 1003 } })
          const ids = (list: ReadonlyArray<Uploads.UploadRecord>) => list.map((item) => item.id)
          expect(ids(yield* uploads.created(t0, t0 + hour))).toEqual([upload(1).id, upload(2).id, upload(3).id])
          // Deleted by its owner; ended at once then swept (as DELETE of a pinned one); swept at its expiry.
          yield* uploads.delete(upload(1).id, alice, t0 + 5000)
          yield* uploads.expire(upload(2).id, alice, t0 + 5000)
          for (const due of yield* uploads.expired(t0 + 2 * hour, 10)) yield* uploads.delete(due.id, due.ownerId, t0 + 2 * hour)
          expect(yield* uploads.expired(t0 + 3 * hour, 10)).toEqual([])
          expect({ alice: yield* uploads.stored(alice, t0, t0 + hour), all: yield* uploads.stored(null, t0, t0 + hour) }).toEqual(before)
          // As they were created (the expiry moved by a DELETE is the record's last state).
          const window = yield* uploads.created(t0, t0 + hour)
          expect(ids(window)).toEqual([upload(1).id, upload(2).id, upload(3).id])
          expect(window.map((item) => item.bytes)).toEqual([1001, 1002, 1003])
          expect(ids(yield* uploads.created(t0 + hour, t0 + 2 * hour))).toEqual([upload(4).id])
          expect(yield* uploads.created(t0 + 2 * hour, t0 + 3 * hour)).toEqual([])
        })
      ))
  }
  if (backend.shared === undefined) {
    describe(`Uploads contract: ${backend.name}`, () => suite(it))
  } else {
    describe(`Uploads contract: ${backend.name}`, () => {
      it.layer(backend.shared as Layer.Layer<SqlClient.SqlClient>, { timeout: 60_000 })((it) => suite(it))
    })
  }
}
