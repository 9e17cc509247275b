/**
 * The `UsageStore`'s reads computed from records in hand (tasks, ledger entries and uploads), as
 * the SQL backend's GROUP BY queries compute them: the memory backend answers with these
 * (`layer`, over the contracts of the task store, ledger, accounts and uploads), and the
 * contract suite holds every backend to the same answers.
 */
import type { Context } from "effect"
import { Effect, Layer } from "effect"
import type { StoreError } from "../domain/Errors.js"
import { AccountId } from "../domain/Ids.js"
import type { TaskId } from "../domain/Ids.js"
import type { TaskRecord } from "../domain/Task.js"
import { AccountAdmin } from "../services/Accounts.js"
import type { LedgerEntry } from "../services/Ledger.js"
import { Ledger } from "../services/Ledger.js"
import { TaskStore } from "../services/TaskStore.js"
import type { UploadRecord } from "../services/Uploads.js"
import { Uploads } from "../services/Uploads.js"
import type { LedgerSumRow, ProviderRows, StatsQuery, StatsRows, TaskCountRow, UploadSumRow, UsageQuery, UsageRows } from "../services/UsageStore.js"
import { attemptSampleTasks, dayMillis, UsageStore } from "../services/UsageStore.js"

/**
 * The nearest-rank percentile `p` (0..100) of values sorted ascending: the value at rank
 * `ceil(p / 100 * n)`, as the SQL backend picks it with ROW_NUMBER.
 */
export const nearestRank = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted[Math.max(1, Math.ceil((sorted.length * p) / 100)) - 1]!

const within = (at: number, window: { readonly from: number; readonly to: number }) => at >= window.from && at < window.to

const count = <K, R>(items: Iterable<K>, keyOf: (item: K) => string, make: (item: K) => R & { count: number }): Array<R & { count: number }> => {
  const found = new Map<string, R & { count: number }>()
  for (const item of items) {
    const key = keyOf(item)
    const row = found.get(key)
    if (row === undefined) found.set(key, make(item))
    else row.count += 1
  }
  return [...found.values()]
}

/** A task's model as submitted (`input.model`), as the SQL backend reads it. */
const modelOf = (task: TaskRecord): string | null => (typeof task.input["model"] === "string" ? task.input["model"] : null)

/** The group of a row at `at`, of `model`, with `keyId`. */
const groupOf = (query: UsageQuery, at: number, model: string | null | undefined, keyId: string | null | undefined): string | null =>
  query.groupBy === "day" ? String(Math.floor(at / dayMillis)) : query.groupBy === "model" ? model ?? null : keyId ?? null

/**
 * A usage query's rows over the tasks, entries and uploads given (of any account: those of
 * another are left out). Uploads have no model; they count under the key they were uploaded with.
 */
export const usageRows = (
  query: UsageQuery,
  tasks: Iterable<TaskRecord>,
  entries: Iterable<LedgerEntry>,
  uploads: Iterable<UploadRecord>
): UsageRows => {
  const mine = (accountId: string) => query.accountId === undefined || accountId === query.accountId
  const taskRows: Array<TaskCountRow> = count(
    [...tasks].filter((task) => mine(task.ownerId) && within(task.createdAt, query)),
    (task) => JSON.stringify([groupOf(query, task.createdAt, modelOf(task), task.keyId), task.status]),
    (task) => ({ group: groupOf(query, task.createdAt, modelOf(task), task.keyId), status: task.status, count: 1 })
  )
  const sums = new Map<string, { -readonly [K in keyof LedgerSumRow]: LedgerSumRow[K] }>()
  for (const entry of entries) {
    if (!mine(entry.accountId) || !within(entry.at, query)) continue
    const group = groupOf(query, entry.at, entry.model, entry.keyId)
    const key = JSON.stringify([group, entry.kind])
    const row = sums.get(key) ?? { group, kind: entry.kind, count: 0, amount: 0, held: 0 }
    row.count += 1
    row.amount += entry.amount
    row.held += entry.held
    sums.set(key, row)
  }
  const stored = new Map<string, { -readonly [K in keyof UploadSumRow]: UploadSumRow[K] }>()
  for (const upload of uploads) {
    if (!mine(upload.ownerId) || !within(upload.createdAt, query)) continue
    const group = groupOf(query, upload.createdAt, null, upload.keyId)
    const key = JSON.stringify(group)
    const row = stored.get(key) ?? { group, count: 0, bytes: 0 }
    row.count += 1
    row.bytes += upload.bytes
    stored.set(key, row)
  }
  return { tasks: taskRows, ledger: [...sums.values()], uploads: [...stored.values()] }
}

/** The overview's rows over the tasks and entries given. */
export const statsRows = (query: StatsQuery, tasks: ReadonlyArray<TaskRecord>, entries: Iterable<LedgerEntry>): StatsRows => {
  const perMinute = count(
    tasks.filter((task) => within(task.createdAt, query.minutes)),
    (task) => `${Math.floor(task.createdAt / 60_000)} ${task.status}`,
    (task) => ({ minute: Math.floor(task.createdAt / 60_000), status: task.status, count: 1 })
  )
  const recent = tasks.filter((task) => within(task.createdAt, query.recent))
  const durations = new Map<string, Array<number>>()
  for (const task of recent) {
    const model = modelOf(task)
    if (task.status !== "SUCCESS" || model === null) continue
    durations.set(model, [...(durations.get(model) ?? []), task.updatedAt - task.createdAt])
  }
  const timeToResult = [...durations.entries()].map(([model, values]) => {
    const sorted = [...values].sort((a, b) => a - b)
    return { model, count: sorted.length, p50: nearestRank(sorted, 50), p95: nearestRank(sorted, 95) }
  })
  const failures = count(
    recent.filter((task) => task.status === "FAILURE" || task.status === "TIMEOUT"),
    (task) => JSON.stringify([task.status, task.failureReason, task.provider]),
    (task) => ({ status: task.status, reason: task.failureReason, provider: task.provider, count: 1 })
  )
  const spend = new Map<number, { day: number; spend: number; charges: number }>()
  for (const entry of entries) {
    if (entry.kind !== "charge" || !within(entry.at, query.days)) continue
    const day = Math.floor(entry.at / dayMillis)
    const row = spend.get(day) ?? { day, spend: 0, charges: 0 }
    row.spend -= entry.amount
    row.charges += 1
    spend.set(day, row)
  }
  return { perMinute, timeToResult, failures, spendPerDay: [...spend.values()] }
}

/** Whether a task runs now: claimed out of PENDING (or PENDING under a live lease) and not ended, as the claim counts it. */
export const isRunning = (task: TaskRecord, now: number): boolean =>
  task.dueAt !== null && (task.status !== "PENDING" || (task.leaseUntil !== null && task.leaseUntil > now))

/** The providers page's rows over the tasks given. */
export const providerRows = (query: { readonly now: number; readonly since: number; readonly recentFrom: number }, tasks: ReadonlyArray<TaskRecord>): ProviderRows => {
  const sample = tasks
    .filter((task) => task.createdAt >= query.recentFrom && task.updatedAt >= query.since)
    .sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1))
    .slice(0, attemptSampleTasks)
  const running = count(
    tasks.filter((task) => isRunning(task, query.now)),
    (task) => JSON.stringify([task.provider, task.attempts.at(-1)?.provider ?? null]),
    (task) => ({ provider: task.provider, target: task.attempts.at(-1)?.provider ?? null, count: 1 })
  )
  return { attempts: sample.flatMap((task) => task.attempts), running }
}

/** Tasks read per page of `listAll`. */
const page = 1_000

/** The uploads created in `[from, to)`, deleted or not (`Uploads.created`). */
export type UploadsCreated = (from: number, to: number) => Effect.Effect<ReadonlyArray<UploadRecord>, StoreError>

/**
 * The usage reads over any task store, ledger and accounts, and the uploads `created` gives,
 * reading every task and entry on each call: for the memory backends (`MemoryUsage`), and the
 * composition's default where a host gives no usage reads of its own (the SQL backends give
 * `SqlUsage`).
 */
export const makeWith = (
  created: UploadsCreated
): Effect.Effect<Context.Tag.Service<UsageStore>, never, TaskStore | Ledger | AccountAdmin> => Effect.gen(function*() {
  const store = yield* TaskStore
  const ledger = yield* Ledger
  const admin = yield* AccountAdmin

  const allTasks: Effect.Effect<ReadonlyArray<TaskRecord>, StoreError> = Effect.gen(function*() {
    const found: Array<TaskRecord> = []
    let cursor: TaskId | undefined
    for (;;) {
      const { nextCursor, tasks } = yield* store.listAll({ limit: page, cursor })
      found.push(...tasks)
      if (nextCursor === null) return found
      cursor = nextCursor
    }
  })

  /** The entries of `accountId`'s ledger, or of every account known (listed, or owning a task). */
  const allEntries = (tasks: ReadonlyArray<TaskRecord>, accountId: AccountId | undefined) =>
    Effect.gen(function*() {
      const accounts = accountId !== undefined
        ? [accountId]
        : [...new Set([...(yield* admin.listAccounts).map((account) => account.id), ...tasks.map((task) => task.ownerId)])]
      const entries = yield* Effect.forEach(accounts, (id) => ledger.entries(AccountId.make(id), Number.MAX_SAFE_INTEGER))
      return entries.flat()
    })

  return {
    usage: (query) =>
      Effect.gen(function*() {
        const tasks = yield* allTasks
        return usageRows(query, tasks, yield* allEntries(tasks, query.accountId), yield* created(query.from, query.to))
      }),
    stats: (query) =>
      Effect.gen(function*() {
        const tasks = yield* allTasks
        return statsRows(query, tasks, yield* allEntries(tasks, undefined))
      }),
    providers: (query) => Effect.map(allTasks, (tasks) => providerRows(query, tasks))
  }
})

/** The usage reads over the task store, ledger, accounts and uploads in context. */
export const make: Effect.Effect<Context.Tag.Service<UsageStore>, never, TaskStore | Ledger | AccountAdmin | Uploads> = Effect.flatMap(
  Uploads,
  (uploads) => makeWith(uploads.created)
)

/** The usage reads over the task store, ledger, accounts and uploads in context (`make`). */
export const layer: Layer.Layer<UsageStore, never, TaskStore | Ledger | AccountAdmin | Uploads> = Layer.effect(UsageStore, make)

/**
 * The usage reads over the task store, ledger and accounts in context, of a composition that
 * takes no uploads (no `Files`, as `Mediagate.services` alone): they count none.
 */
export const layerWithoutUploads: Layer.Layer<UsageStore, never, TaskStore | Ledger | AccountAdmin> = Layer.effect(
  UsageStore,
  makeWith(() => Effect.succeed([]))
)
