/**
 * The lifecycle engine (DESIGN.md section 5). All state lives in the TaskStore: a worker
 * claims due tasks with a lease, runs one step, writes the next state and due time.
 * A crashed worker's leases expire and another worker carries on.
 */
import type { IllegalTransition, TaskConflict } from "@mediagate/core"
import { Attempt, Ids, ModelCatalog, Task, TaskEvents, TaskStore, TaskWrites, Transition, Upstream, UpstreamError } from "@mediagate/core"
import { Clock, Duration, Effect, Either, Fiber, FiberSet, Layer, Option, Queue, Random, Ref } from "effect"

/** Engine settings. */
export interface Options {
  /** How often the engine looks for due work when nothing wakes it. Default 1 s. */
  readonly pollInterval?: Duration.DurationInput
  /** Tasks worked on at once by this engine. Default 16. */
  readonly concurrency?: number
  /** How long a claim holds before another worker may take the task. Default 15 s: a step is short. */
  readonly leaseDuration?: Duration.DurationInput
  /** How long after a retryable upstream error the step is tried again. Default 5 s. */
  readonly retryDelay?: Duration.DurationInput
  /**
   * The longest wait between two polls of an accepted async job. Polls start soon after the
   * upstream accepted the job (`firstPollDelay`) and back off to half the time the task has
   * run so far, up to this cap. Default: a 36th of the model's deadline, between 1 s and
   * 10 min (about 17 s for a 10-minute image model, 10 min for motion's 6 hours).
   */
  readonly upstreamPollInterval?: Duration.DurationInput
  /** The first poll's delay after the upstream accepted a job. Default 50 ms. */
  readonly firstPollDelay?: Duration.DurationInput
  /**
   * Longest wait for an asynchronous upstream's submit or poll call; shorter than the
   * lease, so a hanging call ends (as a retryable failure) before anyone else may take the
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
   * While an upstream call runs, the worker keeps the task's due time this far ahead,
   * renewing it every third of the window; if the worker dies, another takes the task up
   * once the window has passed. Default 15 s.
   */
  readonly heartbeatWindow?: Duration.DurationInput
}

const resolve = (options: Options) => ({
  pollInterval: Duration.decode(options.pollInterval ?? "1 second"),
  concurrency: options.concurrency ?? 16,
  leaseDuration: Duration.toMillis(options.leaseDuration ?? "15 seconds"),
  retryDelay: Duration.toMillis(options.retryDelay ?? "5 seconds"),
  upstreamPollInterval: options.upstreamPollInterval === undefined ? undefined : Duration.toMillis(options.upstreamPollInterval),
  firstPollDelay: Duration.toMillis(options.firstPollDelay ?? "50 millis"),
  upstreamCallTimeout: Duration.toMillis(options.upstreamCallTimeout ?? "10 seconds"),
  syncCallTimeout: Duration.toMillis(options.syncCallTimeout ?? "2 minutes"),
  heartbeatWindow: Duration.toMillis(options.heartbeatWindow ?? "15 seconds")
})

/** Runs one step of one claimed task. Exported for tests of single steps. */
export const makeStep = (options: Options = {}): Effect.Effect<
  (record: Task.TaskRecord) => Effect.Effect<Task.TaskRecord>,
  never,
  TaskStore.TaskStore | Upstream.Upstream | Ids.Ids | ModelCatalog.ModelCatalog
> =>
  Effect.gen(function*() {
    const settings = resolve(options)
    const store = yield* TaskStore.TaskStore
    const upstream = yield* Upstream.Upstream
    const catalog = yield* ModelCatalog.ModelCatalog
    const writes = yield* TaskWrites.make

    /**
     * When to poll an accepted job next: soon at first, then half the time the task has run so
     * far (so a job found done is at most half again as late as it took), capped, with ±10%
     * jitter so that jobs accepted together do not poll together.
     */
    const nextPollAt = (record: Task.TaskRecord, now: number) =>
      Effect.map(Random.nextRange(0.9, 1.1), (jitter) => {
        const cap = settings.upstreamPollInterval ??
          Math.min(600_000, Math.max(1_000, (record.deadlineAt - record.createdAt) / 36))
        const delay = Math.min(cap, Math.max(settings.firstPollDelay, (now - record.createdAt) / 2))
        return now + Math.round(delay * jitter)
      })

    /** Writes through the one write path; a refused transition or a lost race leaves the task as it is. */
    const write = (current: Task.TaskRecord, next: Effect.Effect<Task.TaskRecord, IllegalTransition | TaskConflict>) =>
      next.pipe(
        Effect.catchTags({
          IllegalTransition: (error) => Effect.logWarning("engine: transition refused", error).pipe(Effect.as(current)),
          TaskConflict: () => Effect.logInfo(`engine: task ${current.id} changed under us; leaving it`).pipe(Effect.as(current))
        })
      )

    const complete = (record: Task.TaskRecord, result: Task.TaskResult, now: number) =>
      write(record, writes.apply(record, { to: "SUCCESS", result }, now))

    const timeOut = (record: Task.TaskRecord, now: number) =>
      write(record, writes.apply(record, { to: "TIMEOUT", message: "the model's deadline passed" }, now))

    /** The model's own fallback, reached through the catalog by the model the client asked for. */
    const fallbackOf = (record: Task.TaskRecord) => {
      const spec = catalog.find(String(record.input["model"]))
      return (job: Task.UpstreamJob, failure: string) =>
        Option.isSome(spec) && spec.value.fallback !== undefined ? spec.value.fallback(job, failure) : undefined
    }

    const fail = (record: Task.TaskRecord, error: UpstreamError, now: number) => {
      const decision = Attempt.decide({ record, error, now, retryDelay: settings.retryDelay, fallback: fallbackOf(record) })
      switch (decision._tag) {
        case "Retry":
          return write(record, writes.reschedule(record, decision.at))
        case "FallBack":
          // The same request on the fallback model; the task stays non-terminal.
          return write(record, writes.reschedule(record, now, { job: decision.job, upstreamId: null }))
        case "Fail":
          return write(
            record,
            writes.apply(record, { to: "FAILURE", reason: decision.error.reason, message: decision.error.message }, now)
          )
      }
    }

    /** Keeps pushing the task's due time ahead while this worker is busy with it. */
    const heartbeat = (current: Ref.Ref<Task.TaskRecord>) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const latest = yield* Ref.get(current)
        const next = Transition.reschedule(latest, Math.min(latest.deadlineAt, now + settings.heartbeatWindow))
        if (Either.isLeft(next)) return
        // Uninterruptible: the stored version and the Ref must never disagree.
        yield* store.update(next.right, latest.version).pipe(
          Effect.zipRight(Ref.set(current, next.right)),
          Effect.catchAllCause((cause) => Effect.logWarning(`engine: heartbeat of task ${latest.id} failed`, cause)),
          Effect.uninterruptible
        )
      }).pipe(Effect.delay(Duration.millis(settings.heartbeatWindow / 3)), Effect.forever)

    /**
     * Runs an upstream call for `claimed` within `limit` (never past the deadline) while a
     * heartbeat keeps the task for this worker; answers the task as it now stands and the
     * call's outcome, none when the call ran out of time.
     */
    const guarded = <A>(claimed: Task.TaskRecord, limit: number, call: Effect.Effect<A, UpstreamError>) =>
      Effect.gen(function*() {
        const started = yield* Clock.currentTimeMillis
        const budget = Math.max(0, Math.min(claimed.deadlineAt - started, limit))
        const current = yield* Ref.make(claimed)
        const beating = yield* Effect.fork(heartbeat(current))
        const outcome = yield* call.pipe(Effect.either, Effect.timeoutOption(Duration.millis(budget)))
        yield* Fiber.interrupt(beating)
        return [yield* Ref.get(current), outcome] as const
      })

    /** A call that ran out of time: TIMEOUT past the deadline, otherwise tried again like a retryable failure. */
    const ranOut = (record: Task.TaskRecord, now: number, limit: number) =>
      now >= record.deadlineAt
        ? timeOut(record, now)
        : fail(
          record,
          new UpstreamError({ message: `the upstream did not answer within ${limit} ms`, reason: null, retryable: true }),
          now
        )

    const runSync = (claimed: Task.TaskRecord) =>
      Effect.gen(function*() {
        const [record, outcome] = yield* guarded(claimed, settings.syncCallTimeout, upstream.submit(claimed.job, { taskId: claimed.id }))
        const now = yield* Clock.currentTimeMillis
        if (Option.isNone(outcome)) {
          // Past the deadline: TIMEOUT. A call that merely took too long is tried again at once.
          return now >= record.deadlineAt ? yield* timeOut(record, now) : yield* write(record, writes.reschedule(record, now))
        }
        if (Either.isLeft(outcome.value)) return yield* fail(record, outcome.value.left, now)
        const submitted = outcome.value.right
        return submitted._tag === "Completed"
          ? yield* complete(record, submitted.result, now)
          // A sync upstream that answered with a job id after all: poll it like an async one.
          : yield* write(record, writes.reschedule(record, yield* nextPollAt(record, now), { upstreamId: submitted.upstreamId }))
      })

    /** An asynchronous upstream's call (submit or poll), within its time limit; `onAnswer` takes its answer. */
    const callAsync = <A>(
      claimed: Task.TaskRecord,
      call: Effect.Effect<A, UpstreamError>,
      onAnswer: (record: Task.TaskRecord, answer: A, now: number) => Effect.Effect<Task.TaskRecord>
    ) =>
      Effect.gen(function*() {
        const limit = settings.upstreamCallTimeout
        const [record, outcome] = yield* guarded(claimed, limit, call)
        const now = yield* Clock.currentTimeMillis
        if (Option.isNone(outcome)) return yield* ranOut(record, now, limit)
        if (Either.isLeft(outcome.value)) return yield* fail(record, outcome.value.left, now)
        return yield* onAnswer(record, outcome.value.right, now)
      })

    const submitAsync = (claimed: Task.TaskRecord) =>
      callAsync(claimed, upstream.submit(claimed.job, { taskId: claimed.id }), (record, submitted, now) =>
        submitted._tag === "Completed"
          ? complete(record, submitted.result, now)
          : Effect.flatMap(nextPollAt(record, now), (dueAt) =>
            record.status === "PENDING"
              ? write(record, writes.apply(record, { to: "SUBMITTED", upstreamId: submitted.upstreamId, dueAt }, now))
              // Resubmitted after a fallback: same status, new upstream job.
              : write(record, writes.reschedule(record, dueAt, { upstreamId: submitted.upstreamId }))))

    const poll = (claimed: Task.TaskRecord, upstreamId: Ids.UpstreamId) =>
      callAsync(claimed, upstream.poll(upstreamId, claimed.job), (record, polled, now) =>
        polled._tag === "Completed"
          ? complete(record, polled.result, now)
          : Effect.flatMap(nextPollAt(record, now), (dueAt) =>
            record.status === "SUBMITTED"
              ? write(record, writes.apply(record, { to: "PROCESSING", dueAt }, now))
              : write(record, writes.reschedule(record, dueAt))))

    return (record: Task.TaskRecord): Effect.Effect<Task.TaskRecord, never> =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        if (now >= record.deadlineAt) return yield* timeOut(record, now)
        if (record.upstreamId !== null) return yield* poll(record, record.upstreamId)
        if (!record.job.sync) return yield* submitAsync(record)
        // A sync upstream answers the call itself: the task is PROCESSING during the call and
        // its due time stays ahead while this worker lives (heartbeat), so no other worker
        // starts it twice, and another takes it up soon after this one dies.
        const retryAt = Math.min(record.deadlineAt, now + settings.heartbeatWindow)
        const processing = record.status === "PENDING"
          ? yield* write(record, writes.apply(record, { to: "PROCESSING", dueAt: retryAt }, now))
          : yield* write(record, writes.reschedule(record, retryAt))
        return processing.status === "PROCESSING" && processing.version !== record.version
          ? yield* runSync(processing)
          : processing
      }).pipe(
        // A store failure is a defect: log it; the lease expires and the task is tried again.
        Effect.catchAllDefect((defect) => Effect.logError(`engine: step of task ${record.id} failed`, defect).pipe(Effect.as(record))),
        Effect.withSpan("Engine.step", { attributes: { taskId: record.id, status: record.status } })
      )
  })

/** The engine: a loop that claims due work and runs it, woken early by new submissions. */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const settings = resolve(options)
    const store = yield* TaskStore.TaskStore
    const ids = yield* Ids.Ids
    const step = yield* makeStep(options)
    const worker = `worker-${yield* ids.token(6)}`
    const wakeups = yield* Queue.sliding<void>(1)
    const inflight = yield* Ref.make(0)
    const fibers = yield* FiberSet.make<Task.TaskRecord>()
    /** The earliest due time a step of this engine left behind (a poll 50 ms away): the loop wakes for it. */
    const nextDue = yield* Ref.make(Number.POSITIVE_INFINITY)
    const remember = (record: Task.TaskRecord) =>
      record.dueAt === null ? Effect.void : Ref.update(nextDue, (due) => Math.min(due, record.dueAt!))

    const claimAndRun = Effect.gen(function*() {
      const free = settings.concurrency - (yield* Ref.get(inflight))
      if (free <= 0) return
      const now = yield* Clock.currentTimeMillis
      const claimed = yield* store.claimDue({ now, limit: free, worker, leaseUntil: now + settings.leaseDuration })
      for (const record of claimed) {
        yield* Ref.update(inflight, (n) => n + 1)
        yield* FiberSet.run(
          fibers,
          step(record).pipe(
            Effect.tap(remember),
            Effect.ensuring(Ref.update(inflight, (n) => n - 1).pipe(Effect.zipRight(wakeups.offer())))
          )
        )
      }
    }).pipe(Effect.catchAllDefect((defect) => Effect.logError("engine: claiming due work failed", defect)))

    // Sleep until the earliest due time this engine knows of, a wake-up (a submit, a step
    // done), or the periodic scan, the safety net for work written by other workers.
    const idle = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      // A due time already reached was claimed by the round that just ran.
      const due = yield* Ref.modify(nextDue, (due) => (due <= now ? [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY] : [due, due]))
      const wait = Math.max(0, Math.min(Duration.toMillis(settings.pollInterval), due - now))
      yield* Effect.race(Effect.sleep(Duration.millis(wait)), wakeups.take)
    })
    yield* claimAndRun.pipe(
      Effect.zipRight(idle),
      Effect.forever,
      Effect.forkScoped,
      Effect.interruptible
    )

    return { wake: wakeups.offer().pipe(Effect.asVoid) }
  })

/** The engine running in the background for the layer's lifetime; provides the wakeup nudge. */
export const layer = (
  options: Options = {}
): Layer.Layer<TaskEvents.TaskWakeup, never, TaskStore.TaskStore | Upstream.Upstream | Ids.Ids | ModelCatalog.ModelCatalog> =>
  Layer.scoped(TaskEvents.TaskWakeup, make(options))
