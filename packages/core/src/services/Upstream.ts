/**
 * The provider that actually runs a job. The simulator is the embedded default.
 */
import type { Effect } from "effect"
import { Context, Schema } from "effect"
import type { UpstreamError } from "../domain/Errors.js"
import type { TaskId, UpstreamId } from "../domain/Ids.js"
import type { TaskInput, TaskResult, UpstreamJob } from "../domain/Task.js"

/** What submitting a job gave: the result (sync upstreams) or the upstream's id for polling. */
export type SubmitOutcome =
  | { readonly _tag: "Completed"; readonly result: TaskResult }
  | {
    readonly _tag: "Accepted"
    readonly upstreamId: UpstreamId
    /**
     * When the upstream expects the job to be done, epoch milliseconds by the service's
     * `Clock` (an adapter whose provider answers an ETA adds it to the Clock's time). A hint:
     * the engine polls the job first no later than then (at once when it has passed), never
     * later than it would without it, and reads the outcome from that poll as from any other
     * (`Lifecycle.nextPollAt`). Optional: absent, the polls keep their usual rhythm.
     */
    readonly readyAt?: number
  }

/**
 * What an upstream says of a job still running (every field optional; absent = not known).
 * Folded into the task's `progress` (`Progress.fromUpstream`), bounded and throttled there.
 */
export interface UpstreamProgress {
  /**
   * Place in the upstream's queue, 1-based (1: next to run), as the task's `queue_position`
   * exposes it: an adapter of a provider that counts from 0 adds 1.
   */
  readonly queuePosition?: number
  /** 0..100, as the upstream says it; never invented. */
  readonly percent?: number
  /** The provider's log lines so far or new ones (either: the engine keeps the last few). */
  readonly logs?: ReadonlyArray<string>
}

/** What polling a job gave; a job still running may say how far it has come. */
export type PollOutcome =
  | { readonly _tag: "Running"; readonly progress?: UpstreamProgress }
  | { readonly _tag: "Completed"; readonly result: TaskResult }

/**
 * Copying a finished job's result files into the MediaStore failed. `retryable` for what may
 * pass (the file did not download, the store was down): the engine tries the copy again
 * with backoff until the task's deadline, never the job. Otherwise (not a file we serve, an
 * address we may not fetch) the task fails at once.
 */
export class ResultCopyError extends Schema.TaggedError<ResultCopyError>()("ResultCopyError", {
  message: Schema.String,
  retryable: Schema.Boolean
}) {}

/** What the engine tells the upstream with a submit. */
export interface SubmitContext {
  readonly taskId: TaskId
  /**
   * `<taskId>.<attempt number>`: the same for every call of one attempt (a retry after a
   * timeout or a crash), new for the next attempt. An upstream that deduplicates on it never
   * runs one attempt twice; adapters send it as the provider's idempotency key.
   */
  readonly idempotencyKey: string
  /** The client's input as submitted, with `model`: what a relay to another gateway passes on. */
  readonly request: TaskInput
  /**
   * What the calls of this attempt that succeeded already gave: an earlier submit of the
   * attempt failed with `UpstreamError.partialResult`. The upstream asks only for the rest
   * and answers the whole, these files first. Absent for an attempt with nothing kept.
   */
  readonly partialResult?: TaskResult
}

/** A provider's webhook as it arrived at `/webhooks/{provider}/{token}`: raw, for its signature. */
export interface InboundWebhook {
  /** The provider named in the path. */
  readonly provider: string
  /** The path's token: the task the webhook is about. */
  readonly token: string
  /** Header names in lower case. */
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly body: Uint8Array
}

/**
 * An upstream provider. Failures are `UpstreamError`s, classified: `retryable` for transient
 * ones (connection error, timeout, 5xx, 429, with `retryAfterMs` from `Retry-After`), which
 * the engine retries with backoff; permanent ones carry the task's `failure_reason`.
 *
 * A job that succeeded upstream is never paid for twice. An upstream whose submit makes
 * several paid calls for one job (the OpenAI images adapter splits an `n` above what one
 * call draws) and sees some of them fail keeps what the others gave: it fails with the
 * error and `partialResult`, the files drawn so far. The engine records them on the running
 * attempt (`UpstreamAttempt.partialResult`, in the store, so that they outlive a restart)
 * before it decides on the failure, and the attempt's next submit carries them
 * (`SubmitContext.partialResult`): the upstream asks only for the missing files. They belong
 * to the attempt: a fallback or failover starts a new attempt, which asks for the whole job.
 */
export class Upstream extends Context.Tag("@mediagate/core/Upstream")<Upstream, {
  readonly submit: (job: UpstreamJob, context: SubmitContext) => Effect.Effect<SubmitOutcome, UpstreamError>
  readonly poll: (upstreamId: UpstreamId, job: UpstreamJob) => Effect.Effect<PollOutcome, UpstreamError>
  /**
   * Asks the upstream to stop a job (a cancelled or timed-out task), best effort: the engine
   * logs a failure and goes on. Optional: an upstream that cannot cancel leaves it out.
   */
  readonly cancel?: (upstreamId: UpstreamId, job: UpstreamJob) => Effect.Effect<void, UpstreamError>
  /**
   * The same job on the next provider target, if the upstream routes the model to more than
   * one; undefined when there is none. The engine asks after an attempt's transient failures
   * ran out (or its target's circuit is open) and runs the answer as the next attempt.
   * Permanent failures never fail over. Optional: a single upstream leaves it out.
   */
  readonly failover?: (job: UpstreamJob) => UpstreamJob | undefined
  /**
   * The name of the provider that runs `job` (`fal`), under which the engine counts running
   * tasks against that provider's limit (`Engine.Options.maxRunningPerProvider`); null for
   * a job no provider limit applies to. Optional: without it (the simulator) none applies.
   * For a job on a target with a limit of its own (`targetLimits`), the target's name
   * (`fal:fal-ai/flux/dev`): the job counts against the target's limit and its provider's.
   */
  readonly provider?: (job: UpstreamJob) => string | null
  /**
   * The running limits of provider targets that set their own (a route target's
   * `maxRunning`), by the name `provider` answers for their jobs (`fal:fal-ai/flux/dev`),
   * each with the provider whose limit those jobs count against as well (`fal`). The engine
   * adds them to `maxRunningPerProvider`; the store's claim holds both across nodes. Optional.
   */
  readonly targetLimits?: Readonly<Record<string, { readonly maxRunning: number; readonly provider: string }>>
  /** The name of the provider target that runs `job` (`fal:fal-ai/flux/dev`), recorded with each attempt. Optional. */
  readonly describe?: (job: UpstreamJob) => string
  /**
   * Whether a provider webhook is genuine: its signature checks out with that provider's
   * keys, and it is fresh. A genuine webhook only wakes its task (the engine polls it at
   * once); what the task became is always read from the provider. Optional.
   */
  readonly verifyWebhook?: (webhook: InboundWebhook) => Effect.Effect<boolean>
  /**
   * Whether the provider running `job` sends a webhook when it ends: the engine then polls
   * it only as a safety net, rarely. Optional.
   */
  readonly notifies?: (job: UpstreamJob) => boolean
  /**
   * Whether the service hosts `result` of `job` itself: copies its files into the MediaStore
   * before the task succeeds (false when they are there already). When true, a job the
   * upstream reports done is not done for the task: the engine records the upstream's result
   * on the running attempt and then runs `hostResult` as a step of its own, with its own
   * retries, never submitting the job again. Optional: without it (or without `hostResult`)
   * results are returned as given.
   */
  readonly hostsResults?: (job: UpstreamJob, result: TaskResult) => boolean
  /**
   * Copies `result`'s files into the MediaStore and answers the result with our URLs.
   * Provided with `hostsResults` by the wrapper that owns the MediaStore (`MediaUpstream`).
   */
  readonly hostResult?: (job: UpstreamJob, result: TaskResult) => Effect.Effect<TaskResult, ResultCopyError>
  /**
   * The provider targets the upstream runs jobs on, each with this node's circuit state, for
   * the operator's providers page. Optional: an upstream that names no targets (the simulator
   * alone) leaves it out, and is shown as one target.
   */
  readonly targets?: Effect.Effect<ReadonlyArray<TargetStatus>>
}>() {}

/** A provider target as the providers page shows it. */
export interface TargetStatus {
  /** The name its attempts carry (`attempts[].provider`): `fal:fal-ai/flux/dev`, or `simulator` for unrouted models. */
  readonly name: string
  /** The provider (`fal`); null for the upstream of unrouted models. */
  readonly provider: string | null
  /** Its own running limit (a route target's `maxRunning`); null: only its provider's. */
  readonly maxRunning: number | null
  /**
   * This node's circuit for it (circuits are per node): closed, open until `until`, or
   * half-open (its cool-down is over: the next call is a trial, or one runs).
   */
  readonly circuit: { readonly state: "closed" | "open" | "half-open"; readonly until: number | null }
}
