/**
 * The metadata of uploaded files (core `Uploads`) on @effect/sql (SQLite and PostgreSQL), in
 * the `uploads` table (migrations 0024, 0025); the bytes are in the media store. A deleted
 * upload's row stays, `deleted_at` set, as history: every lookup skips it, `stored` and
 * `created` count it.
 */
import type { SqlClient } from "@effect/sql"
import { Ids, Uploads } from "@mediagate/core"
import type { StoreError } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option } from "effect"
import * as Database from "./Database.js"
import { refail as refailAs } from "./internal/refail.js"
import type { Row } from "./internal/Rows.js"
import { num, numOrNull, strOrNull } from "./internal/Rows.js"

/** Settings of the SQL uploads: the table prefix. */
export type Options = Database.Options

const refail = (operation: string) => refailAs("uploads", operation)

const uploadOf = (row: Row): Uploads.UploadRecord => ({
  id: String(row["id"]),
  ownerId: Ids.AccountId.make(String(row["owner_id"])),
  keyId: strOrNull(row["key_id"]),
  mediaKey: String(row["media_key"]),
  url: String(row["url"]),
  contentType: String(row["content_type"]),
  bytes: num(row["bytes"]),
  width: numOrNull(row["width"]),
  height: numOrNull(row["height"]),
  durationSeconds: numOrNull(row["duration_seconds"]),
  createdAt: num(row["created_at"]),
  expiresAt: num(row["expires_at"]),
  pinnedUntil: numOrNull(row["pinned_until"])
})

/** The SQL uploads. Runs the migrations first. */
export const make = (options: Options = {}): Effect.Effect<Context.Tag.Service<Uploads.Uploads>, StoreError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const { sql, tables } = yield* Database.prepare("the uploads", options)
    const table = sql(tables.uploads)
    const one = (rows: ReadonlyArray<Row>) => Option.map(Option.fromNullable(rows[0]), uploadOf)
    return {
      create: (upload) =>
        sql`INSERT INTO ${table} ${
          sql.insert({
            id: upload.id,
            owner_id: upload.ownerId,
            key_id: upload.keyId,
            media_key: upload.mediaKey,
            url: upload.url,
            content_type: upload.contentType,
            bytes: upload.bytes,
            width: upload.width,
            height: upload.height,
            duration_seconds: upload.durationSeconds,
            created_at: upload.createdAt,
            expires_at: upload.expiresAt,
            pinned_until: upload.pinnedUntil
          })
        }`.pipe(Effect.asVoid, refail("create")),
      getOwned: (id, owner) =>
        sql<Row>`SELECT * FROM ${table} WHERE id = ${id} AND owner_id = ${owner} AND deleted_at IS NULL`.pipe(Effect.map(one), refail("getOwned")),
      byMediaKey: (mediaKey) =>
        sql<Row>`SELECT * FROM ${table} WHERE media_key = ${mediaKey} AND deleted_at IS NULL`.pipe(Effect.map(one), refail("byMediaKey")),
      // One statement each: of two at once, only one answers the upload.
      expire: (id, owner, at) =>
        sql<Row>`UPDATE ${table} SET expires_at = ${at}
          WHERE id = ${id} AND owner_id = ${owner} AND deleted_at IS NULL AND expires_at > ${at} RETURNING *`.pipe(Effect.map(one), refail("expire")),
      delete: (id, owner, at) =>
        sql<Row>`UPDATE ${table} SET deleted_at = ${at}
          WHERE id = ${id} AND owner_id = ${owner} AND deleted_at IS NULL RETURNING *`.pipe(Effect.map(one), refail("delete")),
      // Only ever later: a pin never shortens another task's.
      pin: (id, until) =>
        sql`UPDATE ${table} SET pinned_until = ${until}
          WHERE id = ${id} AND deleted_at IS NULL AND (pinned_until IS NULL OR pinned_until < ${until})`.pipe(Effect.asVoid, refail("pin")),
      expired: (now, limit) =>
        sql<Row>`SELECT * FROM ${table} WHERE deleted_at IS NULL AND expires_at <= ${now} AND (pinned_until IS NULL OR pinned_until <= ${now})
          ORDER BY created_at, id LIMIT ${Math.max(0, Math.floor(limit))}`.pipe(Effect.map((rows) => rows.map(uploadOf)), refail("expired")),
      stored: (owner, from, to) =>
        (owner === null
          ? sql<Row>`SELECT COUNT(*) AS count, COALESCE(SUM(bytes), 0) AS bytes FROM ${table} WHERE created_at >= ${from} AND created_at < ${to}`
          : sql<Row>`SELECT COUNT(*) AS count, COALESCE(SUM(bytes), 0) AS bytes FROM ${table}
              WHERE owner_id = ${owner} AND created_at >= ${from} AND created_at < ${to}`).pipe(
            Effect.map((rows) => ({ count: num(rows[0]?.["count"] ?? 0), bytes: num(rows[0]?.["bytes"] ?? 0) })),
            refail("stored")
          ),
      created: (from, to) =>
        sql<Row>`SELECT * FROM ${table} WHERE created_at >= ${from} AND created_at < ${to} ORDER BY created_at, id`.pipe(
          Effect.map((rows) => rows.map(uploadOf)),
          refail("created")
        )
    }
  })

/** The SQL uploads layer (on the SqlClient in context). */
export const layer: Layer.Layer<Uploads.Uploads, StoreError, SqlClient.SqlClient> = Layer.effect(Uploads.Uploads, make())

/** The SQL uploads layer with options (table prefix). */
export const layerWith = (options: Options): Layer.Layer<Uploads.Uploads, StoreError, SqlClient.SqlClient> =>
  Layer.effect(Uploads.Uploads, make(options))
