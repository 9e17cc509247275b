/**
 * What the operator's overview and providers page show, folded from the store's aggregate
 * rows (`UsageStore.stats`, `.providers`), the upstream's targets with this node's circuits
 * (`Upstream.targets`) and the engine's running limits (`RunningLimits`).
 */
import type { Effect } from "effect"
import { Context } from "effect"
import { TaskStatus } from "../domain/Task.js"
import type { UpstreamAttempt } from "../domain/Task.js"
import type { TargetStatus } from "../services/Upstream.js"
import type { ProviderRows, StatsQuery, StatsRows } from "../services/UsageStore.js"
import { dayMillis } from "../services/UsageStore.js"
import { dayLabel } from "./Usage.js"
import { nearestRank } from "./UsageRecords.js"

/**
 * The engine's running limits (`Engine.Options`), as the providers page shows them against
 * what runs. The standard composition provides the engine's own; without it they are not
 * known (null, none).
 */
export class RunningLimits extends Context.Reference<RunningLimits>()("@mediagate/core/RunningLimits", {
  defaultValue: (): {
    /** Tasks running at once over every node; null: not known. */
    readonly maxRunning: number | null
    /** By provider name, `"*"` for every provider not named. */
    readonly perProvider: Readonly<Record<string, number>>
  } => ({ maxRunning: null, perProvider: {} })
}) {}

/**
 * The provider targets of the composition's upstream with this node's circuits
 * (`Upstream.targets`), as the providers page shows them. The standard composition provides
 * its upstream's; without it, or for an upstream that names none, the page shows one
 * target (`unnamedTarget`).
 */
export class ProviderTargets extends Context.Reference<ProviderTargets>()("@mediagate/core/ProviderTargets", {
  defaultValue: (): Effect.Effect<ReadonlyArray<TargetStatus>> | undefined => undefined
}) {}

/** The windows of the overview: the last `minutes` minutes, the last 24 hours, the last `days` UTC days (today included). */
export const statsWindows = (now: number, minutes = 60, days = 30): StatsQuery => {
  const minute = Math.floor(now / 60_000) * 60_000
  const today = Math.floor(now / dayMillis) * dayMillis
  return {
    minutes: { from: minute - (minutes - 1) * 60_000, to: minute + 60_000 },
    recent: { from: now - dayMillis, to: now + 1 },
    days: { from: today - (days - 1) * dayMillis, to: today + dayMillis }
  }
}

/** The overview: every minute and day of its windows, empty ones with zeros, so a chart draws them all. */
export interface Overview {
  readonly perMinute: ReadonlyArray<{ readonly minute: number; readonly counts: { readonly [S in TaskStatus]: number } }>
  readonly timeToResult: StatsRows["timeToResult"]
  readonly failures: StatsRows["failures"]
  readonly spendPerDay: ReadonlyArray<{ readonly day: string; readonly spendMicroUsd: number; readonly charges: number }>
}

const zeros = () => Object.fromEntries(TaskStatus.literals.map((status) => [status, 0])) as Record<TaskStatus, number>

export const overview = (query: StatsQuery, rows: StatsRows): Overview => {
  const minutes = new Map<number, Record<TaskStatus, number>>()
  for (let at = query.minutes.from; at < query.minutes.to; at += 60_000) minutes.set(at / 60_000, zeros())
  for (const row of rows.perMinute) {
    const counts = minutes.get(row.minute)
    if (counts !== undefined) counts[row.status] += row.count
  }
  const spend = new Map(rows.spendPerDay.map((row) => [row.day, row]))
  const days: Array<Overview["spendPerDay"][number]> = []
  for (let at = query.days.from; at < query.days.to; at += dayMillis) {
    const day = at / dayMillis
    days.push({ day: dayLabel(day), spendMicroUsd: spend.get(day)?.spend ?? 0, charges: spend.get(day)?.charges ?? 0 })
  }
  return {
    perMinute: [...minutes.entries()].map(([minute, counts]) => ({ minute, counts })),
    timeToResult: [...rows.timeToResult].sort((a, b) => (a.model < b.model ? -1 : 1)),
    failures: [...rows.failures].sort((a, b) => b.count - a.count),
    spendPerDay: days
  }
}

/** A provider target with its recent figures and what runs on it. */
export interface ProviderView extends TargetStatus {
  /** Attempts on it that ended since the window's start. */
  readonly attempts: number
  /** Of those, how many failed or timed out. */
  readonly failed: number
  /** failed / attempts; null without attempts. */
  readonly errorRate: number | null
  /** Transient call failures (retried) within those attempts. */
  readonly transientFailures: number
  /** Nearest-rank percentiles of those attempts' durations (start to end), ms; null without attempts. */
  readonly latencyP50Ms: number | null
  readonly latencyP95Ms: number | null
  /** Tasks running now whose current attempt is on this target. */
  readonly running: number
  /**
   * The limit those count against first: the target's own (`maxRunning`), else its
   * provider's (`RunningLimits.perProvider`), else the engine's total; null: not known.
   */
  readonly limit: number | null
}

/** The one target of an upstream that names none: attempts without a provider run on it. */
export const unnamedTarget = "upstream"

/**
 * The providers page: each target with the attempts that ended on it since `since` and the
 * tasks running on it. An upstream without `targets` is one target (`unnamedTarget`),
 * closed, taking the attempts and tasks that name no target.
 */
export const providers = (
  since: number,
  targets: ReadonlyArray<TargetStatus> | undefined,
  rows: ProviderRows,
  limits: RunningLimits["Type"]
): ReadonlyArray<ProviderView> => {
  const list: ReadonlyArray<TargetStatus> = targets ??
    [{ name: unnamedTarget, provider: null, maxRunning: null, circuit: { state: "closed", until: null } }]
  const nameOf = (name: string | null | undefined) => name ?? (targets === undefined ? unnamedTarget : null)
  const ended = new Map<string, Array<UpstreamAttempt>>()
  for (const attempt of rows.attempts) {
    const name = nameOf(attempt.provider)
    if (name === null || attempt.endedAt === null || attempt.endedAt < since) continue
    ended.set(name, [...(ended.get(name) ?? []), attempt])
  }
  const running = new Map<string, number>()
  for (const row of rows.running) {
    const name = nameOf(row.target)
    if (name !== null) running.set(name, (running.get(name) ?? 0) + row.count)
  }
  return list.map((target) => {
    const attempts = ended.get(target.name) ?? []
    const failed = attempts.filter((attempt) => attempt.outcome === "failed" || attempt.outcome === "timed_out").length
    const durations = attempts.map((attempt) => attempt.endedAt! - attempt.startedAt).sort((a, b) => a - b)
    const providerLimit = target.provider === null ? undefined : limits.perProvider[target.provider] ?? limits.perProvider["*"]
    return {
      ...target,
      attempts: attempts.length,
      failed,
      errorRate: attempts.length === 0 ? null : failed / attempts.length,
      transientFailures: attempts.reduce((sum, attempt) => sum + attempt.transientFailures, 0),
      latencyP50Ms: durations.length === 0 ? null : nearestRank(durations, 50),
      latencyP95Ms: durations.length === 0 ? null : nearestRank(durations, 95),
      running: running.get(target.name) ?? 0,
      limit: target.maxRunning ?? providerLimit ?? limits.maxRunning
    }
  })
}
