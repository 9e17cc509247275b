/**
 * The calls of a step (DESIGN.md section 5): a submit or a poll of a claimed task's upstream
 * job, the copy of a finished job's results, a best-effort cancel of its job. Each call runs
 * under `GuardedCall` and answers the task as it now stands with what happened, as one of
 * `Lifecycle`'s events; the step hands that to `Lifecycle.decide` and carries out its answer.
 */
import { Attempt, Lifecycle, Metrics, ModelCatalog, Task, Upstream, UpstreamError } from "@mediagate/core"
import type { Ids, TaskStore } from "@mediagate/core"
import type { Scope } from "effect"
import { Duration, Effect, Either, Option, Random } from "effect"
import * as GuardedCall from "./GuardedCall.js"
import * as Loops from "./Loops.js"
import type { resolve } from "./Settings.js"
import type * as TimeLimits from "./TimeLimits.js"

/** What a call found: the task as it now stands, the event, and when the call ended. */
export interface Called {
  readonly record: Task.TaskRecord
  readonly event: Lifecycle.Event
  readonly now: number
}

/** A claimed task's calls, each answering what it found. */
export interface Calls {
  /** The provider target of the attempt a write opens, when none runs (`Upstream.describe`). */
  readonly named: (record: Task.TaskRecord) => { readonly provider?: string }
  readonly submit: (claimed: Task.TaskRecord) => Effect.Effect<Called>
  readonly poll: (claimed: Task.TaskRecord, upstreamId: Ids.UpstreamId) => Effect.Effect<Called>
  readonly copy: (claimed: Task.TaskRecord, attempt: Task.UpstreamAttempt & { readonly upstreamResult: Task.TaskResult }) => Effect.Effect<Called>
  readonly cancelUpstream: (record: Task.TaskRecord) => Effect.Effect<void>
  /** Whether the upstream hosts results (copies them into the MediaStore). */
  readonly hostsCopies: boolean
}

/** The calls of `worker`'s steps under `settings`. */
export const make = (
  settings: ReturnType<typeof resolve>,
  worker: string,
  timeLimits?: TimeLimits.TimeLimits
): Effect.Effect<Calls, never, Upstream.Upstream | ModelCatalog.ModelCatalog | TaskStore.TaskStore | Scope.Scope> =>
  Effect.gen(function*() {
    const upstream = yield* Upstream.Upstream
    const catalog = yield* ModelCatalog.ModelCatalog
    const guarded = yield* GuardedCall.make(worker, settings.heartbeatWindow, timeLimits)

    /** The provider target of the attempt a write opens, when none runs (`Upstream.describe`). */
    const named = (record: Task.TaskRecord): { readonly provider?: string } => {
      const provider = Attempt.open(record) === undefined ? upstream.describe?.(record.job) : undefined
      return provider === undefined ? {} : { provider }
    }

    /** The model's own fallback, reached through the catalog by the model the client asked for. */
    const fallbackOf = (record: Task.TaskRecord) => {
      const spec = catalog.find(String(record.input["model"]))
      return (job: Task.UpstreamJob, failure: string) =>
        Option.isSome(spec) && spec.value.fallback !== undefined ? spec.value.fallback(job, failure) : undefined
    }

    /** How a failed call of `record` is tried again, with a fresh jitter. */
    const retry = (record: Task.TaskRecord) =>
      Effect.map(Random.next, (jitter): Lifecycle.Retry => ({
        policy: settings.retry,
        jitter,
        fallback: fallbackOf(record),
        ...(upstream.failover === undefined ? {} : { failover: upstream.failover }),
        ...(upstream.provider === undefined ? {} : { route: upstream.provider })
      }))

    /**
     * When to poll `record`'s job next (`Lifecycle.nextPollAt`), with ±10% jitter; no later than
     * `readyAt`, the time the upstream's submit answer said the job will be done.
     */
    const pollAt = (record: Task.TaskRecord, now: number, startedAt = Attempt.open(record)?.startedAt ?? now, readyAt?: number) =>
      Effect.map(Random.nextRange(0.9, 1.1), (jitter) =>
        Lifecycle.nextPollAt(record, now, startedAt, {
          notifies: upstream.notifies?.(record.job) === true,
          pollInterval: settings.upstreamPollInterval,
          firstPollDelay: settings.firstPollDelay,
          readyAt
        }, jitter))

    /** The upstream's job ended well with `result`: to be copied first where the service hosts it. */
    const succeeded = (record: Task.TaskRecord, result: Task.TaskResult, startedAt: number): Lifecycle.Event => ({
      _tag: "Succeeded",
      result,
      startedAt,
      hosted: upstream.hostResult !== undefined && upstream.hostsResults?.(record.job, result) === true,
      ...named(record)
    })

    /** An upstream call (submit or poll) within its time limit; `onAnswer` takes its answer. */
    const callUpstream = <A>(
      claimed: Task.TaskRecord,
      limit: number,
      call: Effect.Effect<A, UpstreamError>,
      onAnswer: (record: Task.TaskRecord, answer: A, now: number, startedAt: number) => Effect.Effect<Lifecycle.Event>
    ): Effect.Effect<Called> =>
      Effect.gen(function*() {
        const [record, outcome, startedAt] = yield* guarded(claimed, limit, call)
        const now = yield* Loops.currentMillis
        if (outcome._tag === "Lost") return { record, now, event: { _tag: "LeaseLost" } }
        // Labelled by provider (`fal`), also for a target counted under its own name.
        const name = upstream.provider?.(record.job) ?? undefined
        const provider = name === undefined ? undefined : upstream.targetLimits?.[name]?.provider ?? name
        const ended = outcome._tag === "RanOut" ? "timeout" : Either.isLeft(outcome.answer) ? "error" : "ok"
        yield* Metrics.upstreamCalled(provider, ended, now - startedAt)
        if (outcome._tag === "RanOut") return { record, now, event: { _tag: "RanOut", limit, startedAt, retry: yield* retry(record), ...named(record) } }
        const event: Lifecycle.Event = Either.isLeft(outcome.answer)
          ? { _tag: "Failed", error: outcome.answer.left, startedAt, retry: yield* retry(record), ...named(record) }
          : yield* onAnswer(record, outcome.answer.right, now, startedAt)
        return { record, now, event }
      })

    const submitContext = (record: Task.TaskRecord): Upstream.SubmitContext => {
      const partialResult = Attempt.open(record)?.partialResult
      return {
        taskId: record.id,
        idempotencyKey: Attempt.idempotencyKey(record),
        request: record.input,
        // What the attempt's earlier calls drew, kept when its last submit failed in part.
        ...(partialResult === undefined ? {} : { partialResult })
      }
    }

    /**
     * Submits the task's job: a synchronous upstream's call answers it (within its own, longer
     * limit); an asynchronous one accepts it. A sync upstream that answers with a job id after
     * all is polled like an async one.
     */
    const submit = (claimed: Task.TaskRecord) =>
      callUpstream(
        claimed,
        claimed.job.sync ? settings.syncCallTimeout : settings.upstreamCallTimeout,
        upstream.submit(claimed.job, submitContext(claimed)),
        (record, submitted, now, startedAt) =>
          submitted._tag === "Completed"
            ? Effect.succeed(succeeded(record, submitted.result, startedAt))
            : Effect.map(pollAt(record, now, startedAt, submitted.readyAt), (at): Lifecycle.Event => ({
              _tag: "Accepted",
              upstreamId: submitted.upstreamId,
              startedAt,
              pollAt: at,
              ...named(record)
            }))
      )

    const poll = (claimed: Task.TaskRecord, upstreamId: Ids.UpstreamId) =>
      callUpstream(claimed, settings.upstreamCallTimeout, upstream.poll(upstreamId, claimed.job), (record, polled, now, startedAt) =>
        polled._tag === "Completed"
          ? Effect.succeed(succeeded(record, polled.result, startedAt))
          : Effect.map(pollAt(record, now), (at): Lifecycle.Event => ({
            _tag: "Progressed",
            progress: polled.progress,
            startedAt,
            pollAt: at,
            ...named(record)
          })))

    /**
     * Copies the results of `attempt`'s finished job into the MediaStore (`Upstream.hostResult`)
     * within its time limit, which ends at the task's deadline at the latest.
     */
    const copy = (claimed: Task.TaskRecord, attempt: Task.UpstreamAttempt & { readonly upstreamResult: Task.TaskResult }): Effect.Effect<Called> =>
      Effect.gen(function*() {
        // Claimed for a copy only while the upstream hosts results (`Lifecycle`).
        const host = upstream.hostResult ?? ((_job: Task.UpstreamJob, result: Task.TaskResult) => Effect.succeed(result))
        const [record, outcome, startedAt] = yield* guarded(claimed, settings.resultCopyTimeout, host(claimed.job, attempt.upstreamResult))
        const now = yield* Loops.currentMillis
        if (outcome._tag === "Lost") return { record, now, event: { _tag: "LeaseLost" } }
        if (outcome._tag === "Answered" && Either.isRight(outcome.answer)) {
          return { record, now, event: { _tag: "ResultCopied", result: outcome.answer.right, startedAt } }
        }
        // A copy runs out at its own limit or at the task's deadline, whichever comes first.
        const error = outcome._tag === "Answered" && Either.isLeft(outcome.answer)
          ? outcome.answer.left
          : new Upstream.ResultCopyError({
            message: now >= record.deadlineAt
              ? "the deadline passed while the result was being copied"
              : `copying the result did not finish within ${settings.resultCopyTimeout} ms`,
            retryable: true
          })
        yield* Effect.logWarning(`engine: copying the result of ${Lifecycle.jobName(attempt)} for task ${record.id} failed: ${error.message}`).pipe(
          Effect.annotateLogs({ retryable: error.retryable, copyFailures: (attempt.copyFailures ?? 0) + 1 })
        )
        const jitter = yield* Random.next
        return {
          record,
          now,
          event: { _tag: "CopyFailed", error: { message: error.message, retryable: error.retryable }, startedAt, policy: settings.retry, jitter }
        }
      })

    /** Asks the upstream to stop the task's job, best effort: a failure is logged, never the task's. */
    const cancelUpstream = (record: Task.TaskRecord) =>
      record.upstreamId === null || upstream.cancel === undefined
        ? Effect.void
        : upstream.cancel(record.upstreamId, record.job).pipe(
          Effect.timeout(Duration.millis(settings.upstreamCallTimeout)),
          Effect.catchAllCause((cause) => Effect.logWarning(`engine: cancelling the upstream job of task ${record.id} failed`, cause))
        )

    return { named, submit, poll, copy, cancelUpstream, hostsCopies: upstream.hostResult !== undefined }
  })

