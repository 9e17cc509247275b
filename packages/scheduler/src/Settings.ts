/**
 * The engine's settings (`Engine.Options`) and their defaults, read by the loop (`Engine`) and
 * by the step (`Step`) alike.
 */
import { Attempt } from "@mediagate/core"
import { Duration } from "effect"

/** Engine settings. */
export interface Options {
  /** How often the engine looks for due work when nothing wakes it: the safety net. Default 1 s. */
  readonly pollInterval?: Duration.DurationInput
  /** Steps (submits and polls of asynchronous upstreams) worked on at once by this engine. Default 16. */
  readonly concurrency?: number
  /**
   * Tasks running at the upstream at once, counted over every node on the store: from the
   * claim out of PENDING to the end. Work beyond it waits PENDING, in its place. Default 500.
   */
  readonly maxRunning?: number
  /** Of those, at most this many of one account's tasks. Default 100. */
  readonly maxRunningPerAccount?: number
  /**
   * Of those, at most this many on one provider (`Upstream.provider`: `fal`, `replicate`...),
   * by provider name; `"*"` sets it for every provider not named. Default `{ "*": 100 }`.
   * Tasks whose upstream names no provider (the simulator) have no provider limit. A route
   * target with a limit of its own (`Upstream.targetLimits`) is held to it and to its
   * provider's here.
   */
  readonly maxRunningPerProvider?: Readonly<Record<string, number>>
  /** How long a claim holds before another worker may take the task. Default 15 s: a step is short. */
  readonly leaseDuration?: Duration.DurationInput
  /** How transient upstream failures are retried (see `Attempt.defaultRetryPolicy`). */
  readonly retry?: Partial<Attempt.RetryPolicy>
  /**
   * The longest wait between two polls of an accepted async job. Polls start soon after the
   * upstream accepted the job (`firstPollDelay`) and back off to half the time the task has
   * run so far, up to this cap. Default: a 36th of the model's deadline, between 1 s and
   * 10 min (about 17 s for a 10-minute image model, 10 min for motion's 6 hours).
   */
  readonly upstreamPollInterval?: Duration.DurationInput
  /**
   * The first poll's delay after the upstream accepted a job. Default 20 ms: an instant
   * upstream is done by then, and a slow one costs two or three polls more in all. An
   * upstream that says when the job will be done (`SubmitOutcome`'s `readyAt`) is polled
   * then if that is sooner.
   */
  readonly firstPollDelay?: Duration.DurationInput
  /**
   * Longest wait for an asynchronous upstream's submit or poll call; shorter than the
   * lease, so a hanging call ends (as a transient failure) before anyone else may take the
   * task. Default 10 s.
   */
  readonly upstreamCallTimeout?: Duration.DurationInput
  /**
   * Longest wait for one call to a synchronous upstream, which answers with the result
   * itself (alpha-image-2 takes up to a minute). The heartbeat keeps the task while it runs.
   * Default 2 min.
   */
  readonly syncCallTimeout?: Duration.DurationInput
  /**
   * Longest wait for one copy of a finished job's result files into the MediaStore (for a
   * model whose results the service hosts); a copy that runs out is tried again like a
   * failed one. The heartbeat keeps the task while it runs. Default 2 min.
   */
  readonly resultCopyTimeout?: Duration.DurationInput
  /**
   * While an upstream call runs, the worker keeps the task's lease this far ahead, renewing
   * it every third of the window; if the worker dies, another takes the task up once the
   * window has passed. Default 15 s.
   */
  readonly heartbeatWindow?: Duration.DurationInput
  /**
   * When the engine stops, how long the steps and calls in flight may take to finish before
   * they are interrupted and their tasks given back to the store for other workers. Default
   * 0: interrupted at once (a repeated submit carries the same idempotency key). The
   * standalone server waits 10 s (`MEDIAGATE_SHUTDOWN_GRACE`).
   */
  readonly shutdownGrace?: Duration.DurationInput
  /**
   * Whether a stopping engine gives its leases back at once (default true). Tests that
   * emulate a crashed process set false: its tasks then wait for their leases to run out.
   */
  readonly releaseOnStop?: boolean
  /**
   * Whether each step runs in a span (`Engine.step`, with the attributes `mediagate.task_id`,
   * `mediagate.model` (what the client asked for) and `mediagate.status` (before the step)), for a
   * tracer the host installs. Default false: without a tracer that reads them, spans are a
   * fifth of an in-memory step's cost (bench:costs).
   */
  readonly stepSpans?: boolean
}

/** The options with their defaults filled in; durations in milliseconds unless a Duration. */
export const resolve = (options: Options) => ({
  pollInterval: Duration.decode(options.pollInterval ?? "1 second"),
  concurrency: options.concurrency ?? 16,
  maxRunning: options.maxRunning ?? 500,
  maxRunningPerAccount: options.maxRunningPerAccount ?? 100,
  maxRunningPerProvider: { "*": 100, ...options.maxRunningPerProvider } as Readonly<Record<string, number>>,
  leaseDuration: Duration.toMillis(options.leaseDuration ?? "15 seconds"),
  retry: { ...Attempt.defaultRetryPolicy, ...options.retry },
  upstreamPollInterval: options.upstreamPollInterval === undefined ? undefined : Duration.toMillis(options.upstreamPollInterval),
  firstPollDelay: Duration.toMillis(options.firstPollDelay ?? "20 millis"),
  upstreamCallTimeout: Duration.toMillis(options.upstreamCallTimeout ?? "10 seconds"),
  syncCallTimeout: Duration.toMillis(options.syncCallTimeout ?? "2 minutes"),
  resultCopyTimeout: Duration.toMillis(options.resultCopyTimeout ?? "2 minutes"),
  heartbeatWindow: Duration.toMillis(options.heartbeatWindow ?? "15 seconds"),
  shutdownGrace: Duration.decode(options.shutdownGrace ?? 0),
  releaseOnStop: options.releaseOnStop ?? true,
  stepSpans: options.stepSpans ?? false
})

/** Resolved engine settings. */
export type Settings = ReturnType<typeof resolve>
