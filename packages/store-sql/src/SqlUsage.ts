/**
 * The usage reports' and the operator's aggregate reads on @effect/sql (SQLite and
 * PostgreSQL): GROUP BY over the ledger, the tasks and the uploads (deleted ones included), each
 * bounded by its time window on an index (`ledger_entries (at)`, `tasks (created_at, id)`,
 * `uploads (created_at)`), and percentiles picked in SQL by
 * nearest rank (ROW_NUMBER over the window's rows). Only the providers page reads rows, and
 * at most `UsageStore.attemptSampleTasks` of them, plus the tasks running now.
 */
import type { SqlClient } from "@effect/sql"
import type { StoreError } from "@mediagate/core"
import { Task, UsageStore } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Schema as S } from "effect"
import * as Database from "./Database.js"
import { modelExpression } from "./Schema.js"
import { refail as refailAs } from "./internal/refail.js"

/** Settings of the SQL usage reads. */
export type Options = Database.Options

const refail = (operation: string) => refailAs("usage", operation)

/** PostgreSQL answers BIGINT sums and counts as strings. */
type Numeric = number | string | null
type TaskStatus = Task.TaskStatus

const decodeAttempts = S.decodeUnknownSync(S.parseJson(S.Array(Task.UpstreamAttempt)))

/** A row's attempts; a row whose JSON does not decode (it cannot, written by the store) counts none. */
const attemptsOf = (text: string): ReadonlyArray<Task.UpstreamAttempt> => {
  try {
    return decodeAttempts(text)
  } catch {
    return []
  }
}

/** The SQL usage reads. Runs the migrations first. */
export const make = (options: Options = {}): Effect.Effect<Context.Tag.Service<UsageStore.UsageStore>, StoreError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const { isPg, sql, tables: t } = yield* Database.prepare("the usage reads", options)
    const tasks = sql(t.tasks)
    const entries = sql(t.ledgerEntries)
    const uploads = sql(t.uploads)
    const model = sql.literal(modelExpression(isPg))
    const day = sql.literal(String(UsageStore.dayMillis))
    const createdDay = sql.literal(`CAST(created_at / ${UsageStore.dayMillis} AS TEXT)`)
    /** The group expression of a usage query, for the tasks, the ledger and the uploads (which have no model: one null group). */
    const groups = (groupBy: UsageStore.UsageGroupBy) =>
      groupBy === "day"
        ? { tasks: createdDay, ledger: sql.literal(`CAST(at / ${UsageStore.dayMillis} AS TEXT)`), uploads: createdDay }
        : groupBy === "model"
        ? { tasks: model, ledger: sql.literal("model"), uploads: sql.literal("CAST(NULL AS TEXT)") }
        : { tasks: sql.literal("key_id"), ledger: sql.literal("key_id"), uploads: sql.literal("key_id") }

    const usage = (query: UsageStore.UsageQuery) =>
      Effect.gen(function*() {
        const group = groups(query.groupBy)
        const byOwner = query.accountId === undefined ? sql`` : sql`AND owner_id = ${query.accountId}`
        const ownerEntries = query.accountId === undefined ? sql`` : sql`AND account_id = ${query.accountId}`
        const [taskRows, ledgerRows, uploadRows] = yield* Effect.all([
          sql<{ group: string | null; status: TaskStatus; count: Numeric }>`
            SELECT ${group.tasks} AS ${sql("group")}, status, COUNT(*) AS count FROM ${tasks}
            WHERE created_at >= ${query.from} AND created_at < ${query.to} ${byOwner}
            GROUP BY ${group.tasks}, status`,
          sql<{ group: string | null; kind: "credit" | "reserve" | "charge" | "release"; count: Numeric; amount: Numeric; held: Numeric }>`
            SELECT ${group.ledger} AS ${sql("group")}, kind, COUNT(*) AS count, SUM(amount) AS amount, SUM(held) AS held FROM ${entries}
            WHERE at >= ${query.from} AND at < ${query.to} ${ownerEntries}
            GROUP BY ${group.ledger}, kind`,
          // Every upload created in the window, deleted since or not: a window's usage never changes.
          sql<{ group: string | null; count: Numeric; bytes: Numeric }>`
            SELECT ${group.uploads} AS ${sql("group")}, COUNT(*) AS count, SUM(bytes) AS bytes FROM ${uploads}
            WHERE created_at >= ${query.from} AND created_at < ${query.to} ${byOwner}
            GROUP BY ${group.uploads}`
        ])
        return {
          tasks: taskRows.map((row) => ({ group: row.group, status: row.status, count: Number(row.count) })),
          ledger: ledgerRows.map((row) => ({
            group: row.group,
            kind: row.kind,
            count: Number(row.count),
            amount: Number(row.amount ?? 0),
            held: Number(row.held ?? 0)
          })),
          uploads: uploadRows.map((row) => ({ group: row.group, count: Number(row.count), bytes: Number(row.bytes ?? 0) }))
        }
      }).pipe(refail("usage"))

    const stats = (query: UsageStore.StatsQuery) =>
      Effect.gen(function*() {
        const [perMinute, ranks, failures, spend] = yield* Effect.all([
          sql<{ minute: Numeric; status: TaskStatus; count: Numeric }>`
            SELECT created_at / 60000 AS minute, status, COUNT(*) AS count FROM ${tasks}
            WHERE created_at >= ${query.minutes.from} AND created_at < ${query.minutes.to}
            GROUP BY created_at / 60000, status`,
          // The nearest-rank 50th and 95th percentiles: the rows at ranks ceil(n p / 100).
          sql<{ model: string; n: Numeric; rn: Numeric; d: Numeric }>`
            SELECT model, n, rn, d FROM (
              SELECT model, d, ROW_NUMBER() OVER (PARTITION BY model ORDER BY d) AS rn, COUNT(*) OVER (PARTITION BY model) AS n
              FROM (SELECT ${model} AS model, updated_at - created_at AS d FROM ${tasks}
                WHERE created_at >= ${query.recent.from} AND created_at < ${query.recent.to} AND status = 'SUCCESS') durations
            ) ranked
            WHERE rn = (n * 50 + 99) / 100 OR rn = (n * 95 + 99) / 100`,
          sql<{ status: TaskStatus; reason: string | null; provider: string | null; count: Numeric }>`
            SELECT status, failure_reason AS reason, provider, COUNT(*) AS count FROM ${tasks}
            WHERE created_at >= ${query.recent.from} AND created_at < ${query.recent.to} AND status IN ('FAILURE', 'TIMEOUT')
            GROUP BY status, failure_reason, provider`,
          sql<{ day: Numeric; spend: Numeric; charges: Numeric }>`
            SELECT at / ${day} AS day, -SUM(amount) AS spend, COUNT(*) AS charges FROM ${entries}
            WHERE at >= ${query.days.from} AND at < ${query.days.to} AND kind = 'charge'
            GROUP BY at / ${day}`
        ])
        const byModel = new Map<string, { model: string; count: number; p50: number; p95: number }>()
        for (const row of ranks) {
          const n = Number(row.n)
          const rank = Number(row.rn)
          const found = byModel.get(row.model) ?? { model: row.model, count: n, p50: 0, p95: 0 }
          if (rank === Math.ceil((n * 50) / 100)) found.p50 = Number(row.d)
          if (rank === Math.ceil((n * 95) / 100)) found.p95 = Number(row.d)
          byModel.set(row.model, found)
        }
        return {
          perMinute: perMinute.map((row) => ({ minute: Number(row.minute), status: row.status, count: Number(row.count) })),
          timeToResult: [...byModel.values()],
          failures: failures.map((row) => ({ status: row.status, reason: row.reason, provider: row.provider, count: Number(row.count) })),
          spendPerDay: spend.map((row) => ({ day: Number(row.day), spend: Number(row.spend ?? 0), charges: Number(row.charges) }))
        }
      }).pipe(refail("stats"))

    const providers = (query: { readonly now: number; readonly since: number; readonly recentFrom: number }) =>
      Effect.gen(function*() {
        const [recent, running] = yield* Effect.all([
          sql<{ attempts: string }>`
            SELECT attempts FROM ${tasks}
            WHERE created_at >= ${query.recentFrom} AND updated_at >= ${query.since}
            ORDER BY created_at DESC, id DESC LIMIT ${UsageStore.attemptSampleTasks}`,
          // What runs now, as the engine's claim counts it: bounded by its running limit.
          sql<{ provider: string | null; attempts: string }>`
            SELECT provider, attempts FROM ${tasks}
            WHERE due_at IS NOT NULL AND (status <> 'PENDING' OR lease_until > ${query.now})`
        ])
        const counts = new Map<string, { provider: string | null; target: string | null; count: number }>()
        for (const row of running) {
          const target = attemptsOf(row.attempts).at(-1)?.provider ?? null
          const key = JSON.stringify([row.provider, target])
          const found = counts.get(key) ?? { provider: row.provider, target, count: 0 }
          found.count += 1
          counts.set(key, found)
        }
        return { attempts: recent.flatMap((row) => attemptsOf(row.attempts)), running: [...counts.values()] }
      }).pipe(refail("providers"))

    return { usage, stats, providers }
  })

/** The SQL usage reads (on the SqlClient in context). */
export const layer: Layer.Layer<UsageStore.UsageStore, StoreError, SqlClient.SqlClient> = Layer.effect(UsageStore.UsageStore, make())

/** The SQL usage reads with options (table prefix). */
export const layerWith = (options: Options): Layer.Layer<UsageStore.UsageStore, StoreError, SqlClient.SqlClient> =>
  Layer.effect(UsageStore.UsageStore, make(options))
