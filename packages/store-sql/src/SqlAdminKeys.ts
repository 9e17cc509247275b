/**
 * Admin keys on @effect/sql (SQLite and PostgreSQL), in the `admin_keys` table (migration
 * 0022): only their SHA-256 is stored, looked up by it and compared in constant time.
 */
import type { SqlClient } from "@effect/sql"
import { AdminKeys, ApiKeys } from "@mediagate/core"
import type { StoreError } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option, Redacted } from "effect"
import * as Database from "./Database.js"
import { refail as refailAs } from "./internal/refail.js"
import type { Row } from "./internal/Rows.js"
import { num, numOrNull, strOrNull } from "./internal/Rows.js"
import { hashKey } from "./SqlAccounts.js"

/** Settings of the SQL admin keys: the table prefix. */
export type Options = Database.Options

const refail = (operation: string) => refailAs("admin keys", operation)

const infoOf = (row: Row): AdminKeys.AdminKeyInfo => ({
  id: String(row["id"]),
  hint: String(row["hint"]),
  label: strOrNull(row["label"]),
  createdAt: num(row["created_at"]),
  expiresAt: numOrNull(row["expires_at"]),
  revokedAt: numOrNull(row["revoked_at"])
})

/** The SQL admin keys. Runs the migrations first. */
export const make = (options: Options = {}): Effect.Effect<Context.Tag.Service<AdminKeys.AdminKeys>, StoreError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const { sql, tables } = yield* Database.prepare("the admin keys", options)
    const table = sql(tables.adminKeys)
    return {
      authenticate: (key, now) => {
        const hash = hashKey(Redacted.value(key))
        return sql<Row>`SELECT * FROM ${table} WHERE key_hash = ${hash}`.pipe(
          Effect.map((rows) =>
            Option.filter(Option.fromNullable(rows[0]), (row) => ApiKeys.sameHash(String(row["key_hash"]), hash)).pipe(
              Option.map(infoOf),
              Option.filter((info) => ApiKeys.stateOf(info, now) === "active")
            )
          ),
          refail("authenticate")
        )
      },
      create: (key) =>
        sql`INSERT INTO ${table} ${
          sql.insert({
            id: key.id,
            key_hash: key.hash,
            hint: key.hint,
            label: key.label,
            created_at: key.createdAt,
            expires_at: key.expiresAt,
            revoked_at: null
          })
        }`.pipe(Effect.asVoid, refail("create")),
      list: sql<Row>`SELECT * FROM ${table} ORDER BY created_at, id`.pipe(Effect.map((rows) => rows.map(infoOf)), refail("list")),
      revoke: (id, now) =>
        Effect.gen(function*() {
          // Revoking twice keeps the first time.
          yield* sql`UPDATE ${table} SET revoked_at = ${now} WHERE id = ${id} AND revoked_at IS NULL`
          const rows = yield* sql<Row>`SELECT * FROM ${table} WHERE id = ${id}`
          return Option.map(Option.fromNullable(rows[0]), infoOf)
        }).pipe(refail("revoke"))
    }
  })

/** The SQL admin keys layer (on the SqlClient in context). */
export const layer: Layer.Layer<AdminKeys.AdminKeys, StoreError, SqlClient.SqlClient> = Layer.effect(AdminKeys.AdminKeys, make())

/** The SQL admin keys layer with options (table prefix). */
export const layerWith = (options: Options): Layer.Layer<AdminKeys.AdminKeys, StoreError, SqlClient.SqlClient> =>
  Layer.effect(AdminKeys.AdminKeys, make(options))
