/** The overview: the four charts from the admin API's statistics. */
import { api, ok } from "./adminFetch.js"
import { categoryBars, spendPerDay, tasksPerMinute } from "./charts.js"
import { $, duration, say, usd } from "./elements.js"
import { paths } from "./wire.js"
import type { StatsData } from "./wire.js"

function draw(stats: StatsData): void {
  tasksPerMinute("chart-tasks", stats.per_minute.minutes.map(function(minute) {
    return Date.parse(minute)
  }), stats.per_minute.statuses)
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
    return (row.provider || "no provider") + ": " + (row.reason || row.status)
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
