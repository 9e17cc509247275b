/**
 * How the scheduler's background loops wait, how they stay fair to the event loop, and the
 * time they hand the stores (`currentMillis`).
 *
 * Effect runs a fiber's work in microtasks and, since 3.20, counts how deep that drain has
 * gone per fiber: only a drain that stays busy 2,048 rounds in a row hands over to a timer.
 * A loop that forks each round (a `race` of a sleep and a wake-up forks two fibers) starts
 * a new drain at every hop, so if it never suspends on a real timer or I/O it runs in
 * microtasks forever: no timer, socket or test timeout in the process runs again, and the
 * process sits at full CPU. That is how `npm test` hung (issue 20): under the TestClock a
 * wait of a fraction of a nanosecond became a zero Duration (Effect keeps fractions of a
 * millisecond as whole nanoseconds), a zero sleep completes at once, the claim at that
 * instant found nothing due yet, and the engine went round again. Two rules keep every loop
 * here off that path:
 *
 * - A wait until a time is whole milliseconds, rounded up: it never ends before the time
 *   it waits for, so the look after it finds what was due.
 * - A loop that goes round many times at one instant without doing anything gives the event
 *   loop a turn and says so: a bug of that kind then costs a log line, not a hung process.
 */
import { Cause, Clock, Duration, Effect, Scheduler, Schedule } from "effect"

/**
 * The Clock's time as the stores keep times: whole milliseconds, rounded up. Every time the
 * scheduler hands a store (a claim's look and lease, a step's write, a heartbeat) comes from
 * here. PostgreSQL's BIGINT columns refuse a fraction ("invalid input syntax for type bigint"),
 * and the TestClock answers one: it stops at every sleep's end, and a third of a heartbeat
 * window (1,666.666667 ms) is one. Rounded up, as `sleepUntil` is, so a claim never looks
 * before the time the Clock said and finds whatever was due by then.
 */
export const currentMillis: Effect.Effect<number> = Effect.map(Clock.currentTimeMillis, Math.ceil)

/** Sleeps until `at` (epoch milliseconds, by the Clock that read `now`), never waking before it. */
export const sleepUntil = (at: number, now: number): Effect.Effect<void> =>
  Effect.sleep(Duration.millis(Math.max(0, Math.ceil(at - now))))

/** Rounds in a row without progress at one instant before a loop gives the event loop a turn. */
const stalledRounds = 1_000

/**
 * One turn of the event loop (timers, I/O) before the fiber goes on: the fiber's next step is
 * scheduled on a timer instead of a microtask.
 */
export const eventLoopTurn: Effect.Effect<void> = Effect.yieldNow().pipe(Effect.withScheduler(Scheduler.timer(0)))

/**
 * Resumes in the event loop's next turn, after the I/O callbacks of this one (not a timer, so
 * no Clock): work that arrives together (submits read from several sockets, answers on
 * several connections) is then handled by one round of a loop instead of one round each.
 */
export const nextTurn: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/**
 * A guard for a loop named `name`: call `round(progressed)` once per round. After
 * `stalledRounds` rounds in a row at one instant of the Clock with no progress, it takes an
 * event-loop turn and logs a warning (once per stall).
 */
export const makeSpinGuard = (name: string) =>
  Effect.sync(() => {
    let rounds = 0
    let at = Number.NaN
    let warned = false
    const round = (progressed: boolean): Effect.Effect<void> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        if (progressed || now !== at) {
          at = now
          rounds = 0
          warned = false
          return Effect.void
        }
        if (++rounds < stalledRounds) return Effect.void
        rounds = 0
        const turn = eventLoopTurn
        if (warned) return turn
        warned = true
        return Effect.logWarning(`${name}: went round ${stalledRounds} times at one instant without progress; giving the event loop a turn`).pipe(
          Effect.zipRight(turn)
        )
      })
    return { round }
  })

/** The first pause before a loop that died starts again; it doubles at each death in a row. */
const restartPause: Duration.DurationInput = "1 second"
/** The longest pause between restarts. */
const maxRestartPause: Duration.DurationInput = "1 minute"
/** The doubling starts over this long after it began: a death after a quiet spell waits only the first pause. */
const restartReset: Duration.DurationInput = "10 minutes"

/**
 * Runs the background loop `name` for ever, restarting it after a pause when it dies.
 *
 * This is supervision, not control flow: the loops handle every failure they expect (a store
 * that is down is a typed StoreError, handled by name where it happens), so whatever reaches
 * here is a defect, a bug. The defect is not recovered from or hidden: it is logged with its
 * cause, and the round it broke is abandoned. But one bad task or one bad scan must not stop
 * all work on the node for good (the engine loop ending left /readyz saying "not running"
 * until a restart), so, as a process supervisor would, the loop starts afresh after a pause
 * (1 s, doubling to at most 1 min, starting over every 10 min): never a tight loop.
 * Interruption (the scope closing) ends the loop as before.
 */
export const supervised = <R>(name: string, loop: Effect.Effect<never, never, R>): Effect.Effect<never, never, R> =>
  loop.pipe(
    Effect.tapErrorCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.void
        : Effect.logError(`${name}: the loop died (a bug); it starts again after a pause`, cause)
    ),
    Effect.sandbox,
    Effect.retry({
      schedule: Schedule.exponential(restartPause).pipe(
        Schedule.union(Schedule.spaced(maxRestartPause)),
        Schedule.resetAfter(restartReset)
      ),
      while: (cause) => !Cause.isInterruptedOnly(cause)
    }),
    Effect.unsandbox
  )
