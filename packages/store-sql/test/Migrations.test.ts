/**
 * The migrations: each is applied once, in the order of its number, however many store
 * and accounts layers are built on one database.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Database, Schema, SqlAccounts, SqlTaskStore } from "../src/index.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-migrations-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("migrations", () => {
  it("are numbered without gaps, and the record lists them in order", () => {
    const ids = Object.keys(Schema.migrations("p_")).map((key) => Number(key.slice(0, 4)))
    expect(ids).toEqual(ids.map((_, i) => i + 1))
  })

  it.effect("run once each, in order, when the store and the accounts are built twice on one database", () =>
    Effect.gen(function*() {
      const file = join(dir, "twice.sqlite")
      // Two clients, as the standalone server has: the task store keeps its connection.
      const both = Layer.mergeAll(
        SqlTaskStore.layer.pipe(Layer.provide(Database.layerSqlite(file))),
        SqlAccounts.layer().pipe(Layer.provide(Database.layerSqlite(file)))
      )
      for (let round = 0; round < 2; round++) yield* Effect.scoped(Layer.build(both))
      const database = Database.layerSqlite(file)
      const rows = yield* Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ migration_id: number }>`SELECT migration_id FROM ${sql("mediagate_migrations")} ORDER BY created_at, migration_id`
      ).pipe(Effect.provide(database))
      expect(rows.map((row) => Number(row.migration_id))).toEqual([1, 2, 3, 4, 5])
    }))
})
