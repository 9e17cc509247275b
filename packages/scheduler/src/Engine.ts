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
 * `maxRunningPerProvider`, and route targets' own limits, `Upstream.targetLimits`).
 */
import type { Task } from "@mediagate/core"
import { Ids, ModelCatalog, TaskEvents, TaskStore, TaskWrites, Upstream } from "@mediagate/core"
import { Clock, Duration, Effect, Exit, Fiber, FiberSet, Layer, Option } from "effect"
import { DueTimes } from "./DueTimes.js"
import * as LoopWait from "./LoopWait.js"
import * as Loops from "./Loops.js"
import type { Options } from "./Settings.js"
import { resolve } from "./Settings.js"
import * as Step from "./Step.js"
import * as TimeLimits from "./TimeLimits.js"

export type { Options } from "./Settings.js"

/** The running limits these options give (defaults filled in), as the providers page shows them (`Insights.RunningLimits`). */
export const runningLimits = (options: Options) => {
  const settings = resolve(options)
  return { maxRunning: settings.maxRunning, perProvider: settings.maxRunningPerProvider }
}

/**
 * True for a claimed task whose step is a synchronous upstream's call (it runs beside the
 * steps); not for one whose job finished and whose results wait to be copied (a step).
 */
export const isSyncCall = Step.isSyncCall

/** Runs one step of one claimed task as `worker`. Exported for tests of single steps. */
export const makeStep = Step.make

/** The engine: a loop that claims due work and runs it, woken early by new submissions. */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const settings = resolve(options)
    const store = yield* TaskStore.TaskStore
    const ids = yield* Ids.Ids
    const worker = `worker-${yield* ids.token(6)}`
    // One watchdog for the engine: its calls' time limits and heartbeats, and its loop's alarms.
    const timeLimits = yield* TimeLimits.make
    const step = yield* Step.make(options, worker, timeLimits)
    const wait = yield* LoopWait.make(timeLimits)
    // Plain variables: only this engine's fibers touch them, each change in one step.
    /** Steps running (not sync calls): at most `concurrency`. */
    let inflight = 0
    let stopping = false
    /** Steps (short, `concurrency` at once) and sync calls (beside them, bounded by the running limit). */
    const steps = yield* FiberSet.make<Task.TaskRecord>()
    const calls = yield* FiberSet.make<Task.TaskRecord>()
    /** The due times this engine's steps left behind (a poll 20 ms away): the loop wakes for each. */
    const dueTimes = new DueTimes()
    /**
     * What follows a step or call, however it ended: the due time it left behind remembered,
     * its slot (a step's) freed, and the loop woken to claim again.
     */
    const ended = (slot: boolean) => (exit: Exit.Exit<Task.TaskRecord>) => {
      if (slot) inflight--
      if (Exit.isSuccess(exit) && exit.value.dueAt !== null) dueTimes.add(exit.value.dueAt)
      return wake
    }
    const wake = wait.wake
    const endedStep = ended(true)
    const endedCall = ended(false)
    const perProvider = settings.maxRunningPerProvider
    // Route targets with limits of their own count under their names and their providers'.
    const targets = (yield* Upstream.Upstream).targetLimits ?? {}
    const limits = {
      running: settings.maxRunning,
      perAccount: settings.maxRunningPerAccount,
      // A target's own limit first, then its name's in the settings, then theirs for "*".
      perProvider: {
        ...perProvider,
        ...Object.fromEntries(Object.entries(targets).map(([target, { maxRunning }]) => [target, maxRunning]))
      },
      within: Object.fromEntries(Object.entries(targets).map(([target, { provider }]) => [target, provider]))
    }

    /** Claims and starts due work; answers the time the claim looked at and what it took, none when it did not claim (no free slot). */
    const claimAndRun: Effect.Effect<{ readonly at: number; readonly claimed: number } | undefined> = Effect.gen(function*() {
      if (stopping) return undefined
      const free = settings.concurrency - inflight
      if (free <= 0) return undefined
      // Whole milliseconds (Loops.currentMillis): a claim at a fraction failed on PostgreSQL,
      // and the loop, sleeping a scan from that fraction, failed again at the next.
      const now = yield* Loops.currentMillis
      const claimed = yield* store.claimDue({ now, limit: free, worker, leaseUntil: now + settings.leaseDuration, limits })
      for (const record of claimed) {
        if (Step.isSyncCall(record) && now < record.deadlineAt) {
          yield* FiberSet.run(calls, Effect.onExit(step(record), endedCall))
        } else {
          inflight++
          yield* FiberSet.run(steps, Effect.onExit(step(record), endedStep))
        }
      }
      // A full batch: more may be due at once.
      if (claimed.length === free) yield* wake
      return { at: now, claimed: claimed.length }
    }).pipe(Effect.catchTag("StoreError", (error) => Effect.logError("engine: claiming due work failed", error).pipe(Effect.as(undefined))))

    // Sleep until the earliest due time this engine knows of, a wake-up (a submit, a step
    // done), or the periodic scan, the safety net for work written by other workers. Woken,
    // the claim waits for the event loop's next turn (LoopWait), so the submits and step ends
    // that arrive together are claimed in one round, not one round each.
    const idle = (claimedAt: number | undefined) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const scan = Duration.toMillis(settings.pollInterval)
        // Without a free slot, a step that ends wakes the loop.
        if (claimedAt === undefined) return yield* wait.until(now + scan)
        // Due times the claim looked past were claimed by it; one reached since (while the
        // claim ran) is not, and the loop goes again at once.
        dueTimes.dropUntil(claimedAt)
        // Never before the due time (LoopWait): a look a fraction of a millisecond early finds
        // nothing, and under the TestClock it went round at that instant forever.
        yield* wait.until(Math.min(now + scan, dueTimes.next))
      })
    const spinGuard = yield* Loops.makeSpinGuard("engine")
    const loop = yield* claimAndRun.pipe(
      Effect.tap((claim) => spinGuard.round(claim !== undefined && claim.claimed > 0)),
      Effect.flatMap((claim) => idle(claim?.at)),
      Effect.forever,
      // A bug in a claim must not stop this node's work for good (Loops.supervised).
      (rounds) => Loops.supervised("engine", rounds),
      Effect.forkScoped,
      Effect.interruptible
    )

    // Stopping (runs before the loop is interrupted): claim nothing more, let the work in
    // flight finish within the grace period, interrupt the rest, and give its tasks back.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        stopping = true
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
    const running = Effect.map(Fiber.poll(loop), (ended) => Option.isNone(ended) && !stopping)
    return { wake, running }
  })

/** The engine running in the background for the layer's lifetime; provides the wakeup nudge. */
export const layer = (
  options: Options = {}
): Layer.Layer<TaskEvents.TaskWakeup, never, TaskStore.TaskStore | Upstream.Upstream | Ids.Ids | ModelCatalog.ModelCatalog | TaskWrites.TaskWrites> =>
  Layer.scoped(TaskEvents.TaskWakeup, make(options))
