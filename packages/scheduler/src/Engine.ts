/**
 * The lifecycle engine (DESIGN.md section 5). All state lives in the TaskStore: a worker
 * claims due tasks with a lease, runs one step, writes the next state and due time.
 * A crashed worker's leases expire and another worker carries on; a worker that stops
 * (its scope closes, SIGTERM in the standalone server) finishes or gives back its work.
 *
 * Steps are short (a submit or a poll of an asynchronous upstream, under a time limit) and
 * share `concurrency` slots. A synchronous upstream's call, which answers with the result
 * and may take a minute, runs beside them, holding no slot: how many calls and jobs run at
 * the upstream at once is the store's running limit (`maxRunning`, `maxRunningPerAccount`,
 * `maxRunningPerProvider`).
 */
import type { IllegalTransition, StoreError, TaskConflict } from "@mediagate/core"
import { Attempt, Ids, Metrics, ModelCatalog, Task, TaskEvents, TaskStore, TaskWrites, Upstream, UpstreamError } from "@mediagate/core"
import { DueTimes } from "./DueTimes.js"
import * as TimeLimits from "./TimeLimits.js"
import * as Loops from "./Loops.js"
import type { Scope } from "effect"
import { Cause, Clock, Deferred, Duration, Effect, Either, Fiber, FiberSet, Layer, Option, Queue, Random, Ref } from "effect"

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
   * Tasks whose upstream names no provider (the simulator) have no provider limit.
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
   * upstream is done by then, and a slow one costs two or three polls more in all.
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

const resolve = (options: Options) => ({
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

/** A call runs without a heartbeat only if it ends this long before the claim's lease does. */
const leaseMargin = 1_000

/** How an upstream call (or a result copy) under `guarded` ended. */
type Guarded<A, E> =
  | { readonly _tag: "Answered"; readonly answer: Either.Either<A, E> }
  | { readonly _tag: "RanOut" }
  /** The task changed under the worker (a client cancelled it): the call was abandoned. */
  | { readonly _tag: "Lost" }

/**
 * True for a claimed task whose step is a synchronous upstream's call (it runs beside the
 * steps); not for one whose job finished and whose results wait to be copied (a step).
 */
export const isSyncCall = (record: Task.TaskRecord): boolean =>
  record.job.sync && record.upstreamId === null && Attempt.awaitingCopy(record) === undefined

/** Runs one step of one claimed task as `worker`. Exported for tests of single steps. */
export const makeStep = (options: Options = {}, worker = "worker"): Effect.Effect<
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
    const timeLimits = yield* TimeLimits.make
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
      return record.status === "PROCESSING"
        ? write(record, writes.reschedule(record, now, { attempts }))
        : write(record, writes.apply(record, { to: "PROCESSING", dueAt: now }, now, { attempts }))
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

    /** After a failed call that started at `startedAt`: retry with backoff, fall back, or fail (`Attempt.decide`). */
    const fail = (record: Task.TaskRecord, error: UpstreamError, now: number, startedAt: number) =>
      Effect.gen(function*() {
        // The step's annotations (taskId, model) come with it.
        yield* Effect.logWarning(`engine: upstream call of task ${record.id} failed: ${error.message}`).pipe(
          Effect.annotateLogs({ reason: error.reason ?? "none", retryable: error.retryable })
        )
        const jitter = yield* Random.next
        const decision = Attempt.decide({
          record,
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

    /**
     * Keeps the task's lease ahead while this worker is busy with it; completes `lost` and
     * stops when the task changed under it (a client cancelled it).
     */
    const heartbeat = (current: Ref.Ref<Task.TaskRecord>, lost: Deferred.Deferred<void>) => {
      const beat = Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const latest = yield* Ref.get(current)
        const next = new Task.TaskRecord({
          ...latest,
          leaseOwner: worker,
          leaseUntil: Math.min(latest.deadlineAt, now + settings.heartbeatWindow),
          version: latest.version + 1
        }, true)
        // Uninterruptible: the stored version and the Ref must never disagree.
        return yield* store.update(next, latest.version).pipe(
          Effect.zipRight(Ref.set(current, next)),
          Effect.as(true),
          Effect.catchTag("TaskConflict", () => Deferred.succeed(lost, undefined).pipe(Effect.as(false))),
          Effect.catchTag("StoreError", (error) => Effect.logWarning(`engine: heartbeat of task ${latest.id} failed`, error).pipe(Effect.as(true))),
          Effect.uninterruptible
        )
      })
      return beat.pipe(Effect.delay(Duration.millis(settings.heartbeatWindow / 3)), Effect.repeat({ while: (going) => going }))
    }

    /**
     * Runs an upstream call for `claimed` within `limit` (never past the deadline) while a
     * heartbeat keeps the task for this worker; answers the task as it now stands and how
     * the call ended. A call that ends well inside the lease the claim took (a submit or poll
     * of an async upstream under the default settings) needs no heartbeat: a client's cancel
     * meanwhile is found when the step writes (a conflict), as it would be at the next beat.
     */
    const guarded = <A, E>(claimed: Task.TaskRecord, limit: number, call: Effect.Effect<A, E>) =>
      Effect.gen(function*() {
        const started = yield* Clock.currentTimeMillis
        const budget = Math.max(0, Math.min(claimed.deadlineAt - started, limit))
        const timed = timeLimits.run(Effect.either(call), budget).pipe(
          Effect.map((answer): Guarded<A, E> => Option.isSome(answer) ? { _tag: "Answered", answer: answer.value } : { _tag: "RanOut" })
        )
        if (budget + leaseMargin < (claimed.leaseUntil ?? 0) - started) return [claimed, yield* timed, started] as const
        const current = yield* Ref.make(claimed)
        const lost = yield* Deferred.make<void>()
        const beating = yield* Effect.fork(heartbeat(current, lost))
        const outcome: Guarded<A, E> = yield* timed.pipe(Effect.raceFirst(Effect.as(Deferred.await(lost), { _tag: "Lost" } as const)))
        yield* Fiber.interrupt(beating)
        return [yield* Ref.get(current), outcome, started] as const
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
        const now = yield* Clock.currentTimeMillis
        if (outcome._tag !== "Lost") {
          const provider = upstream.provider?.(record.job) ?? undefined
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
        const ended = yield* Clock.currentTimeMillis
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
      request: record.input
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
        return Effect.flatMap(nextPollAt(record, now), (dueAt) =>
          record.status === "SUBMITTED"
            ? write(record, writes.apply(record, { to: "PROCESSING", dueAt }, now, attempts === undefined ? {} : { attempts }))
            : write(record, writes.reschedule(record, dueAt, attempts === undefined ? {} : { attempts })))
      })

    return (record: Task.TaskRecord): Effect.Effect<Task.TaskRecord> =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
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

/** The engine: a loop that claims due work and runs it, woken early by new submissions. */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const settings = resolve(options)
    const store = yield* TaskStore.TaskStore
    const ids = yield* Ids.Ids
    const worker = `worker-${yield* ids.token(6)}`
    const step = yield* makeStep(options, worker)
    const wakeups = yield* Queue.sliding<void>(1)
    const inflight = yield* Ref.make(0)
    const stopping = yield* Ref.make(false)
    /** Steps (short, `concurrency` at once) and sync calls (beside them, bounded by the running limit). */
    const steps = yield* FiberSet.make<Task.TaskRecord>()
    const calls = yield* FiberSet.make<Task.TaskRecord>()
    /** The due times this engine's steps left behind (a poll 20 ms away): the loop wakes for each. */
    const dueTimes = new DueTimes()
    const remember = (record: Task.TaskRecord) => (record.dueAt === null ? Effect.void : Effect.sync(() => dueTimes.add(record.dueAt!)))
    const perProvider = settings.maxRunningPerProvider
    const limits = {
      running: settings.maxRunning,
      perAccount: settings.maxRunningPerAccount,
      perProvider: (provider: string) => perProvider[provider] ?? perProvider["*"] ?? Number.POSITIVE_INFINITY
    }

    /** Claims and starts due work; answers the time the claim looked at and what it took, none when it did not claim (no free slot). */
    const claimAndRun: Effect.Effect<{ readonly at: number; readonly claimed: number } | undefined> = Effect.gen(function*() {
      if (yield* Ref.get(stopping)) return undefined
      const free = settings.concurrency - (yield* Ref.get(inflight))
      if (free <= 0) return undefined
      const now = yield* Clock.currentTimeMillis
      const claimed = yield* store.claimDue({ now, limit: free, worker, leaseUntil: now + settings.leaseDuration, limits })
      for (const record of claimed) {
        const done = step(record).pipe(Effect.tap(remember), Effect.ensuring(wakeups.offer()))
        if (isSyncCall(record) && now < record.deadlineAt) {
          yield* FiberSet.run(calls, done)
        } else {
          yield* Ref.update(inflight, (n) => n + 1)
          yield* FiberSet.run(steps, Effect.ensuring(done, Ref.update(inflight, (n) => n - 1)))
        }
      }
      // A full batch: more may be due at once.
      if (claimed.length === free) yield* wakeups.offer()
      return { at: now, claimed: claimed.length }
    }).pipe(Effect.catchTag("StoreError", (error) => Effect.logError("engine: claiming due work failed", error).pipe(Effect.as(undefined))))

    // Sleep until the earliest due time this engine knows of, a wake-up (a submit, a step
    // done), or the periodic scan, the safety net for work written by other workers.
    const idle = (claimedAt: number | undefined) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const scan = Duration.toMillis(settings.pollInterval)
        // Without a free slot, a step that ends wakes the loop.
        if (claimedAt === undefined) return yield* Effect.race(Effect.sleep(Duration.millis(scan)), wakeups.take)
        // Due times the claim looked past were claimed by it; one reached since (while the
        // claim ran) is not, and the loop goes again at once.
        dueTimes.dropUntil(claimedAt)
        // Never before the due time (Loops.sleepUntil): a look a fraction of a millisecond
        // early finds nothing, and under the TestClock it went round at that instant forever.
        yield* Effect.race(Loops.sleepUntil(Math.min(now + scan, dueTimes.next), now), wakeups.take)
      })
    const spinGuard = yield* Loops.makeSpinGuard("engine")
    const loop = yield* claimAndRun.pipe(
      Effect.tap((claim) => spinGuard.round(claim !== undefined && claim.claimed > 0)),
      Effect.flatMap((claim) => idle(claim?.at)),
      Effect.forever,
      Effect.forkScoped,
      Effect.interruptible
    )

    // Stopping (runs before the loop is interrupted): claim nothing more, let the work in
    // flight finish within the grace period, interrupt the rest, and give its tasks back.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        yield* Ref.set(stopping, true)
        if (Duration.greaterThan(settings.shutdownGrace, Duration.zero)) {
          // Finalizers run uninterruptibly: the wait must be interruptible for its time limit to end it.
          yield* Effect.all([FiberSet.awaitEmpty(steps), FiberSet.awaitEmpty(calls)], { discard: true }).pipe(
            Effect.interruptible,
            Effect.timeoutOption(settings.shutdownGrace)
          )
        }
        yield* FiberSet.clear(steps)
        yield* FiberSet.clear(calls)
        if (settings.releaseOnStop) {
          yield* store.releaseLeases(worker).pipe(
            Effect.catchTag("StoreError", (error) => Effect.logWarning("engine: giving back leases failed; they expire", error))
          )
        }
      })
    )

    /** Running: the loop has not ended and the engine is not stopping. */
    const running = Effect.zipWith(Fiber.poll(loop), Ref.get(stopping), (ended, stop) => Option.isNone(ended) && !stop)
    return { wake: wakeups.offer().pipe(Effect.asVoid), running }
  })

/** The engine running in the background for the layer's lifetime; provides the wakeup nudge. */
export const layer = (
  options: Options = {}
): Layer.Layer<TaskEvents.TaskWakeup, never, TaskStore.TaskStore | Upstream.Upstream | Ids.Ids | ModelCatalog.ModelCatalog | TaskWrites.TaskWrites> =>
  Layer.scoped(TaskEvents.TaskWakeup, make(options))
