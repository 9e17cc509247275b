/**
 * Upstream attempts, as pure functions beside the state machine: which attempt a call
 * belongs to (and so its idempotency key), how an attempt is recorded, and what the engine
 * does after a call failed: try again later with backoff, fall back to another model's job,
 * or fail the task with the failure's class.
 */
import { UpstreamError } from "./Errors.js"
import type { TaskRecord, TaskResult, UpstreamAttempt, UpstreamJob } from "./Task.js"

/** How transient failures are retried within one attempt. */
export interface RetryPolicy {
  /** Delay before the first retry, in milliseconds; it doubles with each further failure. */
  readonly baseDelay: number
  /** The longest delay between two tries, in milliseconds. */
  readonly maxDelay: number
  /** Transient failures one attempt survives; the next one ends the attempt as failed. */
  readonly maxTransientFailures: number
}

/** 1 s, doubling to at most 1 min, 6 transient failures per attempt (about 1 min of trying in all). */
export const defaultRetryPolicy: RetryPolicy = { baseDelay: 1_000, maxDelay: 60_000, maxTransientFailures: 6 }

/** The attempt still running, if any: the last one, unless it ended. */
export const open = (record: TaskRecord): UpstreamAttempt | undefined => {
  const last = record.attempts[record.attempts.length - 1]
  return last !== undefined && last.outcome === "running" ? last : undefined
}

/**
 * The running attempt if its job was given to the upstream already: accepted (it has an
 * upstream id) or finished (it holds the upstream's result references). Submitting it again
 * would run a second, billable job; the engine checks this before every submit.
 */
export const submitted = (record: TaskRecord): UpstreamAttempt | undefined => {
  const running = open(record)
  return running !== undefined && (running.upstreamId !== null || running.upstreamResult !== undefined) ? running : undefined
}

/** The running attempt if its job succeeded at the upstream and its results wait to be copied. */
export const awaitingCopy = (record: TaskRecord): (UpstreamAttempt & { readonly upstreamResult: TaskResult }) | undefined => {
  const running = open(record)
  return running !== undefined && running.upstreamResult !== undefined
    ? running as UpstreamAttempt & { readonly upstreamResult: TaskResult }
    : undefined
}

/** The number of the attempt the next upstream call belongs to: the running one, or the next. */
export const currentNumber = (record: TaskRecord): number => {
  const last = record.attempts[record.attempts.length - 1]
  return last === undefined ? 1 : last.outcome === "running" ? last.number : last.number + 1
}

/**
 * `<taskId>.<attempt>`: the same for every call of one attempt, so a submit retried after a
 * timeout or a crash (which wrote nothing) carries the key of the call it repeats.
 */
export const idempotencyKey = (record: TaskRecord): string => `${record.id}.${currentNumber(record)}`

/** The attempts with the running one (started at `startedAt` if none runs) changed by `patch`. */
export const touch = (
  record: TaskRecord,
  startedAt: number,
  patch: Partial<Pick<UpstreamAttempt, "upstreamId" | "error" | "transientFailures" | "upstreamResult" | "copyFailures" | "partialResult">> = {},
  /** The provider target of a new attempt (`Upstream.describe`). */
  provider?: string
): ReadonlyArray<UpstreamAttempt> => {
  const running = open(record)
  const base: UpstreamAttempt = running ?? {
    number: currentNumber(record),
    model: record.job.model,
    upstreamId: null,
    startedAt,
    endedAt: null,
    outcome: "running",
    error: null,
    transientFailures: 0,
    ...(provider === undefined ? {} : { provider })
  }
  const next = { ...base, ...patch }
  return running === undefined ? [...record.attempts, next] : [...record.attempts.slice(0, -1), next]
}

/** The attempts with the running one, if any, ended at `now` with `outcome`. */
export const close = (
  attempts: ReadonlyArray<UpstreamAttempt>,
  now: number,
  outcome: Exclude<UpstreamAttempt["outcome"], "running">,
  error: string | null
): ReadonlyArray<UpstreamAttempt> => {
  const last = attempts[attempts.length - 1]
  if (last === undefined || last.outcome !== "running") return attempts
  return [...attempts.slice(0, -1), { ...last, endedAt: now, outcome, error: error ?? last.error }]
}

/** The engine's next move after a failed upstream call, with the attempts as they now stand. */
export type Decision =
  | { readonly _tag: "Retry"; readonly at: number; readonly attempts: ReadonlyArray<UpstreamAttempt> }
  /** The next attempt runs `job`: the model's fallback, or the same model on the next provider target. */
  | { readonly _tag: "FallBack"; readonly job: UpstreamJob; readonly attempts: ReadonlyArray<UpstreamAttempt> }
  | { readonly _tag: "Fail"; readonly error: UpstreamError; readonly attempts: ReadonlyArray<UpstreamAttempt> }

/**
 * Failures that another model cannot cure: the same prompt is refused again
 * (CONTENT_MODERATION) and the same account has no more credits (INSUFFICIENT_POINTS).
 * INVALID_PARAMETERS and unclassified failures may fall back.
 */
const final = new Set(["CONTENT_MODERATION", "INSUFFICIENT_POINTS"])

/**
 * The delay before retry `failures` (1 for the first): `baseDelay` doubled per earlier
 * failure, capped at `maxDelay`, spread ±20% by `jitter` (0 to 1), never sooner than the
 * upstream's `Retry-After`.
 */
export const backoff = (policy: RetryPolicy, failures: number, jitter: number, retryAfterMs?: number): number => {
  const exponential = Math.min(policy.maxDelay, policy.baseDelay * 2 ** Math.min(30, failures - 1))
  return Math.max(Math.round(exponential * (0.8 + 0.4 * jitter)), retryAfterMs ?? 0)
}

/**
 * Decides after `error` at `now` for a call that started at `startedAt`. A transient error is
 * tried again after the backoff while the attempt has failures to spare and its target is
 * up; once they run out (or at once when the target's circuit is open), the same job moves
 * to the next provider target if `failover` gives one. Otherwise the attempt ends: a final
 * class fails the task, and any other failure moves to the model's fallback if it gives a
 * job (the next attempt), or fails the task. Permanent errors never fail over.
 */
export const decide = (input: {
  readonly record: TaskRecord
  readonly error: UpstreamError
  readonly now: number
  readonly startedAt: number
  readonly policy: RetryPolicy
  /** A random number in [0, 1) that spreads the retry. */
  readonly jitter: number
  readonly fallback: (job: UpstreamJob, failure: string) => UpstreamJob | undefined
  /** The job on the next provider target, if any (`Upstream.failover`). */
  readonly failover?: (job: UpstreamJob) => UpstreamJob | undefined
  /** The provider target of a new attempt (`Upstream.describe`). */
  readonly provider?: string
}): Decision => {
  const { now, record } = input
  let error = input.error
  if (error.retryable) {
    const failures = (open(record)?.transientFailures ?? 0) + 1
    const attempts = touch(record, input.startedAt, { transientFailures: failures, error: error.message }, input.provider)
    const spent = failures > input.policy.maxTransientFailures
    const next = spent || error.circuitOpen === true ? input.failover?.(record.job) : undefined
    if (next !== undefined) {
      return { _tag: "FallBack", job: next, attempts: close(attempts, now, "failed", error.message) }
    }
    if (!spent) {
      return { _tag: "Retry", at: now + backoff(input.policy, failures, input.jitter, error.retryAfterMs), attempts }
    }
    error = new UpstreamError({
      message: `the upstream failed ${failures} times in a row; the last failure: ${error.message}`,
      reason: error.reason,
      retryable: false
    })
    return decidePermanent(record, attempts, error, now, input.fallback)
  }
  return decidePermanent(record, touch(record, input.startedAt, {}, input.provider), error, now, input.fallback)
}

/** Ends the running attempt with a permanent `error`: fail the task, or move to the fallback. */
const decidePermanent = (
  record: TaskRecord,
  attempts: ReadonlyArray<UpstreamAttempt>,
  error: UpstreamError,
  now: number,
  fallback: (job: UpstreamJob, failure: string) => UpstreamJob | undefined
): Decision => {
  const ended = close(attempts, now, "failed", error.message)
  if (error.reason !== null && final.has(error.reason)) return { _tag: "Fail", error, attempts: ended }
  const next = fallback(record.job, error.message)
  if (next === undefined) return { _tag: "Fail", error, attempts: ended }
  // Another model starts again at its first provider target.
  const { target: _, ...job } = next
  return { _tag: "FallBack", job, attempts: ended }
}
