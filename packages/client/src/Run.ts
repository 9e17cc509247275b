/**
 * Waiting for a task to end. The client follows the task's events stream
 * (`GET /api/v1/task/{id}/events`): the task at once, each change of status and each change
 * of progress as the server sends it, until the terminal status. A stream that breaks after
 * it delivered the task (a proxy's cut, a restart) is opened again after a pause of the
 * polling backoff; one that gives no task (an older server without it, a 429, an answer that
 * is not `text/event-stream`, nothing within `firstEventWait`) or goes silent longer than
 * `silenceLimit` leaves the client polling instead.
 *
 * Polling: one query answered at once, then long-poll queries (`GET /api/v1/task/{id}?wait=N`,
 * which the server holds until the task ends or N seconds pass), and polling with exponential
 * backoff while answers come back early without the end (a server that does not hold queries
 * answers at once). A 429 (the server holds only so many queries per key, and limits each
 * key's rate) is not an error here: the client stops asking for holds and polls with the same
 * backoff. Every pause is the Clock's.
 */
import type { Task } from "@mediagate/core"
import { Chunk, Clock, Duration, Effect, Option, Ref, Schedule, Stream } from "effect"
import { type ClientError, RunTimeout, TransportError } from "./CallErrors.js"

/** How `run` and `waitFor` wait. */
export interface RunOptions {
  /**
   * Called with the task on the first answer, on each change of status the client sees, and
   * on each change of its `progress` (the second argument, also `task.progress`; null when
   * nothing is known), as the events stream tells them. Polling (a server without the
   * stream), queries are held at most `progressWait` while the task reports progress so that
   * changes show; without `onProgress` holds stay as long as `wait`.
   */
  readonly onProgress?: (task: Task.Task, progress: Task.WireProgress | null) => void | Effect.Effect<void>
  /** Give up (RunTimeout) when the task has not ended this long after waiting began (just after the submit, for `run`). Default: wait for its end. */
  readonly timeout?: Duration.DurationInput
  /** Polling, how long each query asks the server to hold the answer (whole seconds, 1 to 60). Default 20 seconds. */
  readonly wait?: Duration.DurationInput
}

/** Statuses a task never leaves. */
export const terminalStatuses: ReadonlySet<string> = new Set(["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"])

/** The default hold asked of each query. */
export const defaultWait = Duration.seconds(20)

/**
 * The pauses between queries answered early and unfinished: 0.5 s doubling up to 5 s.
 * A held answer, or a change of status, starts it again from 0.5 s.
 */
export const pollBackoff: Schedule.Schedule<Duration.Duration> = Schedule.exponential("500 millis", 2).pipe(
  Schedule.modifyDelay((_, delay) => Duration.min(delay, Duration.seconds(5)))
)

/**
 * The longest hold asked, polling, while a task reports progress and the caller follows it: a
 * held query answers only at the end, so a long hold would hide every change until then.
 */
export const progressWait = 2

/** How long an events stream may take to give the task (the server sends it at once) before the client polls instead. */
export const firstEventWait = Duration.seconds(5)

/**
 * How long an events stream may stay silent (no event, no `: keep-alive` comment, which the
 * server sends every 15 s) before the client takes it for broken and opens it again.
 */
export const silenceLimit = Duration.seconds(40)

/** What the events stream tells: the task (`task` event), its status and progress (`progress` event), or that it is alive (a comment). */
export type Update =
  | { readonly _tag: "Task"; readonly task: Task.Task }
  | { readonly _tag: "Progress"; readonly status: Task.Task["status"]; readonly progress: Task.WireProgress | null }
  | { readonly _tag: "KeepAlive" }

/** The events stream of a task; fails when it cannot be opened or read. */
export type Events = (taskId: string) => Stream.Stream<Update, ClientError>

/** The server refused the query for now (too many held queries or requests for the key). */
const tooManyRequests = (error: ClientError): boolean => error._tag === "MediagateError" && error.status === 429

/** A query of the task; `wait` 0 asks for no hold. */
type Get = (taskId: string, options: { readonly wait: number }) => Effect.Effect<Task.Task, ClientError>

/** Follows `taskId` (its events stream when `events` is given, else queries) until it ends; answers the ended task. */
export const waitForEnd = (
  taskId: string,
  get: Get,
  options: RunOptions = {},
  events?: Events
): Effect.Effect<Task.Task, ClientError | RunTimeout> =>
  Effect.gen(function*() {
    const waitSeconds = Math.min(60, Math.max(1, Math.ceil(Duration.toSeconds(options.wait ?? defaultWait))))
    const lastSeen = yield* Ref.make(Option.none<Task.Task>())

    /** Keeps `task` as the last seen, and tells `onProgress` when its status or progress changed; answers whether its status changed. */
    const see = (task: Task.Task) =>
      Effect.gen(function*() {
        const previous = yield* Ref.getAndSet(lastSeen, Option.some(task))
        const changed = Option.match(previous, { onNone: () => true, onSome: (seen) => seen.status !== task.status })
        const progressed = Option.match(previous, {
          onNone: () => false,
          onSome: (seen) => (seen.progress?.updated_at ?? null) !== (task.progress?.updated_at ?? null)
        })
        if ((changed || progressed) && options.onProgress !== undefined) {
          const called = options.onProgress(task, task.progress ?? null)
          if (Effect.isEffect(called)) yield* called
        }
        return changed
      })

    /**
     * One connection to the events stream: answers the ended task, or how it stopped without
     * the end: whether it gave the task first (so it is worth opening again).
     */
    const connection = (open: Events) =>
      Effect.scoped(Effect.gen(function*() {
        const pull = yield* Stream.toPull(open(taskId))
        let delivered = false
        for (;;) {
          const limit = delivered ? silenceLimit : firstEventWait
          const chunk = yield* pull.pipe(
            Effect.timeoutFail({
              duration: limit,
              onTimeout: () => Option.some(new TransportError({ message: `the events stream of ${taskId} said nothing for ${Duration.format(limit)}` }))
            }),
            Effect.either
          )
          if (chunk._tag === "Left") return { _tag: "Stopped", delivered } as const
          for (const update of Chunk.toReadonlyArray(chunk.right)) {
            if (update._tag === "KeepAlive") continue
            const task: Option.Option<Task.Task> = update._tag === "Task"
              ? Option.some(update.task)
              // A progress event before any task is ignored: the task event comes first.
              : Option.map(yield* Ref.get(lastSeen), (seen) => ({ ...seen, status: update.status, progress: update.progress }))
            if (Option.isNone(task)) continue
            if (update._tag === "Task") delivered = true
            yield* see(task.value)
            if (terminalStatuses.has(task.value.status)) return { _tag: "Ended", task: task.value } as const
          }
        }
      }))

    /** Follows the events stream, opening it again while it gives the task; none when the client must poll instead. */
    const follow = (open: Events) =>
      Effect.gen(function*() {
        const backoff = yield* Schedule.driver(pollBackoff)
        for (;;) {
          const outcome = yield* connection(open)
          if (outcome._tag === "Ended") return Option.some(outcome.task)
          if (!outcome.delivered) return Option.none<Task.Task>()
          yield* Effect.orDie(backoff.next(undefined))
        }
      })

    const poll = Effect.gen(function*() {
      const backoff = yield* Schedule.driver(pollBackoff)
      // Whether queries still ask the server to hold them: not after it refused one (429).
      let holding = true
      // The first query is answered at once, so the status shows before the first hold.
      for (let first = true; ; first = false) {
        const asked = yield* Clock.currentTimeMillis
        const following = options.onProgress !== undefined &&
          Option.exists(yield* Ref.get(lastSeen), (seen) => seen.progress !== null && seen.progress !== undefined)
        const hold = following ? Math.min(waitSeconds, progressWait) : waitSeconds
        const answer = yield* get(taskId, { wait: first || !holding ? 0 : hold }).pipe(
          Effect.map(Option.some),
          Effect.catchIf(tooManyRequests, () => Effect.succeedNone)
        )
        if (Option.isNone(answer)) {
          holding = false
          yield* Effect.orDie(backoff.next(undefined))
          continue
        }
        const task = answer.value
        const held = (yield* Clock.currentTimeMillis) - asked
        const changed = yield* see(task)
        if (terminalStatuses.has(task.status)) return task
        if (first) continue
        // Held for at least half the wait asked: the server long-polls; ask again at once.
        if (holding && held * 2 >= hold * 1000) {
          yield* backoff.reset
          continue
        }
        if (changed) yield* backoff.reset
        yield* Effect.orDie(backoff.next(undefined))
      }
    })
    const loop = events === undefined
      ? poll
      : Effect.flatMap(follow(events), Option.match({ onNone: () => poll, onSome: Effect.succeed }))
    if (options.timeout === undefined) return yield* loop
    return yield* loop.pipe(
      Effect.timeout(options.timeout),
      Effect.catchTag("TimeoutException", () =>
        Effect.flatMap(Ref.get(lastSeen), (seen) => Effect.fail(new RunTimeout({ taskId, task: Option.getOrUndefined(seen) }))))
    )
  })
