/**
 * The store's migrations on SQLite and PostgreSQL (when MEDIAGATE_TEST_PG_URL is set): each
 * runs once, in the order of its number, however often and however many nodes build a store.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Effect, Layer, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Database, Schema, SqlAccounts, SqlTaskStore } from "../src/index.js"
import { freshPgDatabase, pgSkipReason } from "../src/TestDatabases.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-migrations-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let counter = 0

const pgUrl = process.env["MEDIAGATE_TEST_PG_URL"]
pgSkipReason("Migrations")

/** A database of its own for one test: a new SQLite file, or a new PostgreSQL database dropped afterwards. */
type Fresh = Effect.Effect<{ readonly client: () => Layer.Layer<SqlClient.SqlClient, unknown> }, never, Scope.Scope>

const freshSqlite: Fresh = Effect.sync(() => {
  const file = join(dir, `m${++counter}.db`)
  return { client: () => Database.layerSqlite(file) }
})

const freshPg = (url: string): Fresh =>
  Effect.map(freshPgDatabase(url, "mig"), (target) => ({ client: () => Database.layerPg(Redacted.make(target)) }))

const expected = Object.keys(Schema.migrations("x_")).map((key) => Number(key.slice(0, 4))).sort((a, b) => a - b)

/** The migrations table as [id, name] rows in the order of their ids. */
const recorded = (client: Layer.Layer<SqlClient.SqlClient, unknown>, prefix: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ migration_id: number; name: string }>`SELECT migration_id, name FROM ${sql(Schema.tables(prefix).migrations)} ORDER BY migration_id`
    return rows.map((row) => [Number(row.migration_id), row.name] as const)
  }).pipe(Effect.provide(client))

/** Builds the task store on a client and closes it again. */
const buildStore = (client: Layer.Layer<SqlClient.SqlClient, unknown>, prefix: string) =>
  Effect.scoped(Layer.build(SqlTaskStore.layerWith({ tablePrefix: prefix }).pipe(Layer.provide(client))))

const backends: ReadonlyArray<readonly [string, Fresh]> = [
  ["sqlite", freshSqlite],
  ...(pgUrl === undefined ? [] : [["postgres", freshPg(pgUrl)] as const])
]

describe("migrations", () => {
  it("are numbered without gaps and listed in the order they run", () => {
    expect(expected).toEqual(expected.map((_, i) => i + 1))
    // Anyone reading Schema.ts reads them in key order; keep it the order they run in.
    expect(Object.keys(Schema.migrations("x_")).map((key) => Number(key.slice(0, 4)))).toEqual(expected)
  })
})

for (const [name, fresh] of backends) {
  describe(`migrations: ${name}`, () => {
    it.scoped("run once each, in order, on a fresh database and again when the store is built again", () =>
      Effect.gen(function*() {
        const db = yield* fresh
        yield* buildStore(db.client(), "m_")
        const first = yield* recorded(db.client(), "m_")
        expect(first.map(([id]) => id)).toEqual(expected)
        yield* buildStore(db.client(), "m_")
        yield* Effect.scoped(Layer.build(SqlAccounts.layerWith({ tablePrefix: "m_" }).pipe(Layer.provide(db.client()))))
        expect(yield* recorded(db.client(), "m_")).toEqual(first)
      }))

    it.scoped("several nodes starting at once on a fresh database all start, and each migration runs once", () =>
      Effect.gen(function*() {
        const db = yield* fresh
        // Each node has its own client (its own connection or pool), as separate processes would.
        yield* Effect.all(
          [
            buildStore(db.client(), "n_"),
            buildStore(db.client(), "n_"),
            Effect.scoped(Layer.build(SqlAccounts.layerWith({ tablePrefix: "n_" }).pipe(Layer.provide(db.client())))),
            buildStore(db.client(), "n_")
          ],
          { concurrency: "unbounded" }
        )
        expect((yield* recorded(db.client(), "n_")).map(([id]) => id)).toEqual(expected)
      }), { timeout: 60_000 })
  })
}
