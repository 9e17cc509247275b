/**
 * OpenTelemetry export of the standalone server, turned on by the standard `OTEL_*`
 * variables (docs/operations.md, "Traces"): with `OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` set, spans (one per HTTP request, one per engine
 * step) go to an OTLP/HTTP (JSON) receiver through a batch span processor; with
 * `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`, Effect's metrics
 * too, by a periodic reader. The exporters read the other `OTEL_*` variables themselves
 * (headers, timeouts, the batch processor's schedule). Without any of them nothing is
 * installed and spans stay off (they cost CPU for nobody), and the SDK is not even loaded:
 * its modules are imported only when a variable asks for export (a start without them is
 * that much faster, docs/benchmarks.md, "Issue 37: start time").
 */
import { Config, Effect, Layer, Option } from "effect"

/** What is exported, from the environment. */
export interface TelemetryConfig {
  readonly traces: boolean
  readonly metrics: boolean
  /** OTEL_SERVICE_NAME; `mediagate` when unset. */
  readonly serviceName: string
  /** OTEL_METRIC_EXPORT_INTERVAL, milliseconds between metric exports (default 60000). */
  readonly metricInterval: number
}

/** Every variable this module reads itself (the exporters read more: OTEL_EXPORTER_OTLP_HEADERS, ...). */
export const variables = [
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
  "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
  "OTEL_SERVICE_NAME",
  "OTEL_METRIC_EXPORT_INTERVAL"
] as const

const set = (name: typeof variables[number]) =>
  Config.string(name).pipe(Config.option, Config.map(Option.filter((value) => value.trim().length > 0)))

/** Reads the OTEL_* variables that decide what is exported. */
export const telemetryConfig: Config.Config<TelemetryConfig> = Config.all({
  endpoint: set("OTEL_EXPORTER_OTLP_ENDPOINT"),
  traces: set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
  metrics: set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
  serviceName: set("OTEL_SERVICE_NAME"),
  interval: set("OTEL_METRIC_EXPORT_INTERVAL")
}).pipe(
  Config.map(({ endpoint, interval, metrics, serviceName, traces }) => {
    const millis = Option.getOrElse(Option.map(interval, Number), () => 60_000)
    return {
      traces: Option.isSome(endpoint) || Option.isSome(traces),
      metrics: Option.isSome(endpoint) || Option.isSome(metrics),
      serviceName: Option.getOrElse(serviceName, () => "mediagate"),
      metricInterval: Number.isFinite(millis) && millis >= 100 ? millis : 60_000
    }
  })
)

/**
 * The OpenTelemetry SDK for what is configured; when traces are not exported, Effect's
 * tracer is turned off (no span is made for nobody).
 */
export const layer = (config: TelemetryConfig): Layer.Layer<never> =>
  !config.traces && !config.metrics ? Layer.setTracerEnabled(false) : Layer.unwrapEffect(Effect.promise(() => sdkLayer(config)))

/** The SDK's layer, its modules loaded now. */
const sdkLayer = async (config: TelemetryConfig): Promise<Layer.Layer<never>> => {
  const [NodeSdk, { OTLPMetricExporter }, { OTLPTraceExporter }, { PeriodicExportingMetricReader }, { BatchSpanProcessor }] = await Promise.all([
    import("@effect/opentelemetry/NodeSdk"),
    import("@opentelemetry/exporter-metrics-otlp-http"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/sdk-metrics"),
    import("@opentelemetry/sdk-trace-node")
  ])
  const sdk = NodeSdk.layer(() => ({
    resource: { serviceName: config.serviceName },
    ...(config.traces ? { spanProcessor: new BatchSpanProcessor(new OTLPTraceExporter()) } : {}),
    ...(config.metrics
      ? {
        metricReader: new PeriodicExportingMetricReader({
          exporter: new OTLPMetricExporter(),
          exportIntervalMillis: config.metricInterval,
          exportTimeoutMillis: Math.min(30_000, config.metricInterval)
        })
      }
      : {})
  }))
  return Layer.discard(config.traces ? sdk : Layer.merge(sdk, Layer.setTracerEnabled(false)))
}
