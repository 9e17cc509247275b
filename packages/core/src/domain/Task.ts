/**
 * The task: its statuses, failure classes, result, the internal record the store keeps
 * and the wire shape the query endpoint returns (spec section 2).
 */
import { ParseResult, Schema } from "effect"
import { AccountId, TaskId, UpstreamId } from "./Ids.js"

/** Every status a task can be in (spec section 3). */
export const TaskStatus = Schema.Literal(
  "PENDING",
  "PROCESSING",
  "SUBMITTED",
  "SUCCESS",
  "FAILURE",
  "TIMEOUT",
  "CANCELLED"
)
export type TaskStatus = typeof TaskStatus.Type

/** The statuses nothing leaves. */
export const terminalStatuses: ReadonlySet<TaskStatus> = new Set(["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"])

/** True for SUCCESS, FAILURE, TIMEOUT and CANCELLED. */
export const isTerminal = (status: TaskStatus): boolean => terminalStatuses.has(status)

/** Machine-readable failure class of a failed task (spec section 7). */
export const FailureReason = Schema.Literal("CONTENT_MODERATION", "INVALID_PARAMETERS", "INSUFFICIENT_POINTS")
export type FailureReason = typeof FailureReason.Type

/** What a task produced: images or a video, as URLs. */
export const TaskResult = Schema.Struct({
  type: Schema.Literal("image", "video"),
  urls: Schema.Array(Schema.String)
})
export type TaskResult = typeof TaskResult.Type

/** The echoed input: what the client sent inside `input`, plus `model`. */
export const TaskInput = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export type TaskInput = typeof TaskInput.Type

/**
 * A change we made to what the client asked for, silently by the spec's rules (a 6-second
 * clip3 i2v that runs 8 seconds) or by a fallback. Shown to the client in `adjustments`.
 */
export const Adjustment = Schema.Struct({
  field: Schema.String.annotations({ description: "The input field (or `model`) that is changed." }),
  requested: Schema.Unknown.annotations({ description: "The value the client asked for." }),
  applied: Schema.Unknown.annotations({ description: "The value the task runs with (null: the field's standard value)." }),
  reason: Schema.String.annotations({ description: "Why, in words: the model's rule, or the failure a fallback followed." })
}).annotations({ identifier: "Adjustment" })
export type Adjustment = typeof Adjustment.Type

/** An upstream attempt that failed and was followed by another (a fallback): kept in the job's history. */
export const PreviousAttempt = Schema.Struct({
  model: Schema.String,
  /** The upstream's id of that attempt's job; null for a synchronous upstream. */
  upstreamId: Schema.NullOr(Schema.String),
  failureReason: Schema.NullOr(FailureReason),
  error: Schema.String,
  /** Epoch milliseconds. */
  failedAt: Schema.Number
}).annotations({ identifier: "PreviousAttempt" })
export type PreviousAttempt = typeof PreviousAttempt.Type

/**
 * One upstream attempt: a job given to the upstream under one idempotency key, from its
 * first call to its end. Transient failures of calls within it (a timeout, a 503) are
 * retried under the same key and counted here; a fallback or a failed job starts the next.
 */
export const UpstreamAttempt = Schema.Struct({
  /** 1 for the first attempt. The idempotency key is `<taskId>.<number>`. */
  number: Schema.Int,
  /** The model this attempt ran. */
  model: Schema.String,
  /** The upstream's id of the job; null until it accepted one (and for synchronous upstreams). */
  upstreamId: Schema.NullOr(Schema.String),
  /** Epoch milliseconds of the attempt's first call. */
  startedAt: Schema.Number,
  /** Epoch milliseconds of its end; null while it runs. */
  endedAt: Schema.NullOr(Schema.Number),
  outcome: Schema.Literal("running", "succeeded", "failed", "timed_out", "cancelled"),
  /** The last error seen in this attempt (a transient one while it runs), or null. */
  error: Schema.NullOr(Schema.String),
  /** Transient call failures within this attempt so far. */
  transientFailures: Schema.Int,
  /** The provider target that ran it (`fal:fal-ai/flux/dev`), where the upstream names its targets. */
  provider: Schema.optional(Schema.String),
  /**
   * What the upstream's finished job gave (its result references: the files at the
   * upstream), kept once the upstream said the job succeeded, for a model whose results the
   * service hosts (`Upstream.hostsResults`). From then on the engine only copies them into
   * the MediaStore (`Upstream.hostResult`), as a step of its own; this attempt is never
   * submitted again. Absent for other models and in rows written before it existed.
   */
  upstreamResult: Schema.optional(TaskResult),
  /** Failed tries to copy `upstreamResult` so far (the last one's message is `error`). */
  copyFailures: Schema.optional(Schema.Int),
  /**
   * What the paid calls of this attempt that succeeded gave, when a job split into several
   * calls (dall-e-3's `n`) failed in part (`UpstreamError.partialResult`): handed back to the
   * upstream with the attempt's next submit (`SubmitContext.partialResult`), which asks only
   * for the rest. Absent when nothing of the attempt was kept, and in rows written before it existed.
   */
  partialResult: Schema.optional(TaskResult)
}).annotations({ identifier: "UpstreamAttempt" })
export type UpstreamAttempt = typeof UpstreamAttempt.Type

/** The normalised job an upstream runs: the model actually run and every resolved default. */
export const UpstreamJob = Schema.Struct({
  /** The model actually run (clip3 r2v runs as clip3_fast, a fallback as motion-1.5-pro). */
  model: Schema.String,
  mode: Schema.String,
  output: Schema.Literal("image", "video"),
  prompt: Schema.String,
  /** Files the job produces: images for image models, 1 for video. */
  n: Schema.Int,
  ratio: Schema.NullOr(Schema.String),
  resolution: Schema.NullOr(Schema.String),
  width: Schema.NullOr(Schema.Int),
  height: Schema.NullOr(Schema.Int),
  /** Seconds of video; null for images. */
  duration: Schema.NullOr(Schema.Int),
  /** Reference media, in the order given. */
  imageUrls: Schema.Array(Schema.String),
  /** Model-specific parameters the upstream needs (clip3 mode, motion materials, pass-through fields). */
  params: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  /** The model to retry on if this one fails (motion fallback), or null. */
  fallbackModel: Schema.NullOr(Schema.String),
  /**
   * Which of the model's provider targets runs the job (0, the first, when absent): a routing
   * upstream moves it to the next target on failover (`Upstream.failover`).
   */
  target: Schema.optional(Schema.Int),
  /** Whether the upstream answers the submit call with the result itself. */
  sync: Schema.Boolean,
  /** Price of the job in integer micro-USD. */
  priceMicroUsd: Schema.Int,
  adjustments: Schema.Array(Adjustment),
  /**
   * Read from rows written before the task's `attempts` existed; nothing writes it now
   * (`TaskRecord.attempts` holds every attempt).
   */
  previousAttempts: Schema.optional(Schema.Array(PreviousAttempt))
})
export type UpstreamJob = typeof UpstreamJob.Type

/** How far a running task has come: what the progress object's `stage` says. */
export const ProgressStage = Schema.Literal("queued", "running", "finishing")
export type ProgressStage = typeof ProgressStage.Type

/**
 * What is known of a running task's progress, as the store keeps it (additive to the spec;
 * docs/decisions.md "Progress"). Every number is what the upstream said, never invented.
 */
export const TaskProgress = Schema.Struct({
  stage: ProgressStage,
  /** 1-based place in the upstream's queue (1: next), where the upstream says it; null otherwise. */
  queuePosition: Schema.NullOr(Schema.Number),
  /** 0..100, where the upstream says it; null otherwise. */
  percent: Schema.NullOr(Schema.Number),
  /** The last upstream log lines, bounded (`Progress.bounds`). */
  logsTail: Schema.Array(Schema.String),
  /** Epoch milliseconds of the last change. */
  updatedAt: Schema.Number
}).annotations({ identifier: "TaskProgress" })
export type TaskProgress = typeof TaskProgress.Type

/**
 * A callback a submit may ask for besides the terminal one (`callBackEvents`, additive to the
 * spec; docs/decisions.md "Callback events"): `started` when the upstream has taken the job,
 * `progress` when its progress changes (throttled), `completed` at the terminal state.
 */
export const CallbackEvent = Schema.Literal("started", "progress", "completed")
export type CallbackEvent = typeof CallbackEvent.Type

/**
 * The callback events a task asked for, and the progress callback owed last (its id and when
 * it is due), which throttles the next one and tells an older one it was superseded.
 */
export const CallbackEvents = Schema.Struct({
  events: Schema.Array(CallbackEvent),
  lastProgress: Schema.NullOr(Schema.Struct({ id: Schema.String, dueAt: Schema.Number }))
}).annotations({ identifier: "CallbackEvents" })
export type CallbackEvents = typeof CallbackEvents.Type

/** The task as the store keeps it: the public fields plus what the engine needs. Times are epoch milliseconds. */
export class TaskRecord extends Schema.Class<TaskRecord>("TaskRecord")({
  id: TaskId,
  ownerId: AccountId,
  status: TaskStatus,
  input: TaskInput,
  job: UpstreamJob,
  result: Schema.NullOr(TaskResult),
  failureReason: Schema.NullOr(FailureReason),
  /** Human-readable cause of a non-success terminal state; internal, for logs and operators. */
  errorMessage: Schema.NullOr(Schema.String),
  callBackUrl: Schema.NullOr(Schema.String),
  userId: Schema.NullOr(Schema.String),
  upstreamId: Schema.NullOr(UpstreamId),
  createdAt: Schema.Number,
  updatedAt: Schema.Number,
  deadlineAt: Schema.Number,
  /** When the engine should next look at the task; null once terminal. */
  dueAt: Schema.NullOr(Schema.Number),
  leaseOwner: Schema.NullOr(Schema.String),
  leaseUntil: Schema.NullOr(Schema.Number),
  /** Incremented by every write; the optimistic check compares it. */
  version: Schema.Int,
  /** Every upstream attempt, oldest first; the last one may still run. */
  attempts: Schema.optionalWith(Schema.Array(UpstreamAttempt), { default: () => [] }),
  /**
   * The provider that runs the task's job (`Upstream.provider`), whose running limit the task
   * counts against; null where the upstream names none (the simulator): no provider limit.
   */
  provider: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
  /** What the upstream said of the job's progress (additive); null when nothing is known. */
  progress: Schema.optionalWith(Schema.NullOr(TaskProgress), { default: () => null }),
  /**
   * The callback events the submit asked for (`callBackEvents`); null for the spec's one
   * terminal callback with its own body.
   */
  callbackEvents: Schema.optionalWith(Schema.NullOr(CallbackEvents), { default: () => null }),
  /** The key the task was submitted with (`Account.keyId`); null where unknown (tasks from before, keys given as config). */
  keyId: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null })
}) {}

/**
 * The class's own check, compiled once. `new TaskRecord(fields)` validates through
 * `ParseResult.validateSync` of the class's schema, which rebuilds the schema's type side at
 * every call, so the parser cache, keyed by that object, never finds it: each construction
 * compiled the whole parser again (25.8 against 21 µs a record in a loop; issue 37).
 */
const checkRecord = ParseResult.validateSync(Schema.Struct(TaskRecord.fields).annotations({ identifier: "TaskRecord" }))

/**
 * A record from fields that did not come through a schema (a submit's), checked as
 * `new TaskRecord(fields)` checks them, with the parser compiled once; throws the same
 * `ParseError` on a field that does not fit.
 */
export const checkedRecord = (fields: ConstructorParameters<typeof TaskRecord>[0]): TaskRecord => {
  const record = new TaskRecord(fields, true)
  checkRecord(record)
  return record
}

/** An upstream attempt as the query endpoint shows it. */
export const WireAttempt = Schema.Struct({
  attempt: Schema.Int,
  model: Schema.String,
  /** The provider target that ran it (`fal:fal-ai/flux/dev`); null where the upstream does not name targets. */
  provider: Schema.NullOr(Schema.String),
  upstream_id: Schema.NullOr(Schema.String),
  started_at: Schema.String,
  ended_at: Schema.NullOr(Schema.String),
  outcome: Schema.Literal("running", "succeeded", "failed", "timed_out", "cancelled"),
  error: Schema.NullOr(Schema.String)
}).annotations({ identifier: "Attempt" })

/** A task's progress as the query endpoint and the events stream show it. */
export const WireProgress = Schema.Struct({
  stage: ProgressStage,
  /** 1-based (1: next in the upstream's queue); null where the upstream does not say. */
  queue_position: Schema.NullOr(Schema.Number),
  /** 0..100; null where the upstream does not say. */
  percent: Schema.NullOr(Schema.Number),
  /** The last upstream log lines: at most 20, each at most 500 characters, 4 KB in all. */
  logs_tail: Schema.Array(Schema.String),
  updated_at: Schema.String
}).annotations({ identifier: "Progress" })
export type WireProgress = typeof WireProgress.Type

/** The wire shape of a task's progress. */
export const toWireProgress = (progress: TaskProgress): WireProgress => ({
  stage: progress.stage,
  queue_position: progress.queuePosition,
  percent: progress.percent,
  logs_tail: progress.logsTail,
  updated_at: isoTime(progress.updatedAt)
})

/** The task as the query endpoint returns it (spec section 2). */
export const Task = Schema.Struct({
  taskId: Schema.String,
  status: TaskStatus,
  input: TaskInput,
  result: Schema.NullOr(TaskResult),
  failure_reason: Schema.NullOr(FailureReason),
  created_at: Schema.String,
  updated_at: Schema.String,
  /** Additive: what we changed of the request, and why (see docs/decisions.md). */
  adjustments: Schema.Array(Adjustment),
  /** Additive: the human-readable cause of a FAILURE, TIMEOUT or CANCELLED (the upstream's message); null otherwise. */
  error: Schema.NullOr(Schema.String),
  /** Additive: every upstream attempt, oldest first (a fallback is one more). */
  attempts: Schema.Array(WireAttempt),
  /**
   * Additive: the task's price in integer micro-USD (1 USD = 1,000,000), held from acceptance
   * and charged only on SUCCESS; any other end gives it back.
   */
  price_micro_usd: Schema.Int,
  /**
   * Additive: how far the upstream says the job has come, while it runs (the last one known
   * is kept at the end); null when nothing is known. Optional on decoding, for older servers.
   */
  progress: Schema.optionalWith(Schema.NullOr(WireProgress), { default: () => null })
}).annotations({ identifier: "Task" })
export type Task = typeof Task.Type

/** ISO 8601 UTC with milliseconds. */
export const isoTime = (epochMillis: number): string => new Date(epochMillis).toISOString()

/** The wire shape of a stored task. */
export const toWire = (record: TaskRecord): Task => ({
  taskId: record.id,
  status: record.status,
  input: record.input,
  result: record.status === "SUCCESS" ? record.result : null,
  failure_reason: record.failureReason,
  created_at: isoTime(record.createdAt),
  updated_at: isoTime(record.updatedAt),
  adjustments: record.job.adjustments,
  error: record.status === "FAILURE" || record.status === "TIMEOUT" || record.status === "CANCELLED" ? record.errorMessage : null,
  attempts: record.attempts.map((attempt) => ({
    attempt: attempt.number,
    model: attempt.model,
    provider: attempt.provider ?? null,
    upstream_id: attempt.upstreamId,
    started_at: isoTime(attempt.startedAt),
    ended_at: attempt.endedAt === null ? null : isoTime(attempt.endedAt),
    outcome: attempt.outcome,
    error: attempt.error
  })),
  price_micro_usd: record.job.priceMicroUsd,
  progress: record.progress === null ? null : toWireProgress(record.progress)
})
