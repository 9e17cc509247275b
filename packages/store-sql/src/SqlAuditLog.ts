/**
 * The audit log on @effect/sql (SQLite and PostgreSQL), in the `audit_log` table (migration
 * 0022): appended to, never updated; before and after as JSON text. Read newest first by
 * (at, id), the index's order; the cursor is the last entry's id.
 */
import type { SqlClient } from "@effect/sql"
import type { AuditLog, StoreError } from "@mediagate/core"
import { AuditLog as AuditLogService } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer } from "effect"
import * as Database from "./Database.js"
import { refail as refailAs } from "./internal/refail.js"
import type { Row } from "./internal/Rows.js"
import { num, strOrNull } from "./internal/Rows.js"

/** Settings of the SQL audit log: the table prefix. */
export type Options = Database.Options

const refail = (operation: string) => refailAs("audit log", operation)

const json = (value: unknown) => (value === null || value === undefined ? null : JSON.stringify(value))
const parsed = (value: unknown): unknown => (value === null || value === undefined ? null : JSON.parse(String(value)))

const entryOf = (row: Row): AuditLog.AuditEntry => ({
  id: String(row["id"]),
  at: num(row["at"]),
  actor: String(row["actor"]),
  action: String(row["action"]) as AuditLog.Action,
  target: strOrNull(row["target"]),
  before: parsed(row["before"]),
  after: parsed(row["after"])
})

/** The SQL audit log. Runs the migrations first. */
export const make = (options: Options = {}): Effect.Effect<Context.Tag.Service<AuditLogService.AuditLog>, StoreError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const { sql, tables } = yield* Database.prepare("the audit log", options)
    const table = sql(tables.auditLog)
    return {
      record: (entry) =>
        sql`INSERT INTO ${table} ${
          sql.insert({
            id: entry.id,
            at: entry.at,
            actor: entry.actor,
            action: entry.action,
            target: entry.target,
            before: json(entry.before),
            after: json(entry.after)
          })
        }`.pipe(Effect.asVoid, refail("record")),
      list: ({ action, cursor, limit, target }) =>
        Effect.gen(function*() {
          const conditions = [
            ...(action === undefined ? [] : [sql`action = ${action}`]),
            ...(target === undefined ? [] : [sql`target = ${target}`]),
            // After the cursor's entry in (at, id) order, newest first; an unknown cursor: nothing.
            ...(cursor === undefined ? [] : [
              sql`(at < (SELECT at FROM ${table} WHERE id = ${cursor})
                OR (at = (SELECT at FROM ${table} WHERE id = ${cursor}) AND id < ${cursor}))`
            ])
          ]
          const rows = yield* sql<Row>`SELECT * FROM ${table} WHERE ${sql.and(conditions)} ORDER BY at DESC, id DESC LIMIT ${limit + 1}`
          const entries = rows.slice(0, limit).map(entryOf)
          return { entries, nextCursor: rows.length > limit ? entries[entries.length - 1]!.id : null }
        }).pipe(refail("list"))
    }
  })

/** The SQL audit log layer (on the SqlClient in context). */
export const layer: Layer.Layer<AuditLogService.AuditLog, StoreError, SqlClient.SqlClient> = Layer.effect(AuditLogService.AuditLog, make())

/** The SQL audit log layer with options (table prefix). */
export const layerWith = (options: Options): Layer.Layer<AuditLogService.AuditLog, StoreError, SqlClient.SqlClient> =>
  Layer.effect(AuditLogService.AuditLog, make(options))
