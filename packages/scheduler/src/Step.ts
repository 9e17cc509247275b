/**
 * One step of a task the engine claimed (DESIGN.md section 5): a submit or a poll of its
 * upstream job, a synchronous upstream's call, the copy of a finished job's results, or its
 * time-out; then the write of the next state and due time through the one write path.
 */
import type { IllegalTransition, StoreError, TaskConflict } from "@mediagate/core"
import { Attempt, Ids, Metrics, ModelCatalog, Progress, Task, TaskStore, TaskWrites, Upstream, UpstreamError } from "@mediagate/core"
import type { Scope } from "effect"
import { Cause, Duration, Effect, Either, Option, Random } from "effect"
import * as GuardedCall from "./GuardedCall.js"
import * as Loops from "./Loops.js"
import type { Options } from "./Settings.js"
import { resolve } from "./Settings.js"

/**
 * True for a claimed task whose step is a synchronous upstream's call (it runs beside the
 * steps); not for one whose job finished and whose results wait to be copied (a step).
 */
export const isSyncCall = (record: Task.TaskRecord): boolean =>
  record.job.sync && record.upstreamId === null && Attempt.awaitingCopy(record) === undefined

/** Runs one step of one claimed task as `worker`. */
export const make = (options: Options = {}, worker = "worker"): Effect.Effect<
  (record: Task.TaskRecord) => Effect.Effect<Task.TaskRecord>,
  never,
  TaskStore.TaskStore | Upstream.Upstream | ModelCatalog.ModelCatalog | TaskWrites.TaskWrites | Scope.Scope
> =>
  Effect.gen(function*() {
    const settings = resolve(options)
    const store = yield* TaskStore.TaskStore
    const upstream = yield* Upstream.Upstream
    const catalog = yield* ModelCatalog.ModelCatalog
    const writes = yield* TaskWrites.TaskWrites
    const guarded = yield* GuardedCall.make(worker, settings.heartbeatWindow)
    /** The attempts with the running one changed by `patch` (a new one names the upstream's provider target). */
    const touch = (record: Task.TaskRecord, startedAt: number, patch?: Parameters<typeof Attempt.touch>[2]) =>
      Attempt.touch(record, startedAt, patch, Attempt.open(record) === undefined ? upstream.describe?.(record.job) : undefined)

    /**
     * When to poll an accepted job next: soon at first, then half the time the job has run at
     * the upstream so far (since its attempt started; so a job found done is at most half
     * again as late as it took; in its first second, at most twice as late), capped, with
     * ±10% jitter so that jobs accepted together do not poll together. Time the task waited
     * before it was submitted does not count.
     */
    const nextPollAt = (record: Task.TaskRecord, now: number, startedAt = Attempt.open(record)?.startedAt ?? now) =>
      Effect.map(Random.nextRange(0.9, 1.1), (jitter) => {
        const deadline = record.deadlineAt - record.createdAt
        const ran = now - startedAt
        // A provider that sends a webhook when the job ends wakes the task itself: polls are
        // the safety net, from 30 s after acceptance, each as long again as the job has run,
        // up to a quarter of the deadline (about a dozen polls for a 4-hour job).
        const delay = upstream.notifies?.(record.job) === true
          ? Math.min(Math.max(deadline / 4, 30_000), Math.max(30_000, ran))
          : Math.min(
            settings.upstreamPollInterval ?? Math.min(600_000, Math.max(1_000, deadline / 36)),
            // In its first second a job is polled as long again as it has run (20, 40, 80 ms...),
            // then half as long again: a 4-hour job costs under 50 polls with a 20 ms start.
            Math.max(settings.firstPollDelay, ran < 1_000 ? ran : ran / 2)
          )
        return now + Math.round(delay * jitter)
      })

    /**
     * Writes through the one write path; a refused transition or a lost race leaves the task as
     * it is. A store failure goes on to the step, which gives up the task until its lease ends.
     */
    const write = (current: Task.TaskRecord, next: Effect.Effect<Task.TaskRecord, IllegalTransition | TaskConflict | StoreError>) =>
      next.pipe(
        Effect.catchTags({
          IllegalTransition: (error) => Effect.logWarning("engine: transition refused", error).pipe(Effect.as(current)),
          TaskConflict: () => Effect.logInfo(`engine: task ${current.id} changed under us; leaving it`).pipe(Effect.as(current))
        })
      )

    const complete = (record: Task.TaskRecord, result: Task.TaskResult, now: number, startedAt: number) =>
      write(record, writes.apply(record, { to: "SUCCESS", result }, now, { attempts: touch(record, startedAt) }))

    /**
     * The upstream's job succeeded with `result`. Where the service hosts the model's results
     * they are not the task's yet: they are recorded on the running attempt, the task stays
     * (or becomes) PROCESSING, due at once, and the next step copies them (`copyResult`).
     * Recorded first, so that nothing after this (a failed copy, a crash) runs the job again.
     */
    const finished = (record: Task.TaskRecord, result: Task.TaskResult, now: number, startedAt: number) => {
      if (upstream.hostResult === undefined || upstream.hostsResults?.(record.job, result) !== true) return complete(record, result, now, startedAt)
      const attempts = touch(record, startedAt, { upstreamResult: result, copyFailures: 0 })
      // The copy is the task's last stage: `finishing`, told at once (a change of stage).
      const progress = Progress.finishing(record.progress, now)
      return record.status === "PROCESSING"
        ? write(record, writes.reschedule(record, now, { attempts, progress }))
        : write(record, writes.apply(record, { to: "PROCESSING", dueAt: now }, now, { attempts, progress }))
    }

    /** Asks the upstream to stop the task's job, best effort: a failure is logged, never the task's. */
    const cancelUpstream = (record: Task.TaskRecord) =>
      record.upstreamId === null || upstream.cancel === undefined
        ? Effect.void
        : upstream.cancel(record.upstreamId, record.job).pipe(
          Effect.timeout(Duration.millis(settings.upstreamCallTimeout)),
          Effect.catchAllCause((cause) => Effect.logWarning(`engine: cancelling the upstream job of task ${record.id} failed`, cause))
        )

    const timeOut = (record: Task.TaskRecord, now: number) =>
      write(record, writes.apply(record, { to: "TIMEOUT", message: "the model's deadline passed" }, now)).pipe(
        Effect.tap((ended) => (ended.status === "TIMEOUT" ? cancelUpstream(record) : Effect.void))
      )

    /** The model's own fallback, reached through the catalog by the model the client asked for. */
    const fallbackOf = (record: Task.TaskRecord) => {
      const spec = catalog.find(String(record.input["model"]))
      return (job: Task.UpstreamJob, failure: string) =>
        Option.isSome(spec) && spec.value.fallback !== undefined ? spec.value.fallback(job, failure) : undefined
    }

    /**
     * After a failed call that started at `startedAt`: retry with backoff, fall back, or fail
     * (`Attempt.decide`). What the paid calls that succeeded gave (`partialResult`) is kept on
     * the running attempt first, with the decision's write: its next submit asks only for the rest.
     */
    const fail = (record: Task.TaskRecord, error: UpstreamError, now: number, startedAt: number) =>
      Effect.gen(function*() {
        // The step's annotations (taskId, model) come with it.
        yield* Effect.logWarning(`engine: upstream call of task ${record.id} failed: ${error.message}`).pipe(
          Effect.annotateLogs({
            reason: error.reason ?? "none",
            retryable: error.retryable,
            ...(error.partialResult === undefined ? {} : { kept: error.partialResult.urls.length })
          })
        )
        // The decision's attempts start from the running one with what its calls drew.
        const kept = error.partialResult === undefined
          ? record
          : new Task.TaskRecord({ ...record, attempts: touch(record, startedAt, { partialResult: error.partialResult }) }, true)
        const jitter = yield* Random.next
        const decision = Attempt.decide({
          record: kept,
          error,
          now,
          startedAt,
          policy: settings.retry,
          jitter,
          fallback: fallbackOf(record),
          ...(upstream.failover === undefined ? {} : { failover: upstream.failover }),
          ...(upstream.describe === undefined ? {} : { provider: upstream.describe(record.job) })
        })
        switch (decision._tag) {
          case "Retry":
            return yield* write(record, writes.reschedule(record, decision.at, { attempts: decision.attempts }))
          case "FallBack":
            // The same request on the fallback model or the next provider target, as the next
            // attempt; the task stays non-terminal. It counts against its new provider at once:
            // it is running already, and does not wait in line again for room there.
            return yield* write(
              record,
              writes.reschedule(record, now, {
                job: decision.job,
                upstreamId: null,
                attempts: decision.attempts,
                provider: upstream.provider === undefined ? null : upstream.provider(decision.job)
              })
            )
          case "Fail":
            return yield* write(
              record,
              writes.apply(
                record,
                { to: "FAILURE", reason: decision.error.reason, message: decision.error.message },
                now,
                { attempts: decision.attempts }
              )
            )
        }
      })

    /** A call that ran out of time: TIMEOUT past the deadline, otherwise a transient failure. */
    const ranOut = (record: Task.TaskRecord, now: number, limit: number, startedAt: number) =>
      now >= record.deadlineAt
        ? timeOut(record, now)
        : fail(
          record,
          new UpstreamError({ message: `the upstream did not answer within ${limit} ms`, reason: null, retryable: true }),
          now,
          startedAt
        )

    /** An upstream call (submit or poll) within its time limit; `onAnswer` takes its answer. */
    const callUpstream = <A>(
      claimed: Task.TaskRecord,
      limit: number,
      call: Effect.Effect<A, UpstreamError>,
      onAnswer: (record: Task.TaskRecord, answer: A, now: number, startedAt: number) => Effect.Effect<Task.TaskRecord, StoreError>
    ) =>
      Effect.gen(function*() {
        const [record, outcome, startedAt] = yield* guarded(claimed, limit, call)
        const now = yield* Loops.currentMillis
        if (outcome._tag !== "Lost") {
          // Labelled by provider (`fal`), also for a target counted under its own name.
          const named = upstream.provider?.(record.job) ?? undefined
          const provider = named === undefined ? undefined : upstream.targetLimits?.[named]?.provider ?? named
          const ended = outcome._tag === "RanOut" ? "timeout" : Either.isLeft(outcome.answer) ? "error" : "ok"
          yield* Metrics.upstreamCalled(provider, ended, now - startedAt)
        }
        switch (outcome._tag) {
          case "Lost":
            return Option.getOrElse(yield* store.get(record.id), () => record)
          case "RanOut":
            return yield* ranOut(record, now, limit, startedAt)
          case "Answered":
            return Either.isLeft(outcome.answer)
              ? yield* fail(record, outcome.answer.left, now, startedAt)
              : yield* onAnswer(record, outcome.answer.right, now, startedAt)
        }
      })

    /** The job a failure message names: the upstream's id of it, or the synchronous call that answered it. */
    const jobName = (attempt: Task.UpstreamAttempt) =>
      attempt.upstreamId === null ? `the synchronous upstream job of attempt ${attempt.number}` : `upstream job ${attempt.upstreamId}`

    /** A result that will never be copied: the task fails with why, naming the upstream's job. */
    const copyFailed = (record: Task.TaskRecord, now: number, message: string, attempts: ReadonlyArray<Task.UpstreamAttempt>) =>
      Metrics.resultCopy("failed").pipe(
        Effect.zipRight(write(record, writes.apply(record, { to: "FAILURE", reason: null, message }, now, { attempts })))
      )

    /**
     * The step of a task whose job succeeded upstream and whose results wait to be copied into
     * the MediaStore (`Upstream.hostResult`): only the copy runs, never the job. A failed copy
     * is tried again with backoff (the retry policy's delays), counted on the attempt with its
     * last error, until the next try would come after the deadline; a copy that can never
     * succeed (not a file we serve) fails the task at once. The task is PROCESSING throughout.
     */
    const copyResult = (
      claimed: Task.TaskRecord,
      attempt: Task.UpstreamAttempt & { readonly upstreamResult: Task.TaskResult },
      now: number
    ): Effect.Effect<Task.TaskRecord, StoreError> =>
      Effect.gen(function*() {
        const host = upstream.hostResult
        // An upstream that no longer hosts results (the host changed its composition): as given.
        if (host === undefined) return yield* complete(claimed, attempt.upstreamResult, now, attempt.startedAt)
        const failures = (attempt.copyFailures ?? 0) + 1
        if (now >= claimed.deadlineAt) {
          const message = attempt.error === null
            ? `the result of ${jobName(attempt)} could not be copied before the deadline (it was not tried)`
            : `the result of ${jobName(attempt)} could not be copied before the deadline (${attempt.copyFailures ?? 0} tries); the last failure: ${attempt.error}`
          return yield* copyFailed(claimed, now, message, claimed.attempts)
        }
        const [record, outcome, startedAt] = yield* guarded(claimed, settings.resultCopyTimeout, host(claimed.job, attempt.upstreamResult))
        const ended = yield* Loops.currentMillis
        if (outcome._tag === "Lost") return Option.getOrElse(yield* store.get(record.id), () => record)
        if (outcome._tag === "Answered" && Either.isRight(outcome.answer)) {
          yield* Metrics.resultCopy("ok")
          return yield* complete(record, outcome.answer.right, ended, startedAt)
        }
        // A copy runs out at its own limit or at the task's deadline, whichever comes first.
        const error = outcome._tag === "RanOut"
          ? new Upstream.ResultCopyError({
            message: ended >= record.deadlineAt
              ? "the deadline passed while the result was being copied"
              : `copying the result did not finish within ${settings.resultCopyTimeout} ms`,
            retryable: true
          })
          : Either.isLeft(outcome.answer) ? outcome.answer.left : undefined
        if (error === undefined) return record // unreachable: a Right was handled above
        yield* Effect.logWarning(`engine: copying the result of ${jobName(attempt)} for task ${record.id} failed: ${error.message}`).pipe(
          Effect.annotateLogs({ retryable: error.retryable, copyFailures: failures })
        )
        const attempts = touch(record, startedAt, { copyFailures: failures, error: error.message })
        if (!error.retryable) {
          return yield* copyFailed(record, ended, `the result of ${jobName(attempt)} cannot be copied: ${error.message}`, attempts)
        }
        const at = ended + Attempt.backoff(settings.retry, failures, yield* Random.next)
        if (at >= record.deadlineAt) {
          const message = `the result of ${jobName(attempt)} could not be copied before the deadline (${failures} tries); the last failure: ${error.message}`
          return yield* copyFailed(record, ended, message, attempts)
        }
        yield* Metrics.resultCopy("retry")
        return yield* write(record, writes.reschedule(record, at, { attempts }))
      })

    /**
     * "At most one upstream submit per attempt", checked before every submit: the running
     * attempt's job was accepted (or finished) already, yet the task looks unsubmitted. That is
     * a bug; submitting would run a second, billable job. Not submitted: logged, counted, and
     * the job's id put back on the task so that the next step polls it.
     */
    const refuseResubmit = (record: Task.TaskRecord, attempt: Task.UpstreamAttempt, now: number) =>
      Effect.gen(function*() {
        yield* Effect.logError(
          `engine: task ${record.id} was about to submit attempt ${attempt.number} again, whose ${jobName(attempt)} exists; not submitted`
        )
        yield* Metrics.upstreamResubmit("refused")
        if (attempt.upstreamId === null) return record
        return yield* write(record, writes.reschedule(record, now, { upstreamId: Ids.UpstreamId.make(attempt.upstreamId) }))
      })

    const submitContext = (record: Task.TaskRecord): Upstream.SubmitContext => ({
      taskId: record.id,
      idempotencyKey: Attempt.idempotencyKey(record),
      request: record.input,
      // What the attempt's earlier calls drew, kept when its last submit failed in part.
      ...(Attempt.open(record)?.partialResult === undefined ? {} : { partialResult: Attempt.open(record)!.partialResult! })
    })

    /** An accepted job: polled soon, as SUBMITTED (or the same status after a fallback). */
    const accepted = (record: Task.TaskRecord, upstreamId: Ids.UpstreamId, now: number, startedAt: number) =>
      Effect.flatMap(nextPollAt(record, now, startedAt), (dueAt) => {
        const attempts = touch(record, startedAt, { upstreamId })
        return record.status === "PENDING"
          ? write(record, writes.apply(record, { to: "SUBMITTED", upstreamId, dueAt }, now, { attempts }))
          : write(record, writes.reschedule(record, dueAt, { upstreamId, attempts }))
      })

    const runSync = (claimed: Task.TaskRecord) =>
      callUpstream(claimed, settings.syncCallTimeout, upstream.submit(claimed.job, submitContext(claimed)), (record, submitted, now, startedAt) =>
        submitted._tag === "Completed"
          ? finished(record, submitted.result, now, startedAt)
          // A sync upstream that answered with a job id after all: poll it like an async one.
          : accepted(record, submitted.upstreamId, now, startedAt))

    const submitAsync = (claimed: Task.TaskRecord) =>
      callUpstream(claimed, settings.upstreamCallTimeout, upstream.submit(claimed.job, submitContext(claimed)), (record, submitted, now, startedAt) =>
        submitted._tag === "Completed"
          ? finished(record, submitted.result, now, startedAt)
          : accepted(record, submitted.upstreamId, now, startedAt))

    const poll = (claimed: Task.TaskRecord, upstreamId: Ids.UpstreamId) =>
      callUpstream(claimed, settings.upstreamCallTimeout, upstream.poll(upstreamId, claimed.job), (record, polled, now, startedAt) => {
        if (polled._tag === "Completed") return finished(record, polled.result, now, startedAt)
        // A poll that answered ends a run of transient failures.
        const running = Attempt.open(record)
        const attempts = running !== undefined && running.transientFailures > 0
          ? touch(record, startedAt, { transientFailures: 0 })
          : undefined
        // What the upstream said of the job rides on the write this poll makes anyway, at most
        // once per 500 ms of a task's progress (`Progress.fromUpstream`), never a write of its own.
        const progress = Progress.fromUpstream(record.progress, polled.progress, now)
        const options = { ...(attempts === undefined ? {} : { attempts }), ...(progress === undefined ? {} : { progress }) }
        return Effect.flatMap(nextPollAt(record, now), (dueAt) =>
          record.status === "SUBMITTED"
            ? write(record, writes.apply(record, { to: "PROCESSING", dueAt }, now, options))
            : write(record, writes.reschedule(record, dueAt, options)))
      })

    return (record: Task.TaskRecord): Effect.Effect<Task.TaskRecord> =>
      Effect.gen(function*() {
        const now = yield* Loops.currentMillis
        // A job that succeeded upstream: only its results are copied (past the deadline, the
        // task fails naming them, rather than timing out as if the job had not run).
        const copying = Attempt.awaitingCopy(record)
        if (copying !== undefined) return yield* copyResult(record, copying, now)
        if (now >= record.deadlineAt) return yield* timeOut(record, now)
        if (record.upstreamId !== null) return yield* poll(record, record.upstreamId)
        const submitted = Attempt.submitted(record)
        if (submitted !== undefined) return yield* refuseResubmit(record, submitted, now)
        // The same attempt again (its last call failed or was lost): the same idempotency key.
        if (Attempt.open(record) !== undefined) yield* Metrics.upstreamResubmit("retried")
        if (!record.job.sync) return yield* submitAsync(record)
        // A sync upstream answers the call itself: the task is PROCESSING during the call and
        // this worker keeps its lease (heartbeat), so nobody starts it twice and another worker
        // takes it up soon after this one dies. Its due time stays, so it keeps its place.
        const options = { attempts: touch(record, now), lease: { owner: worker, until: now + settings.heartbeatWindow } }
        const dueAt = Math.min(record.dueAt ?? now, now)
        const processing = record.status === "PENDING"
          ? yield* write(record, writes.apply(record, { to: "PROCESSING", dueAt }, now, options))
          : yield* write(record, writes.reschedule(record, dueAt, options))
        return processing.status === "PROCESSING" && processing.version !== record.version
          ? yield* runSync(processing)
          : processing
      }).pipe(
        // The store failed (its database is down): log it; the lease expires and the task is tried again.
        Effect.catchTag("StoreError", (error) => Effect.logError(`engine: step of task ${record.id} failed`, Cause.fail(error)).pipe(Effect.as(record))),
        // A bug in the step: logged, not recovered from. The step's fiber ends with it and the
        // task keeps the lease of its claim (or heartbeat) until that runs out; then a worker
        // claims it again. Only this task's step is lost, not the engine's loop.
        Effect.tapDefect((defect) => Effect.logError(`engine: step of task ${record.id} died (a bug); it is tried again once its lease runs out`, defect)),
        // Every line a step logs names its task and model (what the client asked for).
        Effect.annotateLogs({ taskId: record.id, model: String(record.input["model"] ?? record.job.model) }),
        (effect) =>
          settings.stepSpans
            // No stack trace: capturing one costs about as much as the span itself (bench:costs).
            ? Effect.withSpan(effect, "Engine.step", {
              attributes: {
                "mediagate.task_id": record.id,
                "mediagate.model": String(record.input["model"] ?? record.job.model),
                "mediagate.status": record.status
              },
              captureStackTrace: false
            })
            : effect
      )
  })
