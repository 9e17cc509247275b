/**
 * The gateway's metrics, as Effect `Metric`s in the process's global registry: whatever
 * reads `Metric.snapshot` (the standalone server's `/metrics`, an OpenTelemetry metric
 * reader in a host) sees them. Each is updated at the one place its event happens: tasks
 * created and ended on the write path (`TaskWrites`), upstream calls in the engine,
 * callback attempts in the deliverer.
 */
import { Effect, Metric, MetricBoundaries } from "effect"
import type { TaskRecord } from "./Task.js"

/** Tasks created by a submit (an Idempotency-Key replay creates none), by the model asked for. */
export const submitted = Metric.counter("mediagate_tasks_submitted_total", {
  description: "Tasks created by a submit, by model",
  incremental: true
})

/** Tasks that reached a terminal status, by status and failure reason (`none` unless FAILURE). */
export const ended = Metric.counter("mediagate_tasks_ended_total", {
  description: "Tasks that reached a terminal status, by status and failure_reason",
  incremental: true
})

/** Seconds an upstream call (submit or poll) took, by provider (`simulator` when it names none) and outcome. */
export const upstreamCall = Metric.histogram(
  "mediagate_upstream_call_seconds",
  MetricBoundaries.fromIterable([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]),
  "Duration of upstream submit and poll calls, by provider and outcome"
)

/** Callback attempts, by outcome: `delivered`, `retry` (failed, tried again later), `gave_up`. */
export const callbackAttempts = Metric.counter("mediagate_callback_attempts_total", {
  description: "Callback delivery attempts, by outcome (delivered, retry, gave_up)",
  incremental: true
})

/** Tasks waiting PENDING in the store (every node's), sampled by whoever can count them. */
export const pending = Metric.gauge("mediagate_tasks_pending", {
  description: "Tasks waiting PENDING in the task store"
})

/** The model a task was asked for (the catalog id), as a metric label. */
const modelOf = (record: TaskRecord) => String(record.input["model"] ?? "unknown")

/**
 * `metric` tagged with the labels `key` stands for, made once per key: these are updated on
 * every write and upstream call, and a tagged metric is a new key to hash at each update.
 */
const taggedOnce = <M>(make: (key: string) => M) => {
  const made = new Map<string, M>()
  return (key: string): M => {
    let metric = made.get(key)
    if (metric === undefined) made.set(key, metric = make(key))
    return metric
  }
}

const submittedBy = taggedOnce((model) => Metric.tagged(submitted, "model", model))
const endedBy = taggedOnce((key) => {
  const [status, reason] = key.split("\u0000")
  return Metric.tagged(Metric.tagged(ended, "status", status!), "failure_reason", reason!)
})
const upstreamCallBy = taggedOnce((key) => {
  const [provider, outcome] = key.split("\u0000")
  return Metric.tagged(Metric.tagged(upstreamCall, "provider", provider!), "outcome", outcome!)
})
const callbackAttemptsBy = taggedOnce((outcome) => Metric.tagged(callbackAttempts, "outcome", outcome))

/** Counts a created task. */
export const taskSubmitted = (record: TaskRecord): Effect.Effect<void> => Metric.increment(submittedBy(modelOf(record)))

/** Counts a task that just ended. */
export const taskEnded = (record: TaskRecord): Effect.Effect<void> =>
  Metric.increment(endedBy(`${record.status}\u0000${record.failureReason ?? "none"}`))

/** Records an upstream call of `millis` on `provider` that answered (`ok`), failed (`error`) or ran out (`timeout`). */
export const upstreamCalled = (provider: string | undefined, outcome: "ok" | "error" | "timeout", millis: number): Effect.Effect<void> =>
  Metric.update(upstreamCallBy(`${provider ?? "simulator"}\u0000${outcome}`), millis / 1000)

/** Counts a callback attempt by its outcome. */
export const callbackAttempt = (outcome: "Delivered" | "Retry" | "GaveUp"): Effect.Effect<void> =>
  Metric.increment(callbackAttemptsBy(outcome === "Delivered" ? "delivered" : outcome === "Retry" ? "retry" : "gave_up"))

/** Sets the PENDING gauge. */
export const setPending = (count: number): Effect.Effect<void> => Metric.set(pending, count)

