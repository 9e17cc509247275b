/**
 * `GET /metrics`: the process's Effect metrics (`Metric.snapshot`, the global registry) in
 * the Prometheus text exposition format (version 0.0.4), rendered here rather than through
 * OpenTelemetry's Prometheus exporter: counters, gauges and histograms are all the gateway
 * has, and their text is a few lines each. Off unless the host turns it on (`Enabled`);
 * then it needs no key, like `/healthz`. Before each answer the PENDING gauge is sampled
 * from the task store, so the queue depth is as of the scrape.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Metrics, TaskStore } from "@mediagate/core"
import { Context, Effect, Layer, Metric, MetricState, Option } from "effect"
import type { MetricPair } from "effect"
import { metricsPath } from "./Paths.js"

/** Whether `/metrics` is served; default false (then it is the envelope's 404 like any unknown path). */
export class Enabled extends Context.Reference<Enabled>()("@mediagate/http/MetricsEnabled", {
  defaultValue: (): boolean => false
}) {}

/** The content type of the text format. */
export const contentType = "text/plain; version=0.0.4; charset=utf-8"

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, "\\\"")
const escapeHelp = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")
const sanitize = (name: string) => name.replace(/[^a-zA-Z0-9_:]/g, "_")

const number = (value: number | bigint) =>
  typeof value === "bigint"
    ? value.toString()
    : Number.isNaN(value)
    ? "NaN"
    : value === Infinity
    ? "+Inf"
    : value === -Infinity
    ? "-Inf"
    : String(value)

const labels = (pairs: ReadonlyArray<readonly [string, string]>) =>
  pairs.length === 0 ? "" : `{${pairs.map(([key, value]) => `${sanitize(key)}="${escapeLabel(value)}"`).join(",")}}`

/**
 * The snapshot in the text format: one `# HELP` and `# TYPE` per metric name, then a line
 * per label set (histograms: cumulative `_bucket` lines, `_sum`, `_count`). Frequencies and
 * summaries, which the gateway does not make, are left out.
 */
export const render = (snapshot: ReadonlyArray<MetricPair.MetricPair.Untyped>): string => {
  const families = new Map<string, { type: string; help: string; lines: Array<string> }>()
  const family = (name: string, type: string, help: string | undefined) => {
    const existing = families.get(name)
    if (existing !== undefined) return existing.lines
    const created = { type, help: help ?? name, lines: [] as Array<string> }
    families.set(name, created)
    return created.lines
  }
  for (const { metricKey, metricState } of snapshot) {
    const name = sanitize(metricKey.name)
    // Labels in name order, `le` last: the same series always reads the same.
    const tags = metricKey.tags.map((tag) => [tag.key, tag.value] as const).sort(([a], [b]) => a.localeCompare(b))
    const help = Option.getOrUndefined(metricKey.description)
    if (MetricState.isCounterState(metricState)) {
      family(name, "counter", help).push(`${name}${labels(tags)} ${number(metricState.count)}`)
    } else if (MetricState.isGaugeState(metricState)) {
      family(name, "gauge", help).push(`${name}${labels(tags)} ${number(metricState.value)}`)
    } else if (MetricState.isHistogramState(metricState)) {
      const lines = family(name, "histogram", help)
      let infinite = false
      for (const [boundary, count] of metricState.buckets) {
        infinite ||= boundary === Infinity
        lines.push(`${name}_bucket${labels([...tags, ["le", number(boundary)]])} ${count}`)
      }
      if (!infinite) lines.push(`${name}_bucket${labels([...tags, ["le", "+Inf"]])} ${metricState.count}`)
      lines.push(`${name}_sum${labels(tags)} ${number(metricState.sum)}`)
      lines.push(`${name}_count${labels(tags)} ${metricState.count}`)
    }
  }
  return [...families.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, { help, lines, type }]) => [`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`, ...lines.sort()].join("\n"))
    .join("\n") + "\n"
}

/** The current snapshot rendered, with the PENDING gauge sampled from `store` first when it can count. */
export const scrape = (store: Option.Option<Context.Tag.Service<TaskStore.TaskStore>>): Effect.Effect<string> =>
  Effect.gen(function*() {
    if (Option.isSome(store) && store.value.countPending !== undefined) {
      yield* store.value.countPending.pipe(
        Effect.flatMap(Metrics.setPending),
        Effect.catchTag("StoreError", (error) => Effect.logWarning("metrics: counting PENDING tasks failed", error))
      )
    }
    return render(yield* Metric.snapshot)
  })

/** The `/metrics` route, registered only when `Enabled` is true. */
export const routes: Layer.Layer<never> = HttpApiBuilder.Router.use((router) =>
  Effect.gen(function*() {
    if (!(yield* Enabled)) return
    // Optional by nature: the queue-depth gauge needs a store that can count; without one it is left out.
    const store = yield* Effect.serviceOption(TaskStore.TaskStore)
    yield* router.get(
      metricsPath,
      Effect.map(scrape(store), (text) =>
        HttpServerResponse.text(text, { contentType, headers: { "cache-control": "no-store" } }))
    )
  })
)
