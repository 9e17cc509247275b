/**
 * One step of a task the engine claimed (DESIGN.md section 5), carried out as `Lifecycle`
 * decides it: the claim is an event, and so is what each call found (`StepCalls`: a submit or
 * a poll of its upstream job, a synchronous upstream's call, the copy of a finished job's
 * results). Each answer's write goes through the one write path; what follows it (the next
 * call, the upstream's cancel, a re-read) runs once the write went through. Nothing here decides.
 */
import type { IllegalTransition, StoreError, TaskConflict } from "@mediagate/core"
import { Attempt, Lifecycle, Metrics, ModelCatalog, Task, TaskStore, TaskWrites, Upstream } from "@mediagate/core"
import type { Scope } from "effect"
import { Cause, Effect, Option } from "effect"
import * as Loops from "./Loops.js"
import type { Options } from "./Settings.js"
import { resolve } from "./Settings.js"
import * as StepCalls from "./StepCalls.js"
import type * as TimeLimits from "./TimeLimits.js"

/**
 * True for a claimed task whose step is a synchronous upstream's call (it runs beside the
 * steps); not for one whose job finished and whose results wait to be copied (a step).
 */
export const isSyncCall = (record: Task.TaskRecord): boolean =>
  record.job.sync && record.upstreamId === null && Attempt.awaitingCopy(record) === undefined

/** Runs one step of one claimed task as `worker`; its calls' time limits are kept by `timeLimits` when given (the engine's). */
export const make = (options: Options = {}, worker = "worker", timeLimits?: TimeLimits.TimeLimits): Effect.Effect<
  (record: Task.TaskRecord) => Effect.Effect<Task.TaskRecord>,
  never,
  TaskStore.TaskStore | Upstream.Upstream | ModelCatalog.ModelCatalog | TaskWrites.TaskWrites | Scope.Scope
> =>
  Effect.gen(function*() {
    const settings = resolve(options)
    const store = yield* TaskStore.TaskStore
    const writes = yield* TaskWrites.TaskWrites
    const calls = yield* StepCalls.make(settings, worker, timeLimits)

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

    /** What an answer owes before its write: the warning of a failed call, an alarm, its counts. */
    const report = (record: Task.TaskRecord, answer: Lifecycle.Answer) =>
      answer.failure === undefined && answer.alarm === undefined && answer.count === undefined ? Effect.void : Effect.gen(function*() {
        const error = answer.failure
        if (error !== undefined) {
          // The step's annotations (taskId, model) come with it.
          yield* Effect.logWarning(`engine: upstream call of task ${record.id} failed: ${error.message}`).pipe(
            Effect.annotateLogs({
              reason: error.reason ?? "none",
              retryable: error.retryable,
              ...(error.partialResult === undefined ? {} : { kept: error.partialResult.urls.length })
            })
          )
        }
        if (answer.alarm !== undefined) yield* Effect.logError(answer.alarm)
        if (answer.count?.resubmit !== undefined) yield* Metrics.upstreamResubmit(answer.count.resubmit)
        if (answer.count?.copy !== undefined) yield* Metrics.resultCopy(answer.count.copy)
      })

    /** Carries out `answer` for `record` at `now`: its write, then what follows it. */
    const carry = (record: Task.TaskRecord, answer: Lifecycle.Answer, now: number): Effect.Effect<Task.TaskRecord, StoreError> =>
      Effect.gen(function*() {
        yield* report(record, answer)
        const change = answer.write
        // A new task's creation answers a submit, never a step's event.
        if (change._tag === "Create") return yield* Effect.dieMessage(`engine: a creation of task ${record.id} answered to a step`)
        const written = change._tag === "None"
          ? record
          : yield* write(
            record,
            change._tag === "Apply" ? writes.apply(record, change.change, now, change.options) : writes.reschedule(record, change.dueAt, change.patch)
          )
        // A write refused or lost to a race: nothing follows it.
        if (change._tag !== "None" && written.version === record.version) return written
        const then = answer.then
        switch (then._tag) {
          case "Submit":
            return yield* decided(yield* calls.submit(written))
          case "Poll":
            return yield* decided(yield* calls.poll(written, then.upstreamId))
          case "Copy":
            return yield* decided(yield* calls.copy(written, then.attempt))
          case "CancelUpstream":
            return yield* Effect.as(calls.cancelUpstream(record), written)
          case "Reread":
            return Option.getOrElse(yield* store.get(record.id), () => record)
          case "Done":
          case "AwaitStep":
          case "Wake":
          case "NotCancellable":
            return written
        }
      })

    /** Carries out Lifecycle's answer to what a call found. */
    const decided = (called: StepCalls.Called) => carry(called.record, Lifecycle.decide(called.record, called.event, called.now), called.now)

    return (record: Task.TaskRecord): Effect.Effect<Task.TaskRecord> =>
      Effect.gen(function*() {
        const now = yield* Loops.currentMillis
        const claimed: Lifecycle.Event = {
          _tag: "Claimed",
          hostsCopies: calls.hostsCopies,
          lease: { owner: worker, until: now + settings.heartbeatWindow },
          ...calls.named(record)
        }
        return yield* carry(record, Lifecycle.decide(record, claimed, now), now)
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
