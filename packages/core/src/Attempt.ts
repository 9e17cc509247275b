/**
 * What the engine does after an upstream call failed, as a pure function beside the state
 * machine: try the same job again later, fall back to another model's job, or fail the
 * task with the failure's class.
 */
import type { UpstreamError } from "./Errors.js"
import type { TaskRecord, UpstreamJob } from "./Task.js"

/** The engine's next move after a failed upstream call. */
export type Decision =
  | { readonly _tag: "Retry"; readonly at: number }
  | { readonly _tag: "FallBack"; readonly job: UpstreamJob }
  | { readonly _tag: "Fail"; readonly error: UpstreamError }

/**
 * Failures that another model cannot cure: the same prompt is refused again
 * (CONTENT_MODERATION) and the same account has no more credits (INSUFFICIENT_POINTS).
 * INVALID_PARAMETERS and unclassified failures may fall back.
 */
const final = new Set(["CONTENT_MODERATION", "INSUFFICIENT_POINTS"])

/**
 * Decides after `error` at `now`: a retryable error is tried again after `retryDelay`; a
 * final class fails the task; otherwise the model's fallback (if it gives a job) replaces
 * the job, keeping the failed attempt (model, upstream id, error) in the job's history.
 */
export const decide = (input: {
  readonly record: TaskRecord
  readonly error: UpstreamError
  readonly now: number
  readonly retryDelay: number
  readonly fallback: (job: UpstreamJob, failure: string) => UpstreamJob | undefined
}): Decision => {
  const { error, now, record } = input
  if (error.retryable) return { _tag: "Retry", at: now + input.retryDelay }
  if (error.reason !== null && final.has(error.reason)) return { _tag: "Fail", error }
  const next = input.fallback(record.job, error.message)
  if (next === undefined) return { _tag: "Fail", error }
  const failed = {
    model: record.job.model,
    upstreamId: record.upstreamId,
    failureReason: error.reason,
    error: error.message,
    failedAt: now
  }
  return { _tag: "FallBack", job: { ...next, previousAttempts: [...(record.job.previousAttempts ?? []), failed] } }
}
