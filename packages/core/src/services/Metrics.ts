/**
 * The gateway's metrics, as Effect `Metric`s in the process's global registry: whatever
 * reads `Metric.snapshot` (the standalone server's `/metrics`, an OpenTelemetry metric
 * reader in a host) sees them. Each is updated at the one place its event happens: tasks
 * created and ended on the write path (`TaskWrites`), upstream calls in the engine,
 * callback attempts in the deliverer.
 */
import { Effect, Metric, MetricBoundaries } from "effect"
import type { TaskRecord } from "../domain/Task.js"

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

/**
 * Submits of an upstream attempt that had been submitted before, by outcome: `retried` (sent
 * again under the same idempotency key after a call that failed or was lost, before the
 * upstream accepted a job) and `refused` (the attempt's job was accepted or finished already:
 * not sent, logged as an error; a bug, since one attempt runs at most one job).
 */
export const upstreamResubmits = Metric.counter("mediagate_upstream_resubmits_total", {
  description: "Upstream submits of an attempt submitted before, by outcome (retried, refused)",
  incremental: true
})

/** Copies of a finished job's result files into the MediaStore, by outcome: `ok`, `retry` (failed, tried again), `failed` (the task failed). */
export const resultCopies = Metric.counter("mediagate_result_copies_total", {
  description: "Copies of finished upstream results into the media store, by outcome (ok, retry, failed)",
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
const upstreamResubmitsBy = taggedOnce((outcome) => Metric.tagged(upstreamResubmits, "outcome", outcome))
const resultCopiesBy = taggedOnce((outcome) => Metric.tagged(resultCopies, "outcome", outcome))

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

/** Counts a submit of an attempt submitted before: sent again (`retried`) or held back (`refused`). */
export const upstreamResubmit = (outcome: "retried" | "refused"): Effect.Effect<void> => Metric.increment(upstreamResubmitsBy(outcome))

/** The counter of `upstreamResubmit` for one outcome, for whoever reads it (tests). */
export const upstreamResubmitsOf = (outcome: "retried" | "refused") => upstreamResubmitsBy(outcome)

/** Counts a copy of a finished job's results by its outcome. */
export const resultCopy = (outcome: "ok" | "retry" | "failed"): Effect.Effect<void> => Metric.increment(resultCopiesBy(outcome))

/** Sets the PENDING gauge. */
export const setPending = (count: number): Effect.Effect<void> => Metric.set(pending, count)

