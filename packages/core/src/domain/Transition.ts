/**
 * The task state machine (DESIGN.md section 2) as a pure, total function.
 *
 * (new) -> PENDING; PENDING -> SUBMITTED | PROCESSING; SUBMITTED -> PROCESSING;
 * any non-terminal -> SUCCESS | FAILURE | TIMEOUT | CANCELLED. Nothing leaves a terminal state.
 */
import { Either } from "effect"
import { close } from "./Attempt.js"
import { IllegalTransition } from "./Errors.js"
import type { UpstreamId } from "./Ids.js"
import type { FailureReason, TaskProgress, TaskResult, TaskStatus, UpstreamJob } from "./Task.js"
import type { UpstreamAttempt } from "./Task.js"
import { isTerminal, TaskRecord } from "./Task.js"

/** A requested change of status with the data that status needs. */
export type TaskChange =
  | { readonly to: "SUBMITTED"; readonly upstreamId: UpstreamId; readonly dueAt: number }
  | { readonly to: "PROCESSING"; readonly upstreamId?: UpstreamId | null; readonly dueAt: number }
  | { readonly to: "SUCCESS"; readonly result: TaskResult }
  | { readonly to: "FAILURE"; readonly reason: FailureReason | null; readonly message: string }
  | { readonly to: "TIMEOUT"; readonly message?: string }
  | { readonly to: "CANCELLED"; readonly message?: string }

const allowed: Readonly<Record<TaskStatus, ReadonlySet<TaskStatus>>> = {
  PENDING: new Set(["SUBMITTED", "PROCESSING", "SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"]),
  SUBMITTED: new Set(["PROCESSING", "SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"]),
  PROCESSING: new Set(["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"]),
  SUCCESS: new Set(),
  FAILURE: new Set(),
  TIMEOUT: new Set(),
  CANCELLED: new Set()
}

/** Whether the state machine allows `from -> to`. */
export const canTransition = (from: TaskStatus, to: TaskStatus): boolean => allowed[from].has(to)

// Records here are built from typed records and changes, so the class's validation is
// skipped (`new TaskRecord(fields, true)`): it would check every field of the job again on
// each write. Records from outside (a request, a database row) are validated where they enter.

/**
 * Applies a change to a record at `now`. Succeeds with the next record (version + 1,
 * lease released) or fails with IllegalTransition; never overwrites silently.
 */
export const apply = (
  record: TaskRecord,
  change: TaskChange,
  now: number
): Either.Either<TaskRecord, IllegalTransition> => {
  if (!canTransition(record.status, change.to)) {
    return Either.left(new IllegalTransition({ taskId: record.id, from: record.status, to: change.to }))
  }
  const base = {
    ...record,
    status: change.to,
    updatedAt: Math.max(now, record.updatedAt),
    version: record.version + 1,
    leaseOwner: null,
    leaseUntil: null
  }
  // A terminal state ends the running upstream attempt with it.
  const ended = (outcome: Exclude<UpstreamAttempt["outcome"], "running">, error: string | null) =>
    close(record.attempts, now, outcome, error)
  switch (change.to) {
    case "SUBMITTED":
      return Either.right(new TaskRecord({ ...base, upstreamId: change.upstreamId, dueAt: change.dueAt }, true))
    case "PROCESSING":
      return Either.right(
        new TaskRecord({ ...base, upstreamId: change.upstreamId ?? record.upstreamId, dueAt: change.dueAt }, true)
      )
    case "SUCCESS":
      return Either.right(
        new TaskRecord({ ...base, result: change.result, failureReason: null, dueAt: null, attempts: ended("succeeded", null) }, true)
      )
    case "FAILURE":
      return Either.right(
        new TaskRecord({
          ...base,
          failureReason: change.reason,
          errorMessage: change.message,
          dueAt: null,
          attempts: ended("failed", change.message)
        }, true)
      )
    case "TIMEOUT":
      return Either.right(
        new TaskRecord({ ...base, errorMessage: change.message ?? null, dueAt: null, attempts: ended("timed_out", change.message ?? null) }, true)
      )
    case "CANCELLED":
      return Either.right(
        new TaskRecord({ ...base, errorMessage: change.message ?? null, dueAt: null, attempts: ended("cancelled", null) }, true)
      )
  }
}

/**
 * Moves a non-terminal task's next look to `dueAt` without changing its status (polling,
 * retry backoff), optionally with a new job or upstream id (a fallback, a resubmission).
 * `updated_at` stays: the status the client sees has not changed.
 */
export const reschedule = (
  record: TaskRecord,
  dueAt: number,
  patch: {
    readonly job?: UpstreamJob
    readonly upstreamId?: UpstreamId | null
    readonly attempts?: ReadonlyArray<UpstreamAttempt>
    readonly provider?: string | null
    readonly progress?: TaskProgress | null
  } = {}
): Either.Either<TaskRecord, IllegalTransition> =>
  isTerminal(record.status)
    ? Either.left(new IllegalTransition({ taskId: record.id, from: record.status, to: record.status }))
    : Either.right(
      new TaskRecord({
        ...record,
        ...patch,
        dueAt,
        version: record.version + 1,
        leaseOwner: null,
        leaseUntil: null
      }, true)
    )
