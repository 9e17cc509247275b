/**
 * The audit log in memory: append-only, newest first by time, then id.
 */
import { AuditLog } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer } from "effect"

const newerFirst = (a: AuditLog.AuditEntry, b: AuditLog.AuditEntry) => b.at - a.at || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)

/** The memory AuditLog: entries in an array, a page read by one scan. */
export const make: Effect.Effect<Context.Tag.Service<AuditLog.AuditLog>> = Effect.sync(() => {
  const entries: Array<AuditLog.AuditEntry> = []
  return {
    record: (entry) =>
      Effect.sync(() => {
        // Kept as JSON would keep them, so memory answers what SQL answers.
        entries.push({ ...entry, before: JSON.parse(JSON.stringify(entry.before ?? null)), after: JSON.parse(JSON.stringify(entry.after ?? null)) })
      }),
    list: ({ action, cursor, limit, target }) =>
      Effect.sync(() => {
        const sorted = [...entries].sort(newerFirst)
        const from = cursor === undefined ? undefined : sorted.find((entry) => entry.id === cursor)
        const shown = sorted.filter((entry) =>
          (action === undefined || entry.action === action) &&
          (target === undefined || entry.target === target) &&
          (cursor === undefined || (from !== undefined && newerFirst(from, entry) < 0))
        )
        const page = shown.slice(0, limit)
        return { entries: page, nextCursor: shown.length > limit ? page[page.length - 1]!.id : null }
      })
  }
})

/** The memory AuditLog layer, empty. */
export const layer: Layer.Layer<AuditLog.AuditLog> = Layer.effect(AuditLog.AuditLog, make)
