/**
 * Domain errors. They never carry HTTP shapes; the HTTP layer maps them to the envelope.
 */
import { Effect, Schema } from "effect"
import { FailureReason, TaskResult, TaskStatus } from "./Task.js"

/** A client's string in a message, cut short: an error should not echo a megabyte back. */
export const shortened = (value: string): string => (value.length > 64 ? `${value.slice(0, 64)}…` : value)

/** A submit request broke a rule; `message` names the field and the rule. */
export class ValidationError extends Schema.TaggedError<ValidationError>()("ValidationError", {
  message: Schema.String
}) {}

/** Pre-submission moderation flagged the prompt. */
export class ModerationRejected extends Schema.TaggedError<ModerationRejected>()("ModerationRejected", {
  flagged: Schema.Boolean,
  categories: Schema.Record({ key: Schema.String, value: Schema.Boolean })
}) {}

/**
 * The moderation backend could not give a verdict (down, too slow, refusing our key). With
 * moderation failing closed (the default) the submit is refused with 503 and nothing is
 * created; `message` says what went wrong, for the operator's logs and the client.
 */
export class ModerationUnavailable extends Schema.TaggedError<ModerationUnavailable>()("ModerationUnavailable", {
  message: Schema.String
}) {}

/** No task with this id belongs to the caller. */
export class TaskNotFound extends Schema.TaggedError<TaskNotFound>()("TaskNotFound", {
  taskId: Schema.String
}) {}

/** A transition the state machine does not allow, e.g. anything out of a terminal state. */
export class IllegalTransition extends Schema.TaggedError<IllegalTransition>()("IllegalTransition", {
  taskId: Schema.String,
  from: TaskStatus,
  to: TaskStatus
}) {
  override get message() {
    return `task ${this.taskId}: illegal transition ${this.from} -> ${this.to}`
  }
}

/** Another writer changed the task since it was read (optimistic check failed). */
export class TaskConflict extends Schema.TaggedError<TaskConflict>()("TaskConflict", {
  taskId: Schema.String,
  expectedVersion: Schema.Int
}) {}

const messageOf = (cause: unknown): string =>
  typeof cause === "object" && cause !== null && "message" in cause && typeof cause.message === "string" ? cause.message : String(cause)

/**
 * A store could not do its job: its database is down, refused a statement, or could not be
 * opened. A failure a caller handles (the engine and the deliverer try again later, the HTTP
 * layer answers 503 with Retry-After when the database could not be reached, else 500),
 * never a defect; the cause is logged where it happened.
 */
export class StoreError extends Schema.TaggedError<StoreError>()("StoreError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  /**
   * Pipeable, at a backend's edge: every failure of the effect becomes a StoreError saying
   * that `operation` failed, the failure kept as its cause; a StoreError passes as it is.
   */
  static refail(operation: string): <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, StoreError, R> {
    return (effect) =>
      Effect.mapError(effect, (cause) =>
        cause instanceof StoreError ? cause : new StoreError({ message: `${operation} failed: ${messageOf(cause)}`, cause }))
  }
}

/** An upstream refused or failed a job. */
export class UpstreamError extends Schema.TaggedError<UpstreamError>()("UpstreamError", {
  message: Schema.String,
  reason: Schema.NullOr(FailureReason),
  /**
   * True for a transient failure (connection error, timeout, 5xx, 429): the same call may
   * succeed later, and is retried with backoff. False for a permanent one, which ends the
   * attempt with `reason`.
   */
  retryable: Schema.Boolean,
  /** The upstream's `Retry-After`, in milliseconds: no retry comes sooner. */
  retryAfterMs: Schema.optional(Schema.Number),
  /**
   * The provider target was not tried at all: its circuit is open after repeated transient
   * failures. A transient failure; the attempt moves to the next target at once when the
   * upstream has one (`Upstream.failover`), and is otherwise retried with backoff.
   */
  circuitOpen: Schema.optional(Schema.Boolean),
  /**
   * A job the upstream runs as several paid calls (dall-e-3's `n` images) failed in part:
   * what the calls that succeeded gave (with the context's `partialResult`, if any). The
   * engine keeps it on the running attempt and hands it back with the attempt's next submit.
   */
  partialResult: Schema.optional(TaskResult)
}) {}

/** The media store could not keep or serve bytes. */
export class MediaError extends Schema.TaggedError<MediaError>()("MediaError", {
  message: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {}

/** A file that arrives as a stream (an upload) went past the size allowed; nothing was stored. */
export class MediaTooLarge extends Schema.TaggedError<MediaTooLarge>()("MediaTooLarge", {
  maxBytes: Schema.Number
}) {}

/** The task is already in a terminal state, so it cannot be cancelled. */
export class TaskNotCancellable extends Schema.TaggedError<TaskNotCancellable>()("TaskNotCancellable", {
  taskId: Schema.String,
  status: TaskStatus
}) {}
