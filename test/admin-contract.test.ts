/**
 * The operator's storage contracts, one suite run unchanged against memory, SQLite and
 * PostgreSQL (when MEDIAGATE_TEST_PG_URL is set; CI sets it): admin keys (held as hashes,
 * active, expired, revoked once), the audit log (append-only, newest first, filtered, paged
 * by cursor, before and after as written) and `TaskStore.listAll` (every owner's tasks,
 * newest first, each filter, pages that hold while tasks arrive).
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import type { Task } from "@mediagate/core"
import { AdminKeyFormat, AdminKeys, AuditLog, Ids, TaskStore } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryAdminKeys, MemoryAuditLog, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlAdminKeys, SqlAuditLog, SqlTaskStore } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason } from "@mediagate/store-sql/testing"
import { Effect, Layer, Option, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

let counter = 0
const uniquePrefix = () => `o${process.pid}_${++counter}_`

type Services = AdminKeys.AdminKeys | AuditLog.AuditLog | TaskStore.TaskStore

type Backend = {
  readonly name: string
  readonly shared: Layer.Layer<SqlClient.SqlClient, unknown> | undefined
  readonly layer: (prefix: string) => Layer.Layer<Services, unknown, SqlClient.SqlClient>
}

const sqliteDir = mkdtempSync(join(tmpdir(), "mediagate-admin-contract-"))
afterAll(() => rmSync(sqliteDir, { recursive: true, force: true }))
const pgUrl = process.env["MEDIAGATE_TEST_PG_URL"]
pgSkipReason("admin-contract")

const sqlLayer = (tablePrefix: string) =>
  Layer.mergeAll(SqlAdminKeys.layerWith({ tablePrefix }), SqlAuditLog.layerWith({ tablePrefix }), SqlTaskStore.layerWith({ tablePrefix }))
const sqliteFile = join(sqliteDir, "admin.db")
/** On SQLite the task store keeps its client's one connection: it gets a client of its own, as `SqlBackends` gives it. */
const sqliteLayer = (tablePrefix: string) =>
  Layer.mergeAll(
    SqlAdminKeys.layerWith({ tablePrefix }),
    SqlAuditLog.layerWith({ tablePrefix }),
    SqlTaskStore.layerWith({ tablePrefix }).pipe(Layer.provide(Database.layerSqlite(sqliteFile)))
  )

const backends: ReadonlyArray<Backend> = [
  { name: "memory", shared: undefined, layer: () => Layer.mergeAll(MemoryAdminKeys.layer, MemoryAuditLog.layer, MemoryTaskStore.layer) },
  { name: "sqlite", shared: Database.layerSqlite(sqliteFile), layer: sqliteLayer },
  ...(pgUrl === undefined ? [] : [{
    name: "postgres",
    shared: Layer.unwrapScoped(Effect.map(freshPgDatabase(pgUrl, "admin"), (target) => Database.layerPg(Redacted.make(target)))),
    layer: sqlLayer
  }])
]

/** An admin key to store, and the key itself to present. */
const adminKey = (id: string, terms: { readonly createdAt?: number; readonly expiresAt?: number | null } = {}) =>
  Effect.map(AdminKeyFormat.generate, (key) => {
    const plain = Redacted.value(key)
    const stored: AdminKeys.NewAdminKey = {
      id,
      hash: AdminKeyFormat.hashKey(plain),
      hint: AdminKeyFormat.hint(plain),
      label: `label of ${id}`,
      createdAt: terms.createdAt ?? 0,
      expiresAt: terms.expiresAt ?? null
    }
    return { key, stored }
  })

const entry = (id: string, at: number, overrides: Partial<AuditLog.AuditEntry> = {}): AuditLog.AuditEntry => ({
  id,
  at,
  actor: "cli:ops",
  action: "credits.add",
  target: "acct_a",
  before: { balance_micro_usd: 0 },
  after: { balance_micro_usd: 5, note: "ünïcode", nested: [1, { x: null }] },
  ...overrides
})

/** A task created at `at` (ms), so its UUIDv7 id sorts by it. */
const task = (at: number, overrides: Omit<Parameters<typeof Testing.record>[0], "id" | "createdAt"> = {}): Task.TaskRecord =>
  Testing.record({ id: Ids.uuidV7(at, [at % 256, 1, 2, 3, 4, 5, 6, 7, 8, 9]), createdAt: at, ...overrides })

for (const backend of backends) {
  const suite = (it: { readonly effect: (name: string, self: () => Effect.Effect<unknown, unknown, any>) => unknown }) => {
    const withServices = <A, E>(
      body: (services: {
        readonly keys: AdminKeys.AdminKeys["Type"]
        readonly audit: AuditLog.AuditLog["Type"]
        readonly store: TaskStore.TaskStore["Type"]
        readonly prefix: string
      }) => Effect.Effect<A, E, SqlClient.SqlClient | Ids.Ids>
    ) => {
      const prefix = uniquePrefix()
      return Effect.flatMap(
        Effect.all({ keys: AdminKeys.AdminKeys, audit: AuditLog.AuditLog, store: TaskStore.TaskStore }),
        (services) => body({ ...services, prefix })
      ).pipe(Effect.provide(Layer.fresh(backend.layer(prefix))), Effect.provide(Ids.layer))
    }

    it.effect("an admin key authenticates while active, and only itself; it is kept as a hash", () =>
      withServices(({ keys, prefix }) =>
        Effect.gen(function*() {
          const first = yield* adminKey("adk_1", { createdAt: 10, expiresAt: 1000 })
          const second = yield* adminKey("adk_2", { createdAt: 20 })
          yield* keys.create(first.stored)
          yield* keys.create(second.stored)
          const info = { id: "adk_1", hint: first.stored.hint, label: "label of adk_1", createdAt: 10, expiresAt: 1000, revokedAt: null }
          expect(yield* keys.authenticate(first.key, 999)).toEqual(Option.some(info))
          expect(yield* keys.authenticate(first.key, 1000)).toEqual(Option.none())
          expect(Option.map(yield* keys.authenticate(second.key, 5000), (found) => found.id)).toEqual(Option.some("adk_2"))
          expect(yield* keys.authenticate(Redacted.make(`${Redacted.value(first.key)}x`), 0)).toEqual(Option.none())
          expect(yield* keys.authenticate(Redacted.make(""), 0)).toEqual(Option.none())
          expect((yield* keys.list).map((key) => key.id)).toEqual(["adk_1", "adk_2"])
          if (backend.shared !== undefined) {
            const sql = yield* SqlClient.SqlClient
            const dump = JSON.stringify(yield* sql.unsafe(`SELECT * FROM "${prefix}admin_keys"`))
            expect(dump).not.toContain(Redacted.value(first.key))
            expect(dump).toContain(first.stored.hash)
          }
        })))

    it.effect("revoking stops a key at once and keeps the first time; an unknown id is none", () =>
      withServices(({ keys }) =>
        Effect.gen(function*() {
          const { key, stored } = yield* adminKey("adk_1")
          yield* keys.create(stored)
          const revoked = yield* keys.revoke("adk_1", 100)
          expect(Option.map(revoked, (found) => found.revokedAt)).toEqual(Option.some(100))
          expect(yield* keys.authenticate(key, 50)).toEqual(Option.none())
          expect(Option.map(yield* keys.revoke("adk_1", 200), (found) => found.revokedAt)).toEqual(Option.some(100))
          expect(yield* keys.revoke("adk_none", 200)).toEqual(Option.none())
          expect((yield* keys.list).map((found) => found.revokedAt)).toEqual([100])
        })))

    it.effect("the audit log answers what was written, newest first, filtered and paged", () =>
      withServices(({ audit }) =>
        Effect.gen(function*() {
          yield* audit.record(entry("aud_1", 100))
          yield* audit.record(entry("aud_3", 300, { action: "key.revoke", target: "key_1", before: null }))
          yield* audit.record(entry("aud_2", 200, { actor: "admin_key:adk_1", target: null, after: null }))
          yield* audit.record(entry("aud_4", 300))
          const all = yield* audit.list({ limit: 10 })
          expect(all.entries.map((found) => found.id)).toEqual(["aud_4", "aud_3", "aud_2", "aud_1"])
          expect(all.nextCursor).toBeNull()
          expect(all.entries[3]).toEqual(entry("aud_1", 100))
          expect(all.entries[2]).toEqual(entry("aud_2", 200, { actor: "admin_key:adk_1", target: null, after: null }))
          const first = yield* audit.list({ limit: 2 })
          expect(first.entries.map((found) => found.id)).toEqual(["aud_4", "aud_3"])
          const second = yield* audit.list({ limit: 2, cursor: first.nextCursor! })
          expect(second.entries.map((found) => found.id)).toEqual(["aud_2", "aud_1"])
          expect(second.nextCursor).toBeNull()
          expect((yield* audit.list({ limit: 10, action: "key.revoke" })).entries.map((found) => found.id)).toEqual(["aud_3"])
          expect((yield* audit.list({ limit: 10, target: "acct_a" })).entries.map((found) => found.id)).toEqual(["aud_4", "aud_1"])
          const paged = yield* audit.list({ limit: 1, target: "acct_a" })
          expect((yield* audit.list({ limit: 1, target: "acct_a", cursor: paged.nextCursor! })).entries.map((found) => found.id)).toEqual(["aud_1"])
        })))

    it.effect("listAll: every owner's tasks newest first, each filter, and pages that hold while tasks arrive", () =>
      withServices(({ store }) =>
        Effect.gen(function*() {
          const a = task(1_000, { ownerId: "acct_a", provider: "fal", status: "SUCCESS" })
          const b = task(2_000, { ownerId: "acct_b", input: { model: "clip3", prompt: "p" }, provider: "replicate" })
          const c = task(3_000, { ownerId: "acct_a", status: "FAILURE", provider: "fal" })
          const d = task(4_000, { ownerId: "acct_c" })
          for (const each of [a, b, c, d]) yield* store.create(each)
          const ids = (page: TaskStore.TaskPage) => page.tasks.map((found) => found.id)
          const listAll = store.listAll!
          expect(ids(yield* listAll({ limit: 10 }))).toEqual([d.id, c.id, b.id, a.id])
          const first = yield* listAll({ limit: 2 })
          expect(ids(first)).toEqual([d.id, c.id])
          yield* store.create(task(5_000, { ownerId: "acct_b" }))
          const second = yield* listAll({ limit: 2, cursor: first.nextCursor! })
          expect(ids(second)).toEqual([b.id, a.id])
          expect(second.nextCursor).toBeNull()
          expect(ids(yield* listAll({ limit: 10, filter: { ownerId: Ids.AccountId.make("acct_a") } }))).toEqual([c.id, a.id])
          expect(ids(yield* listAll({ limit: 10, filter: { provider: "fal" } }))).toEqual([c.id, a.id])
          expect(ids(yield* listAll({ limit: 10, filter: { model: "clip3" } }))).toEqual([b.id])
          expect(ids(yield* listAll({ limit: 10, filter: { statuses: ["SUCCESS", "FAILURE"] } }))).toEqual([c.id, a.id])
          expect(ids(yield* listAll({ limit: 10, filter: { statuses: [] } }))).toEqual([])
          expect(ids(yield* listAll({ limit: 10, filter: { createdAfter: 1_000, createdBefore: 4_000 } }))).toEqual([c.id, b.id])
          const both = { ownerId: Ids.AccountId.make("acct_a"), provider: "fal", statuses: ["FAILURE" as const] }
          expect(ids(yield* listAll({ limit: 10, filter: both }))).toEqual([c.id])
          // The owner's own list still sees only its tasks.
          expect(ids(yield* store.list(Ids.AccountId.make("acct_a"), { limit: 10 }))).toEqual([c.id, a.id])
        })))
  }

  if (backend.shared === undefined) describe(`admin contract: ${backend.name}`, () => suite(it))
  else it.layer(backend.shared, { timeout: "60 seconds" })(`admin contract: ${backend.name}`, suite)
}

