/**
 * The lifecycle engine (DESIGN.md section 5). All state lives in the TaskStore: a worker
 * claims due tasks with a lease, runs one step, writes the next state and due time.
 * A crashed worker's leases expire and another worker carries on.
 */
import { Ids, Motion, TaskEvents, TaskStore, Transition, Upstream } from "@mediagate/core"
import { Task } from "@mediagate/core"
import type { UpstreamError } from "@mediagate/core"
import { Clock, Duration, Effect, Either, Fiber, FiberSet, Layer, Option, Queue, Ref } from "effect"

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
  /** How often an accepted async job is polled. Default 2 s. */
  readonly upstreamPollInterval?: Duration.DurationInput
  /**
   * Longest wait for one call to a synchronous upstream. A task whose worker died during
   * the call is taken up again this long after the call began. Default 2 min.
   */
  readonly syncCallTimeout?: Duration.DurationInput
  /**
   * While a synchronous call runs, the worker keeps the task's due time this far ahead,
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
  upstreamPollInterval: Duration.toMillis(options.upstreamPollInterval ?? "2 seconds"),
  syncCallTimeout: Duration.toMillis(options.syncCallTimeout ?? "2 minutes"),
  heartbeatWindow: Duration.toMillis(options.heartbeatWindow ?? "15 seconds")
})

/** Runs one step of one claimed task. Exported for tests of single steps. */
export const makeStep = (options: Options = {}): Effect.Effect<
  (record: Task.TaskRecord) => Effect.Effect<Task.TaskRecord>,
  never,
  TaskStore.TaskStore | Upstream.Upstream | Ids.Ids
> =>
  Effect.gen(function*() {
    const settings = resolve(options)
    const store = yield* TaskStore.TaskStore
    const upstream = yield* Upstream.Upstream
    const ids = yield* Ids.Ids

    /** A terminal task with a callBackUrl owes a callback, written with the transition. */
    const callbacksFor = (record: Task.TaskRecord) =>
      Task.isTerminal(record.status) && record.callBackUrl !== null
        ? Effect.map(ids.token(12), (token): ReadonlyArray<TaskStore.CallbackRow> => [
          { id: `msg_${token}`, taskId: record.id, url: record.callBackUrl!, createdAt: record.updatedAt }
        ])
        : Effect.succeed([])

    const write = (current: Task.TaskRecord, next: Either.Either<Task.TaskRecord, unknown>) =>
      Either.match(next, {
        onLeft: (error) => Effect.logWarning("engine: transition refused", error).pipe(Effect.as(current)),
        onRight: (record) =>
          callbacksFor(record).pipe(
            Effect.flatMap((callbacks) => store.update(record, current.version, callbacks)),
            Effect.as(record),
            Effect.catchTag("TaskConflict", () =>
              Effect.logInfo(`engine: task ${current.id} changed under us; leaving it`).pipe(Effect.as(current)))
          )
      })

    const fail = (record: Task.TaskRecord, error: UpstreamError, now: number) =>
      error.retryable
        ? write(record, Transition.reschedule(record, now + settings.retryDelay))
        : record.job.fallbackModel !== null
        // motion fallback: the same request on the fallback model; the task stays non-terminal.
        ? write(record, Transition.reschedule(record, now, { job: Motion.fallbackJob(record.job, error.message), upstreamId: null }))
        : write(record, Transition.apply(record, { to: "FAILURE", reason: error.reason, message: error.message }, now))

    const timeOut = (record: Task.TaskRecord, now: number) =>
      write(record, Transition.apply(record, { to: "TIMEOUT", message: "the model's deadline passed" }, now))

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

    const runSync = (claimed: Task.TaskRecord) =>
      Effect.gen(function*() {
        const started = yield* Clock.currentTimeMillis
        const budget = Math.min(claimed.deadlineAt - started, settings.syncCallTimeout)
        const current = yield* Ref.make(claimed)
        const beating = yield* Effect.fork(heartbeat(current))
        const outcome = yield* upstream.submit(claimed.job, { taskId: claimed.id }).pipe(
          Effect.either,
          Effect.timeoutOption(Duration.millis(Math.max(0, budget)))
        )
        yield* Fiber.interrupt(beating)
        const record = yield* Ref.get(current)
        const now = yield* Clock.currentTimeMillis
        if (Option.isNone(outcome)) {
          // Past the deadline: TIMEOUT. A call that merely took too long is tried again.
          return now >= record.deadlineAt
            ? yield* timeOut(record, now)
            : yield* write(record, Transition.reschedule(record, now))
        }
        if (Either.isLeft(outcome.value)) return yield* fail(record, outcome.value.left, now)
        const submitted = outcome.value.right
        return submitted._tag === "Completed"
          ? yield* write(record, Transition.apply(record, { to: "SUCCESS", result: submitted.result }, now))
          // A sync upstream that answered with a job id after all: poll it like an async one.
          : yield* write(record, Transition.reschedule(record, now + settings.upstreamPollInterval, { upstreamId: submitted.upstreamId }))
      })

    const submitAsync = (record: Task.TaskRecord, now: number) =>
      upstream.submit(record.job, { taskId: record.id }).pipe(
        Effect.matchEffect({
          onFailure: (error) => fail(record, error, now),
          onSuccess: (outcome) =>
            outcome._tag === "Completed"
              ? write(record, Transition.apply(record, { to: "SUCCESS", result: outcome.result }, now))
              : record.status === "PENDING"
              ? write(
                record,
                Transition.apply(record, {
                  to: "SUBMITTED",
                  upstreamId: outcome.upstreamId,
                  dueAt: now + settings.upstreamPollInterval
                }, now)
              )
              // Resubmitted after a fallback: same status, new upstream job.
              : write(record, Transition.reschedule(record, now + settings.upstreamPollInterval, { upstreamId: outcome.upstreamId }))
        })
      )

    const poll = (record: Task.TaskRecord, upstreamId: Ids.UpstreamId, now: number) =>
      upstream.poll(upstreamId, record.job).pipe(
        Effect.matchEffect({
          onFailure: (error) => fail(record, error, now),
          onSuccess: (outcome) => {
            if (outcome._tag === "Completed") {
              return write(record, Transition.apply(record, { to: "SUCCESS", result: outcome.result }, now))
            }
            const dueAt = now + settings.upstreamPollInterval
            return record.status === "SUBMITTED"
              ? write(record, Transition.apply(record, { to: "PROCESSING", dueAt }, now))
              : write(record, Transition.reschedule(record, dueAt))
          }
        })
      )

    return (record: Task.TaskRecord): Effect.Effect<Task.TaskRecord, never> =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        if (now >= record.deadlineAt) return yield* timeOut(record, now)
        if (record.upstreamId !== null) return yield* poll(record, record.upstreamId, now)
        if (!record.job.sync) return yield* submitAsync(record, now)
        // A sync upstream answers the call itself: the task is PROCESSING during the call and
        // its due time stays ahead while this worker lives (heartbeat), so no other worker
        // starts it twice, and another takes it up soon after this one dies.
        const retryAt = Math.min(record.deadlineAt, now + settings.heartbeatWindow)
        const processing = record.status === "PENDING"
          ? yield* write(record, Transition.apply(record, { to: "PROCESSING", dueAt: retryAt }, now))
          : yield* write(record, Transition.reschedule(record, retryAt))
        return processing.status === "PROCESSING" ? yield* runSync(processing) : processing
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

    const claimAndRun = Effect.gen(function*() {
      const free = settings.concurrency - (yield* Ref.get(inflight))
      if (free <= 0) return
      const now = yield* Clock.currentTimeMillis
      const claimed = yield* store.claimDue({ now, limit: free, worker, leaseUntil: now + settings.leaseDuration })
      for (const record of claimed) {
        yield* Ref.update(inflight, (n) => n + 1)
        yield* FiberSet.run(
          fibers,
          step(record).pipe(Effect.ensuring(Ref.update(inflight, (n) => n - 1).pipe(Effect.zipRight(wakeups.offer()))))
        )
      }
    }).pipe(Effect.catchAllDefect((defect) => Effect.logError("engine: claiming due work failed", defect)))

    yield* claimAndRun.pipe(
      Effect.zipRight(Effect.race(Effect.sleep(settings.pollInterval), wakeups.take)),
      Effect.forever,
      Effect.forkScoped,
      Effect.interruptible
    )

    return { wake: wakeups.offer().pipe(Effect.asVoid) }
  })

/** The engine running in the background for the layer's lifetime; provides the wakeup nudge. */
export const layer = (
  options: Options = {}
): Layer.Layer<TaskEvents.TaskWakeup, never, TaskStore.TaskStore | Upstream.Upstream | Ids.Ids> =>
  Layer.scoped(TaskEvents.TaskWakeup, make(options))
