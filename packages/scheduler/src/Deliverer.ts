/**
 * The callback deliverer (DESIGN.md section 5): sends each callback the store owes, signed
 * per Standard Webhooks, and retries on a schedule. 2xx is delivered; 410 Gone gives up at
 * once; anything else (3xx included: redirects are not followed) is tried again, a 429 or
 * 503 not before its Retry-After; every attempt is recorded.
 * Requests go through Outbound, never a host's HTTP client: the callback host must resolve
 * to public addresses only, and nothing but the webhook's own headers is sent.
 */
import type { StoreError } from "@mediagate/core"
import { Accounts, Api, Metrics, Outbound, RetryAfter, spanned, Task, TaskEvents, TaskStore } from "@mediagate/core"
import { Clock, Deferred, Duration, Effect, FiberSet, Layer, Option, Queue, Random, Redacted } from "effect"
import * as LoopWait from "./LoopWait.js"
import * as Loops from "./Loops.js"
import * as Webhooks from "./Webhooks.js"

/** The user-agent of our callbacks. */
export const userAgent = "mediagate-webhooks/0.1"

/** Delays before attempt 1, 2, ... (the first is immediate): 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h. */
export const defaultSchedule: ReadonlyArray<Duration.DurationInput> = [
  "0 millis", "5 seconds", "5 minutes", "30 minutes", "2 hours", "5 hours", "10 hours", "14 hours", "20 hours", "24 hours"
]

/** The longest wait a receiver's Retry-After obtains: a longer one is cut to this. */
export const maxRetryAfter: Duration.DurationInput = "24 hours"

/**
 * A `Retry-After` value, delay-seconds or an HTTP date, as milliseconds after `now`; undefined
 * when it is neither. Core's `RetryAfter.millis`, the one reading the upstream adapters share.
 */
export const retryAfterMillis: (value: string, now: number) => number | undefined = RetryAfter.millis

/** What a receiver answered: its status and, for a 429 or 503, the wait its Retry-After asked for. */
export interface Answer {
  readonly status: number
  readonly retryAfterMs?: number | undefined
}

/**
 * What follows an attempt that got `answer` (null: none) at `at`, `delay` being the
 * schedule's next delay (jitter applied; undefined once the round's schedule is used up).
 * 2xx is delivered; 410 Gone gives up at once (the receiver says the address is gone for
 * good); anything else is retried after `delay`, or given up on after the last. A 429 or 503
 * with Retry-After waits the longer of the two, the Retry-After cut to `maxRetryAfter`: a
 * receiver may slow us down but not hurry us, and cannot park a callback for days.
 */
export const outcome = (
  answer: Answer | null,
  at: number,
  delay: number | undefined,
  options: { readonly maxRetryAfter?: Duration.DurationInput } = {}
): TaskStore.CallbackAttempt["outcome"] => {
  if (answer !== null && answer.status >= 200 && answer.status < 300) return { _tag: "Delivered" }
  if (answer?.status === 410 || delay === undefined) return { _tag: "GaveUp" }
  const asked = answer?.retryAfterMs
  const cap = Duration.toMillis(options.maxRetryAfter ?? maxRetryAfter)
  return { _tag: "Retry", retryAt: at + (asked === undefined ? delay : Math.max(delay, Math.min(asked, cap))) }
}

/** The attempt's error as recorded: null once delivered, else what went wrong and any Retry-After heard. */
const errorOf = (answer: Answer | null, failure: string | null): string | null =>
  answer === null
    ? failure
    : answer.status >= 200 && answer.status < 300
    ? null
    : answer.status === 410
    ? "HTTP 410 Gone: not retried"
    : answer.retryAfterMs === undefined
    ? `HTTP ${answer.status}`
    : `HTTP ${answer.status}, Retry-After ${Math.round(answer.retryAfterMs / 1000)} s`

/** Why a callback event is not sent (`skip`), or undefined when it is. */
export const notSent = (callback: TaskStore.CallbackRow, task: Task.TaskRecord): string | undefined =>
  callback.event !== "started" && callback.event !== "progress"
    ? undefined
    : Task.isTerminal(task.status)
    ? `the task ended (${task.status}) before it was sent; its completed callback tells of that`
    : callback.event === "progress" && task.callbackEvents?.lastProgress?.id !== callback.id
    ? "a newer progress callback is owed, and carries the task as it stands"
    : undefined

/**
 * Callbacks sent at once unless configured. A receiver's answer is mostly waiting, so this
 * bounds the rate: with receivers answering in 20 ms, 8 at once made about 300 callbacks/s
 * and 32 about 1,000 (docs/benchmarks.md).
 */
export const defaultConcurrency = 32

/** Deliverer settings. */
export interface Options {
  /** How often it looks for due callbacks. Default 1 s. */
  readonly pollInterval?: Duration.DurationInput
  /** Callbacks sent at once. Default `defaultConcurrency`. */
  readonly concurrency?: number
  /** Time limit of one attempt. Default 15 s. */
  readonly timeout?: Duration.DurationInput
  /** Delays before the attempts of a delivery round, the first one's included. Default `defaultSchedule`. */
  readonly schedule?: ReadonlyArray<Duration.DurationInput>
  /** Longest wait a Retry-After obtains. Default `maxRetryAfter` (24 h). */
  readonly maxRetryAfter?: Duration.DurationInput
  /** Each retry delay varies by up to this fraction either way, so receivers are not hit in bursts. Default 0.1. */
  readonly jitter?: number
}

/** Builds the deliverer loop; it runs for the scope's lifetime. */
export const make = (options: Options = {}) =>
  Effect.gen(function*() {
    const store = yield* TaskStore.TaskStore
    const accounts = yield* Accounts.Accounts
    const outbound = yield* Outbound.Outbound
    const timeout = Duration.decode(options.timeout ?? "15 seconds")
    const schedule = (options.schedule ?? defaultSchedule).map((delay) => Duration.toMillis(delay))
    const jitter = options.jitter ?? 0.1
    const leaseMillis = Duration.toMillis(timeout) * 2
    const sendWithinMillis = Duration.toMillis(timeout) / 2
    const concurrency = options.concurrency ?? defaultConcurrency
    const retryAfterOptions = options.maxRetryAfter === undefined ? {} : { maxRetryAfter: options.maxRetryAfter }

    const send = (callback: TaskStore.DueCallback, body: string, secrets: ReadonlyArray<Redacted.Redacted<string>>, now: number) => {
      const timestamp = Math.floor(now / 1000)
      // One signature per secret, space-separated (Standard Webhooks): the current one first.
      const signature = secrets.map((s) => Webhooks.sign(Redacted.value(s), callback.id, timestamp, body)).join(" ")
      const headers = {
        "content-type": "application/json",
        "user-agent": userAgent,
        "webhook-id": callback.id,
        "webhook-timestamp": String(timestamp),
        ...(signature === "" ? {} : { "webhook-signature": signature })
      }
      // A host that resolves to a non-public address fails like an unreachable one: recorded
      // with its reason and retried on the schedule, since DNS can be corrected (docs/decisions).
      return outbound.post({ url: callback.url, headers, body, timeout }).pipe(
        Effect.map((response): Answer => {
          const header = response.headers?.["retry-after"]
          const retryAfter = typeof header === "string" ? header : header?.[0]
          return (response.status === 429 || response.status === 503) && retryAfter !== undefined
            ? { status: response.status, retryAfterMs: retryAfterMillis(retryAfter, now) }
            : { status: response.status }
        }),
        Effect.mapError((error) => error.message),
        Effect.either
      )
    }

    // Attempts are written together: whatever ended while the last write ran goes in the
    // next one (one transaction on SQL, not one per callback). A slot stays taken until its
    // attempt is written, so a callback is never claimed again before its outcome is stored.
    const written = yield* Queue.unbounded<readonly [TaskStore.CallbackAttempt, Deferred.Deferred<void, StoreError>]>()
    yield* Queue.take(written).pipe(
      // Answers that arrive together are handled in one turn of the event loop, one after the
      // other: the next turn's write takes all of them.
      Effect.zipLeft(Loops.nextTurn),
      Effect.flatMap((first) => Effect.map(Queue.takeAll(written), (rest) => [first, ...rest])),
      Effect.flatMap((batch) =>
        store.recordCallbackAttempts(batch.map(([attempt]) => attempt)).pipe(
          Effect.exit,
          Effect.flatMap((exit) => Effect.forEach(batch, ([, done]) => Deferred.done(done, exit), { discard: true }))
        )
      ),
      Effect.forever,
      Effect.forkScoped,
      Effect.interruptible
    )
    const recordAttempt = (attempt: TaskStore.CallbackAttempt) =>
      Effect.flatMap(Deferred.make<void, StoreError>(), (done) => Effect.zipRight(Queue.offer(written, [attempt, done]), Deferred.await(done)))

    /**
     * A `started` or `progress` callback that has nothing left to tell is not sent, and its
     * delivery ends there (one attempt, no request, its reason recorded): the task ended (its
     * `completed` callback tells of that, and an older event arriving after it would mislead),
     * or a newer progress callback is owed (it carries the task as it stands when sent).
     */
    const skip = (callback: TaskStore.DueCallback, attempt: number, reason: string) =>
      Effect.flatMap(Loops.currentMillis, (at) =>
        recordAttempt({ callbackId: callback.id, attempt, at, status: null, error: `not sent: ${reason}`, durationMs: 0, outcome: { _tag: "GaveUp" } }))

    const deliver = (callback: TaskStore.DueCallback, claimedAt: number) =>
      Effect.gen(function*() {
        const attempt = callback.attempts + 1
        // The task as the claim read it, where the store reads it with the claim.
        const task = callback.task === undefined ? yield* store.get(callback.taskId) : Option.fromNullable(callback.task)
        // The schedule counts from the start of the delivery round (a redeliver starts a new one).
        const scheduled = schedule[attempt - callback.roundStart]
        const record = (started: number, answer: Answer | null, failure: string | null) =>
          Effect.gen(function*() {
            const at = yield* Loops.currentMillis
            const delay = scheduled === undefined ? undefined : Math.round(scheduled * (yield* Random.nextRange(1 - jitter, 1 + jitter)))
            const error = errorOf(answer, failure)
            const next = outcome(answer, at, delay, retryAfterOptions)
            yield* Metrics.callbackAttempt(next._tag)
            if (error !== null) {
              // The URL is not logged: it may carry the receiver's token.
              yield* Effect.logWarning(`deliverer: callback attempt ${attempt} of task ${callback.taskId} failed: ${error}`).pipe(
                Effect.annotateLogs({
                  taskId: callback.taskId,
                  callbackId: callback.id,
                  attempt,
                  ...(answer === null ? {} : { status: answer.status }),
                  error,
                  outcome: next._tag === "Retry" ? "retry" : "gave_up"
                })
              )
            }
            yield* recordAttempt({
              callbackId: callback.id,
              attempt,
              at,
              status: answer?.status ?? null,
              error,
              durationMs: at - started,
              outcome: next
            })
          })
        if (Option.isNone(task)) return yield* record(yield* Loops.currentMillis, null, "the task no longer exists")
        const unsent = notSent(callback, task.value)
        if (unsent !== undefined) return yield* skip(callback, attempt, unsent)
        // The body is the query answer, as it stands now; a task that asked for callback
        // events (`callBackEvents`) has the event beside it.
        const answer = Api.ok(Task.toWire(task.value))
        const body = JSON.stringify(callback.event === undefined ? answer : { code: answer.code, msg: answer.msg, event: callback.event, data: answer.data })
        const secret = accounts.signingSecrets === undefined
          ? Option.toArray(yield* accounts.webhookSecret(task.value.ownerId))
          : yield* accounts.signingSecrets(task.value.ownerId)
        const started = yield* Loops.currentMillis
        // The attempt must end, at its time limit, with time left in the lease to write it down;
        // if getting here took that long, the lease runs out and the callback is claimed again.
        if (started > claimedAt + sendWithinMillis) {
          return yield* Effect.logWarning(`deliverer: callback ${callback.id} not sent: its lease would not cover the attempt`)
        }
        const sent = yield* send(callback, body, secret, started)
        return yield* sent._tag === "Left" ? record(started, null, sent.left) : record(started, sent.right, null)
      }).pipe(
        // The store failed (its database is down): the lease runs out and the callback is claimed again.
        Effect.catchTag("StoreError", (error) => Effect.logError(`deliverer: callback ${callback.id} could not be processed`, error)),
        // A bug: logged, not recovered from; the lease runs out and the callback is claimed again.
        Effect.tapDefect((defect) => Effect.logError(`deliverer: sending callback ${callback.id} died (a bug); it is claimed again once its lease runs out`, defect)),
        spanned("Deliverer.deliver", { attributes: { callbackId: callback.id } })
      )

    // A callback is claimed only when a slot is free to send it at once, under a lease of
    // twice the attempt's time limit, and it is sent only within the first half of its
    // time limit from the claim: the attempt ends at the latest with half a time limit of
    // the lease left to write it down, so no other node sends it meanwhile. (Claiming a
    // hundred and sending eight at a time let a batch outlive its lease, and other nodes
    // sent duplicates.)
    //
    // While a backlog waits (the last claim was full), slots are refilled a quarter of them at
    // a time, not one claim per finished callback; otherwise any free slot claims at once, so
    // a lone callback never waits.
    //
    // A freed slot wakes the loop only when a callback may wait for one: a backlog (the last
    // claim was full), or a wake-up that found every slot taken (`starved`; slots handed
    // callbacks by the write path are taken without a claim). Otherwise the last claim took
    // every callback due, and a callback owed since has woken the loop itself: looking again
    // would find nothing (one transaction per callback when idle).
    const wait = yield* LoopWait.make()
    const sending = yield* FiberSet.make<void>()
    const refill = Math.max(1, Math.floor(concurrency / 4))
    // Plain variables: only this deliverer's fibers touch them, each change in one step.
    let inflight = 0
    let backlog = false
    let starved = false
    const freed = Effect.suspend(() => {
      inflight--
      return backlog || starved ? wait.wake : Effect.void
    })
    // A callback the write path hands over (`CallbackWakeup.reserve`): a slot taken before it
    // is written, leased to this deliverer from the start, and sent once written, with no
    // claim. Behind a backlog it waits its turn in the store's line instead. Its fiber runs
    // in this deliverer's runtime, not the writer's.
    const runHere = yield* FiberSet.runtime(sending)<never>()
    const reserve = Effect.map(Loops.currentMillis, (now): TaskEvents.CallbackSlot | undefined => {
      if (backlog || inflight >= concurrency) return undefined
      inflight++
      return {
        leaseUntil: now + leaseMillis,
        deliver: (callback) => Effect.sync(() => void runHere(deliver(callback, now).pipe(Effect.ensuring(freed)))),
        release: freed
      }
    })
    const round = Effect.gen(function*() {
      const free = concurrency - inflight
      if (free < (backlog ? refill : 1)) {
        starved = true
        return 0
      }
      starved = false
      const now = yield* Loops.currentMillis
      const due = yield* store.claimCallbacks({ now, limit: free, leaseUntil: now + leaseMillis })
      backlog = due.length === free
      for (const callback of due) {
        inflight++
        yield* FiberSet.run(sending, deliver(callback, now).pipe(Effect.ensuring(freed)))
      }
      return due.length === free ? 1 : 0
    }).pipe(Effect.catchTag("StoreError", (error) => Effect.logError("deliverer: claiming callbacks failed", error).pipe(Effect.as(0))))

    // A full claim: go again at once; otherwise wait for a wake-up (a callback was just owed,
    // or a slot freed that one may wait for) or, as the safety net for retries coming due and
    // other nodes' callbacks, the next periodic scan. A wake-up claims in the event loop's next
    // turn (LoopWait), so the callbacks owed and the slots freed together are claimed in one
    // round.
    const pollMillis = Duration.toMillis(Duration.decode(options.pollInterval ?? "1 second"))
    yield* round.pipe(
      Effect.flatMap((full) =>
        full > 0 ? Effect.void : Effect.flatMap(Clock.currentTimeMillis, (now) => wait.until(now + pollMillis))
      ),
      Effect.forever,
      // A bug in a claim must not stop this node's callbacks for good (Loops.supervised).
      (rounds) => Loops.supervised("deliverer", rounds),
      Effect.forkScoped,
      Effect.interruptible
    )
    return { wake: wait.wake, reserve }
  })

/** The deliverer running in the background for the layer's lifetime; provides its wake-up to the write path. */
export const layer = (
  options: Options = {}
): Layer.Layer<TaskEvents.CallbackWakeup, never, TaskStore.TaskStore | Accounts.Accounts | Outbound.Outbound> =>
  Layer.scoped(TaskEvents.CallbackWakeup, make(options))
