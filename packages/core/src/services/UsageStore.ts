/**
 * The aggregate reads behind the usage reports, the operator's overview and the providers
 * page: GROUP BY queries over the ledger, the tasks and the uploads, never a counter of their own, so the
 * figures cannot drift from what was charged (DESIGN.md section 10). Each read's cost is
 * bounded by its time window (or by what runs now), not by the size of the tables. The
 * store answers raw groups; `tasks/Usage.ts` folds them into the reports, the one place the
 * figures' rules live. Backends: @mediagate/store-memory (`MemoryUsage`), @mediagate/store-sql
 * (`SqlUsage`); one contract suite runs on every backend (test/usage-contract.test.ts).
 */
import type { Effect } from "effect"
import { Context } from "effect"
import type { StoreError } from "../domain/Errors.js"
import type { AccountId } from "../domain/Ids.js"
import type { TaskStatus, UpstreamAttempt } from "../domain/Task.js"
import type { EntryKind } from "./Ledger.js"

/** What the groups of a usage report are: the UTC day, the model as submitted, or the key it was submitted with. */
export type UsageGroupBy = "day" | "model" | "key"

/** One milliseconds-long UTC day: a day's group is `floor(at / dayMillis)`. */
export const dayMillis = 86_400_000

/** The rows of a usage report, over `[from, to)`, of one account or of every account. */
export interface UsageQuery {
  readonly from: number
  readonly to: number
  readonly groupBy: UsageGroupBy
  /** One account's; absent: every account's. */
  readonly accountId?: AccountId | undefined
}

/**
 * The group a row falls in: for `day` the UTC day's number (`floor(at / dayMillis)`) as a
 * decimal string, for `model` the model as submitted, for `key` the key's id; null where the
 * row has none (a task from before keys were recorded, a credit, an upload's model).
 */
export type UsageGroupKey = string | null

/** Tasks created in the window, by group and current status. */
export interface TaskCountRow {
  readonly group: UsageGroupKey
  readonly status: TaskStatus
  readonly count: number
}

/** Ledger entries written in the window, by group and kind: their count and the sums of their `amount` and `held`. */
export interface LedgerSumRow {
  readonly group: UsageGroupKey
  readonly kind: EntryKind
  readonly count: number
  readonly amount: number
  readonly held: number
}

/**
 * Uploads created in the window (`POST /files`), by group: how many and the sum of their bytes,
 * those deleted or swept since included. An upload has no model: grouped by model, its group is null.
 */
export interface UploadSumRow {
  readonly group: UsageGroupKey
  readonly count: number
  readonly bytes: number
}

/** What a usage query answers: the tasks' counts, the ledger's sums and the uploads' sums, each by group. */
export interface UsageRows {
  readonly tasks: ReadonlyArray<TaskCountRow>
  readonly ledger: ReadonlyArray<LedgerSumRow>
  readonly uploads: ReadonlyArray<UploadSumRow>
}

/** The windows of the overview's figures, each `[from, to)` in epoch milliseconds. */
export interface StatsQuery {
  /** Tasks per minute by status: tasks created in this window. */
  readonly minutes: { readonly from: number; readonly to: number }
  /** Time to result and failures: tasks created in this window. */
  readonly recent: { readonly from: number; readonly to: number }
  /** Spend per day: charges written in this window. */
  readonly days: { readonly from: number; readonly to: number }
}

/** The raw groups of the overview. */
export interface StatsRows {
  /** Tasks created per minute (`floor(created_at / 60000)`) by current status. */
  readonly perMinute: ReadonlyArray<{ readonly minute: number; readonly status: TaskStatus; readonly count: number }>
  /**
   * Time to result (`updated_at - created_at` of SUCCESS tasks) by model as submitted: how
   * many, and the nearest-rank 50th and 95th percentiles, in milliseconds.
   */
  readonly timeToResult: ReadonlyArray<{ readonly model: string; readonly count: number; readonly p50: number; readonly p95: number }>
  /** Tasks that ended FAILURE or TIMEOUT, by status, failure_reason and provider (`TaskRecord.provider`). */
  readonly failures: ReadonlyArray<{
    readonly status: TaskStatus
    readonly reason: string | null
    readonly provider: string | null
    readonly count: number
  }>
  /** Charges per UTC day (`floor(at / dayMillis)`): the sum of what they took out of balances, in micro-USD. */
  readonly spendPerDay: ReadonlyArray<{ readonly day: number; readonly spend: number; readonly charges: number }>
}

/** Most tasks whose attempts the providers page reads (the newest first): the bound of its cost. */
export const attemptSampleTasks = 5_000

/** What the providers page reads from the store. */
export interface ProviderRows {
  /**
   * The attempts of tasks created since `recentFrom` and written since `since`, newest
   * tasks first, at most `attemptSampleTasks` tasks: the caller keeps those that ended since
   * `since`.
   */
  readonly attempts: ReadonlyArray<UpstreamAttempt>
  /**
   * Tasks running now (claimed out of PENDING and not ended), each with the provider its
   * limit counts under (`TaskRecord.provider`) and the target of its last attempt.
   */
  readonly running: ReadonlyArray<{ readonly provider: string | null; readonly target: string | null; readonly count: number }>
}

/** The aggregate reads. Every one may fail with StoreError when the database does not answer. */
export class UsageStore extends Context.Tag("@mediagate/core/UsageStore")<UsageStore, {
  readonly usage: (query: UsageQuery) => Effect.Effect<UsageRows, StoreError>
  readonly stats: (query: StatsQuery) => Effect.Effect<StatsRows, StoreError>
  readonly providers: (query: {
    readonly now: number
    readonly since: number
    readonly recentFrom: number
  }) => Effect.Effect<ProviderRows, StoreError>
}>() {}
