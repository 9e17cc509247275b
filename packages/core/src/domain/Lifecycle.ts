/**
 * What happens to a task on an event, as a pure, total function beside the state machine
 * (`Transition`): `decide(record, event, now)` answers the write to make, what the step does
 * once it went through (submit, poll, copy, ask the upstream to stop the job, read the task
 * again), and what the write owes (the terminal or `started` callback, the settlement, the
 * next due time). The engine's step and the API carry the answer out and decide nothing
 * themselves; `TaskWrites` writes the callbacks and settles as the state machine's write says.
 * A terminal task's answer is always to do nothing.
 */
import * as Attempt from "./Attempt.js"
import { UpstreamError } from "./Errors.js"
import type { UpstreamId } from "./Ids.js"
import * as Progress from "./Progress.js"
import type { TaskProgress, TaskResult, UpstreamAttempt, UpstreamJob } from "./Task.js"
import { isTerminal, TaskRecord } from "./Task.js"
import type { TaskChange } from "./Transition.js"

/** How a failed call is tried again (`Attempt.decide`), with the random number that spreads the retry. */
export interface Retry {
  readonly policy: Attempt.RetryPolicy
  readonly jitter: number
  readonly fallback: (job: UpstreamJob, failure: string) => UpstreamJob | undefined
  readonly failover?: (job: UpstreamJob) => UpstreamJob | undefined
  /** The provider a job counts against (`Upstream.provider`), for the next attempt's job. */
  readonly route?: (job: UpstreamJob) => string | null
}

/**
 * The events of a task. `provider` names the upstream's target of a new attempt
 * (`Upstream.describe`); `startedAt` is when the call that answered started.
 */
export type Event =
  /** A new task, built PENDING; `rejection` when a rule of its model fails it at once. */
  | { readonly _tag: "Submitted"; readonly rejection?: string }
  /** A new task whose owner cannot pay its price (`message` says why). */
  | { readonly _tag: "CreditsRefused"; readonly message: string }
  /** The engine claimed the task: its next step. */
  | {
    readonly _tag: "Claimed"
    /** Whether the upstream copies hosted results (`Upstream.hostResult`). */
    readonly hostsCopies: boolean
    /** The lease a synchronous call keeps while it runs. */
    readonly lease: { readonly owner: string; readonly until: number }
    readonly provider?: string
  }
  | { readonly _tag: "Accepted"; readonly upstreamId: UpstreamId; readonly startedAt: number; readonly pollAt: number; readonly provider?: string }
  | {
    readonly _tag: "Progressed"
    readonly progress: Parameters<typeof Progress.fromUpstream>[1]
    readonly startedAt: number
    readonly pollAt: number
    readonly provider?: string
  }
  /** The job succeeded; `hosted` when its results are to be copied into the MediaStore first. */
  | { readonly _tag: "Succeeded"; readonly result: TaskResult; readonly startedAt: number; readonly hosted: boolean; readonly provider?: string }
  | { readonly _tag: "Failed"; readonly error: UpstreamError; readonly startedAt: number; readonly retry: Retry; readonly provider?: string }
  /** A call that did not answer within `limit` ms. */
  | { readonly _tag: "RanOut"; readonly limit: number; readonly startedAt: number; readonly retry: Retry; readonly provider?: string }
  /** A genuine provider webhook for the task's job. */
  | { readonly _tag: "Webhook" }
  | { readonly _tag: "ResultCopied"; readonly result: TaskResult; readonly startedAt: number }
  | {
    readonly _tag: "CopyFailed"
    readonly error: { readonly message: string; readonly retryable: boolean }
    readonly startedAt: number
    readonly policy: Attempt.RetryPolicy
    readonly jitter: number
  }
  | { readonly _tag: "CancelRequested" }
  | { readonly _tag: "DeadlinePassed" }
  /** The task changed under the worker during a call (a client cancelled it). */
  | { readonly _tag: "LeaseLost" }

/**
 * The write an answer makes: the new task stored (as built, its price held with it; or ended
 * at once by `change`, nothing held), a change through the state machine, a new due time in
 * the same status, or none.
 */
export type Write =
  | { readonly _tag: "Create"; readonly change: TaskChange | null }
  | {
    readonly _tag: "Apply"
    readonly change: TaskChange
    readonly options: {
      readonly attempts?: ReadonlyArray<UpstreamAttempt>
      readonly progress?: TaskProgress | null
      readonly lease?: { readonly owner: string; readonly until: number }
    }
  }
  | {
    readonly _tag: "Reschedule"
    readonly dueAt: number
    readonly patch: {
      readonly job?: UpstreamJob
      readonly upstreamId?: UpstreamId | null
      readonly attempts?: ReadonlyArray<UpstreamAttempt>
      readonly provider?: string | null
      readonly progress?: TaskProgress | null
      readonly lease?: { readonly owner: string; readonly until: number }
    }
  }
  | { readonly _tag: "None" }

/** What follows the write, once it went through (or when there is none). */
export type Then =
  | { readonly _tag: "Done" }
  | { readonly _tag: "Submit" }
  | { readonly _tag: "Poll"; readonly upstreamId: UpstreamId }
  | { readonly _tag: "Copy"; readonly attempt: UpstreamAttempt & { readonly upstreamResult: TaskResult } }
  /** Ask the upstream to stop the task's job, best effort. */
  | { readonly _tag: "CancelUpstream" }
  /** Read the task as it now stands. */
  | { readonly _tag: "Reread" }
  /** A held task (a step in flight): wait for its step's write, then decide again. */
  | { readonly _tag: "AwaitStep" }
  /** Wake the engine: the task is due now. */
  | { readonly _tag: "Wake" }
  /** The cancel is refused: the task has ended. */
  | { readonly _tag: "NotCancellable" }

/** The answer to an event. */
export interface Answer {
  readonly write: Write
  readonly then: Then
  /** The callback the write owes: the terminal one, or `started` when it leaves PENDING for the upstream. */
  readonly callback: "terminal" | "started" | null
  /** Whether the write ends a running task, so its credits are settled (a new task ended at once held nothing). */
  readonly settles: boolean
  /** The task's next due time once the write went through. */
  readonly dueAt: number | null
  /** Counted by the doer before the write. */
  readonly count?: { readonly resubmit?: "retried" | "refused"; readonly copy?: "ok" | "retry" | "failed" }
  /** A bug found by the rules, logged as an error before the write. */
  readonly alarm?: string
  /** The failed upstream call the answer is to, logged as a warning before the write. */
  readonly failure?: UpstreamError
}

const answer = (record: TaskRecord, write: Write, then: Then = { _tag: "Done" }, extra: Pick<Answer, "count" | "alarm" | "failure"> = {}): Answer => {
  const change = write._tag === "Apply" || write._tag === "Create" ? write.change : null
  const to = change === null ? record.status : change.to
  const ends = isTerminal(to) && !isTerminal(record.status)
  const asked = record.callbackEvents?.events.includes("started") === true
  return {
    write,
    then,
    callback: ends && record.callBackUrl !== null
      ? "terminal"
      : record.status === "PENDING" && to !== "PENDING" && !isTerminal(to) && asked && record.callBackUrl !== null
      ? "started"
      : null,
    settles: ends && write._tag === "Apply",
    dueAt: write._tag === "Reschedule" ? write.dueAt : change === null ? record.dueAt : "dueAt" in change ? change.dueAt : null,
    ...extra
  }
}

const none = (record: TaskRecord, then: Then = { _tag: "Done" }) => answer(record, { _tag: "None" }, then)
const apply = (change: TaskChange, options: Extract<Write, { _tag: "Apply" }>["options"] = {}): Write => ({ _tag: "Apply", change, options })
const reschedule = (dueAt: number, patch: Extract<Write, { _tag: "Reschedule" }>["patch"] = {}): Write => ({ _tag: "Reschedule", dueAt, patch })

/** The job a failure message names: the upstream's id of it, or the synchronous call that answered it. */
export const jobName = (attempt: UpstreamAttempt): string =>
  attempt.upstreamId === null ? `the synchronous upstream job of attempt ${attempt.number}` : `upstream job ${attempt.upstreamId}`

/**
 * When to poll an accepted job next: soon at first, then half the time the job has run at
 * the upstream so far (since its attempt started; so a job found done is at most half
 * again as late as it took; in its first second, at most twice as late), capped, with
 * `jitter` (0.9 to 1.1) so that jobs accepted together do not poll together. Time the task
 * waited before it was submitted does not count.
 *
 * `readyAt`, when the upstream's submit answer said when the job will be done
 * (`Upstream.SubmitOutcome`), brings the first poll forward to that time, or to `now` when it
 * has passed (an instant job): never later than without it, so a hint that is wrong costs at
 * most one poll early, and the polls after it keep the usual rhythm.
 */
export const nextPollAt = (
  record: TaskRecord,
  now: number,
  startedAt: number,
  timing: {
    readonly notifies: boolean
    readonly pollInterval: number | undefined
    readonly firstPollDelay: number
    readonly readyAt?: number | undefined
  },
  jitter: number
): number => {
  const deadline = record.deadlineAt - record.createdAt
  const ran = now - startedAt
  // A provider that sends a webhook when the job ends wakes the task itself: polls are
  // the safety net, from 30 s after acceptance, each as long again as the job has run,
  // up to a quarter of the deadline (about a dozen polls for a 4-hour job).
  const delay = timing.notifies
    ? Math.min(Math.max(deadline / 4, 30_000), Math.max(30_000, ran))
    : Math.min(
      timing.pollInterval ?? Math.min(600_000, Math.max(1_000, deadline / 36)),
      // In its first second a job is polled as long again as it has run (20, 40, 80 ms...),
      // then half as long again: a 4-hour job costs under 50 polls with a 20 ms start.
      Math.max(timing.firstPollDelay, ran < 1_000 ? ran : ran / 2)
    )
  const scheduled = now + Math.round(delay * jitter)
  // Whole milliseconds, rounded up: the poll never comes before the time the upstream named.
  return timing.readyAt === undefined ? scheduled : Math.min(scheduled, Math.max(now, Math.ceil(timing.readyAt)))
}

const timedOut = (record: TaskRecord) =>
  answer(record, apply({ to: "TIMEOUT", message: "the model's deadline passed" }), { _tag: "CancelUpstream" })

/** The task fails at `now` because its job's results will never be copied. */
const copyFailed = (record: TaskRecord, message: string, attempts: ReadonlyArray<UpstreamAttempt>) =>
  answer(record, apply({ to: "FAILURE", reason: null, message }, { attempts }), undefined, { count: { copy: "failed" } })

/** The job succeeded with `result`, copied or as the upstream gave it. */
const succeeded = (record: TaskRecord, result: TaskResult, startedAt: number, provider?: string) =>
  answer(record, apply({ to: "SUCCESS", result }, { attempts: Attempt.touch(record, startedAt, {}, provider) }))

/** The step of a claimed task. */
const claimed = (record: TaskRecord, event: Extract<Event, { _tag: "Claimed" }>, now: number): Answer => {
  // A job that succeeded upstream: only its results are copied (past the deadline, the task
  // fails naming them, rather than timing out as if the job had not run). An upstream that
  // no longer hosts results (the host changed its composition): as given.
  const copying = Attempt.awaitingCopy(record)
  if (copying !== undefined) {
    if (!event.hostsCopies) return succeeded(record, copying.upstreamResult, copying.startedAt)
    if (now < record.deadlineAt) return none(record, { _tag: "Copy", attempt: copying })
    const message = copying.error === null
      ? `the result of ${jobName(copying)} could not be copied before the deadline (it was not tried)`
      : `the result of ${jobName(copying)} could not be copied before the deadline (${copying.copyFailures ?? 0} tries); the last failure: ${copying.error}`
    return copyFailed(record, message, record.attempts)
  }
  if (now >= record.deadlineAt) return timedOut(record)
  if (record.upstreamId !== null) return none(record, { _tag: "Poll", upstreamId: record.upstreamId })
  // "At most one upstream submit per attempt": the running attempt's job was accepted (or
  // finished) already, yet the task looks unsubmitted. That is a bug; submitting would run a
  // second, billable job. Not submitted: the job's id is put back so that the next step polls it.
  const submitted = Attempt.submitted(record)
  if (submitted !== undefined) {
    const alarm = `engine: task ${record.id} was about to submit attempt ${submitted.number} again, whose ${jobName(submitted)} exists; not submitted`
    const write = submitted.upstreamId === null ? { _tag: "None" } as const : reschedule(now, { upstreamId: submitted.upstreamId as UpstreamId })
    return answer(record, write, undefined, { alarm, count: { resubmit: "refused" } })
  }
  // The same attempt again (its last call failed or was lost): the same idempotency key.
  const extra = Attempt.open(record) === undefined ? {} : { count: { resubmit: "retried" } as const }
  if (!record.job.sync) return answer(record, { _tag: "None" }, { _tag: "Submit" }, extra)
  // A sync upstream answers the call itself: the task is PROCESSING during the call and the
  // worker keeps its lease (heartbeat), so nobody starts it twice and another worker takes it
  // up soon after this one dies. Its due time stays, so it keeps its place.
  // A SUBMITTED one (an async provider accepted its job, then it fell back or failed over to
  // a target that answers the call itself) becomes PROCESSING for the call as a new one does.
  const options = { attempts: Attempt.touch(record, now, {}, event.provider), lease: event.lease }
  const dueAt = Math.min(record.dueAt ?? now, now)
  const write = record.status === "PROCESSING" ? reschedule(dueAt, options) : apply({ to: "PROCESSING", dueAt }, options)
  return answer(record, write, { _tag: "Submit" }, extra)
}

/**
 * After a failed call: retry with backoff, fall back, or fail (`Attempt.decide`). What the
 * paid calls that succeeded gave (`partialResult`) is kept on the running attempt first, with
 * the decision's write: its next submit asks only for the rest.
 */
const failed = (record: TaskRecord, error: UpstreamError, startedAt: number, retry: Retry, now: number, provider?: string): Answer => {
  const kept = error.partialResult === undefined
    ? record
    : new TaskRecord({ ...record, attempts: Attempt.touch(record, startedAt, { partialResult: error.partialResult }, provider) }, true)
  const decision = Attempt.decide({
    record: kept,
    error,
    now,
    startedAt,
    policy: retry.policy,
    jitter: retry.jitter,
    fallback: retry.fallback,
    ...(retry.failover === undefined ? {} : { failover: retry.failover }),
    ...(provider === undefined ? {} : { provider })
  })
  const failure = { failure: error }
  switch (decision._tag) {
    case "Retry":
      return answer(record, reschedule(decision.at, { attempts: decision.attempts }), undefined, failure)
    case "FallBack":
      // The same request on the fallback model or the next provider target, as the next
      // attempt; it counts against its new provider at once: it is running already.
      return answer(
        record,
        reschedule(now, { job: decision.job, upstreamId: null, attempts: decision.attempts, provider: retry.route?.(decision.job) ?? null }),
        undefined,
        failure
      )
    case "Fail":
      return answer(
        record,
        apply({ to: "FAILURE", reason: decision.error.reason, message: decision.error.message }, { attempts: decision.attempts }),
        undefined,
        failure
      )
  }
}

/** Answers `event` for `record` at `now`; see the module comment. Total: every event in every state. */
export const decide = (record: TaskRecord, event: Event, now: number): Answer => {
  if (isTerminal(record.status)) {
    return none(record, event._tag === "CancelRequested" ? { _tag: "NotCancellable" } : { _tag: "Done" })
  }
  switch (event._tag) {
    case "Submitted":
      // Stored with its price held and the engine woken; or failed at once by its model's rule.
      if (record.status !== "PENDING") return none(record)
      return event.rejection === undefined
        ? answer(record, { _tag: "Create", change: null }, { _tag: "Wake" })
        : answer(record, { _tag: "Create", change: { to: "FAILURE", reason: "INVALID_PARAMETERS", message: event.rejection } })
    case "CreditsRefused":
      return record.status === "PENDING"
        ? answer(record, { _tag: "Create", change: { to: "FAILURE", reason: "INSUFFICIENT_POINTS", message: event.message } })
        : none(record)
    case "Claimed":
      return claimed(record, event, now)
    case "Accepted": {
      // An accepted job: polled soon, as SUBMITTED (or the same status after a fallback). One said to be
      // done already is polled in this step, under the claim's lease kept by the write: no claim of its own.
      const attempts = Attempt.touch(record, event.startedAt, { upstreamId: event.upstreamId }, event.provider)
      const { leaseOwner: owner, leaseUntil: until } = record
      const lease = event.pollAt <= now && owner !== null && until !== null && until > now ? { lease: { owner, until } } : {}
      return answer(
        record,
        record.status === "PENDING"
          ? apply({ to: "SUBMITTED", upstreamId: event.upstreamId, dueAt: event.pollAt }, { attempts, ...lease })
          : reschedule(event.pollAt, { upstreamId: event.upstreamId, attempts, ...lease }),
        lease.lease === undefined ? undefined : { _tag: "Poll", upstreamId: event.upstreamId }
      )
    }
    case "Progressed": {
      // A poll that answered ends a run of transient failures. What the upstream said of the
      // job rides on the write this poll makes anyway, at most once per 500 ms of a task's
      // progress (`Progress.fromUpstream`), never a write of its own.
      const running = Attempt.open(record)
      const attempts = running !== undefined && running.transientFailures > 0
        ? Attempt.touch(record, event.startedAt, { transientFailures: 0 }, event.provider)
        : undefined
      const progress = Progress.fromUpstream(record.progress, event.progress, now)
      const options = { ...(attempts === undefined ? {} : { attempts }), ...(progress === undefined ? {} : { progress }) }
      return answer(record, record.status === "SUBMITTED" ? apply({ to: "PROCESSING", dueAt: event.pollAt }, options) : reschedule(event.pollAt, options))
    }
    case "Succeeded": {
      if (!event.hosted) return succeeded(record, event.result, event.startedAt, event.provider)
      // Where the service hosts the model's results they are not the task's yet: recorded on
      // the running attempt first (so that nothing after this runs the job again), the task
      // PROCESSING and due at once, in its last stage (`finishing`); the next step copies them.
      const attempts = Attempt.touch(record, event.startedAt, { upstreamResult: event.result, copyFailures: 0 }, event.provider)
      const progress = Progress.finishing(record.progress, now)
      return answer(record, record.status === "PROCESSING" ? reschedule(now, { attempts, progress }) : apply({ to: "PROCESSING", dueAt: now }, { attempts, progress }))
    }
    case "Failed":
      return failed(record, event.error, event.startedAt, event.retry, now, event.provider)
    case "RanOut":
      // TIMEOUT past the deadline, otherwise a transient failure.
      return now >= record.deadlineAt
        ? timedOut(record)
        : failed(
          record,
          new UpstreamError({ message: `the upstream did not answer within ${event.limit} ms`, reason: null, retryable: true }),
          event.startedAt,
          event.retry,
          now,
          event.provider
        )
    case "Webhook":
      // Only a task waiting on an accepted job is made due now (the engine moving it meanwhile
      // is as good) and the engine woken; one a worker holds once its step has written.
      if (record.dueAt === null || record.upstreamId === null) return none(record)
      if (record.leaseUntil !== null && record.leaseUntil > now) return none(record, { _tag: "AwaitStep" })
      return record.dueAt > now ? answer(record, reschedule(now), { _tag: "Wake" }) : none(record, { _tag: "Wake" })
    case "ResultCopied":
      return answer(record, apply({ to: "SUCCESS", result: event.result }, { attempts: Attempt.touch(record, event.startedAt) }), undefined, {
        count: { copy: "ok" }
      })
    case "CopyFailed": {
      // A failed copy is tried again with backoff until the next try would come after the
      // deadline; one that can never succeed (not a file we serve) fails the task at once.
      const copying = Attempt.awaitingCopy(record)
      if (copying === undefined) return none(record)
      const failures = (copying.copyFailures ?? 0) + 1
      const attempts = Attempt.touch(record, event.startedAt, { copyFailures: failures, error: event.error.message })
      if (!event.error.retryable) return copyFailed(record, `the result of ${jobName(copying)} cannot be copied: ${event.error.message}`, attempts)
      const at = now + Attempt.backoff(event.policy, failures, event.jitter)
      if (at >= record.deadlineAt) {
        const message = `the result of ${jobName(copying)} could not be copied before the deadline (${failures} tries); the last failure: ${event.error.message}`
        return copyFailed(record, message, attempts)
      }
      return answer(record, reschedule(at, { attempts }), undefined, { count: { copy: "retry" } })
    }
    case "CancelRequested":
      return answer(record, apply({ to: "CANCELLED", message: "cancelled by the client" }), { _tag: "CancelUpstream" })
    case "DeadlinePassed":
      return timedOut(record)
    case "LeaseLost":
      return none(record, { _tag: "Reread" })
  }
}
