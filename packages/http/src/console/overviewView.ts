/** The overview: the four charts from the admin API's statistics. */
import { api, ok } from "./adminFetch.js"
import { categoryBars, spendPerDay, tasksPerMinute } from "./charts.js"
import { $, duration, say, usd } from "./elements.js"
import { paths } from "./wire.js"
import type { StatsData } from "./wire.js"

type Minute = StatsData["tasks_per_minute"][number]
type Status = Exclude<keyof Minute, "minute">

/** The statuses in the order a task goes through them, the ended ones first (they are most of a chart). */
const statuses: ReadonlyArray<Status> = ["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED", "PROCESSING", "SUBMITTED", "PENDING"]

function draw(stats: StatsData): void {
  const minutes = stats.tasks_per_minute
  // A line for each status some minute has, SUCCESS and FAILURE always.
  const shown = statuses.filter(function(status) {
    return status === "SUCCESS" || status === "FAILURE" || minutes.some(function(minute) {
      return minute[status] > 0
    })
  })
  tasksPerMinute("chart-tasks", minutes.map(function(minute) {
    return Date.parse(minute.minute)
  }), shown.map(function(status) {
    return { status: status, counts: minutes.map(function(minute) {
      return minute[status]
    }) }
  }))
  categoryBars("chart-latency", "Time to result by model", stats.time_to_result.map(function(row) {
    return row.model
  }), [
    { label: "p50", values: stats.time_to_result.map(function(row) {
      return row.p50_ms / 1000
    }), show: function(value) {
      return duration(value * 1000)
    } },
    { label: "p95", values: stats.time_to_result.map(function(row) {
      return row.p95_ms / 1000
    }), show: function(value) {
      return duration(value * 1000)
    } }
  ], "seconds")
  categoryBars("chart-failures", "Failures by class and provider", stats.failures.map(function(row) {
    return (row.provider || "simulator") + ": " + (row.failure_reason || (row.status === "TIMEOUT" ? "timed out" : "upstream failure"))
  }), [{ label: "failures", values: stats.failures.map(function(row) {
    return row.count
  }), show: String }], "tasks")
  spendPerDay("chart-spend", stats.spend_per_day.map(function(row) {
    return { day: Date.parse(row.day), microUsd: row.spend_micro_usd }
  }), usd)
}

/** Loads the statistics and draws them. */
export function showOverview(): void {
  say("overview-note", "Loading...")
  api<StatsData>("GET", paths.stats).then(function(answer) {
    if (!ok(answer)) return say("overview-note", answer.envelope.msg, "error")
    say("overview-note", "")
    draw(answer.envelope.data)
  })
}

$("overview-refresh").addEventListener("click", showOverview)
