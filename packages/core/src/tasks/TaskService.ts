/**
 * The use cases: submit a task and query it (spec sections 4.1 and 4.2), list and cancel
 * tasks, and look at or redeliver a task's callbacks. Submit under an Idempotency-Key
 * (`IdempotentSubmit`) and watching a task (`TaskWatch`) have modules of their own.
 */
import { Clock, Context, Duration, Effect, Either, Option, Queue, Schema } from "effect"
import type { Account } from "../services/Accounts.js"
import type { ListQuery, SubmitRequest } from "../api/Api.js"
import type { StoreError } from "../domain/Errors.js"
import { ModerationRejected, ModerationUnavailable, shortened, TaskNotCancellable, TaskNotFound, ValidationError } from "../domain/Errors.js"
import * as Credits from "./Credits.js"
import type * as IdempotencyKeys from "../services/IdempotencyKeys.js"
import * as IdempotentSubmit from "./IdempotentSubmit.js"
import { Ids, TaskId } from "../domain/Ids.js"
import { ModelCatalog } from "../models/ModelCatalog.js"
import type { ModelSpec } from "../models/ModelSpec.js"
import { Moderation } from "../services/Moderation.js"
import * as Pricing from "../models/Pricing.js"
import { Prices } from "../models/Pricing.js"
import type { Task, TaskInput, UpstreamJob } from "../domain/Task.js"
import * as Transition from "../domain/Transition.js"
import { CallbackEvent, isTerminal, TaskRecord, TaskStatus, toWire } from "../domain/Task.js"
import { CallbackWakeup, TaskWakeup } from "../services/TaskEvents.js"
import type { CallbackAttempt, CallbackState } from "../services/TaskStore.js"
import { TaskChanges } from "../services/TaskChanges.js"
import { TaskStore } from "../services/TaskStore.js"
import { type InboundWebhook, Upstream } from "../services/Upstream.js"
import * as TaskWatch from "./TaskWatch.js"
import { TaskWrites } from "./TaskWrites.js"
import { checkUrl } from "../domain/UrlPolicy.js"

/**
 * A webhook for a task a worker holds waits for the worker's write, for at most `limit` ms (a
 * poll takes longer only when the provider is slow). It is woken by the write when the worker
 * is on this node; `every` ms it reads the task again, the safety net for a worker on another
 * node (whose poll writes are not told between nodes).
 */
export const webhookWatch = { every: 500, limit: 10_000 } as const

/** What the submit use case accepts beyond the model's own rules. */
export class SubmitPolicy extends Context.Reference<SubmitPolicy>()("@mediagate/core/SubmitPolicy", {
  defaultValue: () => ({
    /** Accept localhost and private addresses in callBackUrl and media URLs (development and tests only). */
    allowPrivateUrls: false as boolean
  })
}) {}

/**
 * Deadlines by model family (`motion`, `clip3`, `alpha-image-2`, ...; docs/models.md lists
 * each model's family and default): a task of a family listed here ends TIMEOUT after this
 * long instead of its model's default.
 */
export class Deadlines extends Context.Reference<Deadlines>()("@mediagate/core/Deadlines", {
  defaultValue: (): ReadonlyMap<string, Duration.Duration> => new Map()
}) {}

/** Every media URL (the fields the model's schema marks) must name a public host (unless the policy allows private ones). */
const checkMediaUrls = (model: ModelSpec, input: Record<string, unknown>, allowPrivate: boolean) => {
  for (const { path, url } of model.mediaUrls(input)) {
    const problem = checkUrl(url, { protocols: ["http:", "https:"], allowPrivate })
    if (problem !== undefined) {
      return Either.left(new ValidationError({ message: `input.${path} ${problem} for ${model.id}` }))
    }
  }
  return Either.right(undefined)
}

/** The callback address must be an absolute http(s) URL on a public host (unless the policy allows private ones). */
const checkCallBackUrl = (callBackUrl: string | undefined, allowPrivate: boolean) => {
  const problem = callBackUrl === undefined ? undefined : checkUrl(callBackUrl, { protocols: ["http:", "https:"], allowPrivate })
  return problem === undefined ? Either.right(undefined) : Either.left(new ValidationError({ message: `callBackUrl ${problem}` }))
}

/** Edit distance between two strings (insertions, deletions, substitutions). */
const distance = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]!
}

/**
 * The catalog ids a client most likely meant: those the given id starts (a family name such
 * as alpha-image-2), else those within a few edits of it, ignoring case; at most three.
 */
const closestIds = (given: string, ids: ReadonlyArray<string>): ReadonlyArray<string> => {
  const wanted = given.toLowerCase()
  if (wanted === "" || wanted.length > 100) return []
  const prefixed = ids.filter((id) => id.toLowerCase().startsWith(wanted))
  if (prefixed.length > 0) return prefixed.slice(0, 3)
  const limit = Math.max(2, Math.floor(wanted.length / 4))
  return ids
    .map((id) => [id, distance(wanted, id.toLowerCase())] as const)
    .filter(([, d]) => d <= limit)
    .sort((x, y) => x[1] - y[1])
    .slice(0, 3)
    .map(([id]) => id)
}

/** `model 'x' is not supported`, with the ids the client probably meant and where to find them all. */
const unsupportedModel = (given: string, ids: ReadonlyArray<string>) => {
  const closest = closestIds(given, ids)
  const hint = closest.length === 0
    ? ""
    : ` did you mean ${closest.length === 1 ? closest[0] : `${closest.slice(0, -1).join(", ")} or ${closest[closest.length - 1]}`}?`
  return new ValidationError({ message: `model '${shortened(given)}' is not supported;${hint} GET /api/v1/models lists every model` })
}

/** A task's callback has nothing to redeliver: the task has not ended, or it has no callBackUrl. */
export class CallbackNotRedeliverable extends Schema.TaggedError<CallbackNotRedeliverable>()("CallbackNotRedeliverable", {
  taskId: Schema.String,
  reason: Schema.Literal("NotEnded", "NoCallBackUrl"),
  status: TaskStatus
}) {
  override get message() {
    return this.reason === "NotEnded"
      ? `task is still ${this.status}; its callback is sent when it ends`
      : "task has no callBackUrl, so there is no callback to redeliver"
  }
}

/** A callback and every attempt made to deliver it, oldest first. */
export interface CallbackDelivery {
  readonly callback: CallbackState
  readonly attempts: ReadonlyArray<CallbackAttempt>
}

/** What a submit would store and charge (`TaskService.estimate`). */
export interface Estimate {
  /** The model id as submitted. */
  readonly model: string
  /** The input as the task would store it (and the query endpoint show it). */
  readonly input: TaskInput
  /** The normalised job: defaults resolved, `adjustments` made, `priceMicroUsd` set. */
  readonly job: UpstreamJob
  /** Set when a rule of the model would fail the task at once (INVALID_PARAMETERS). */
  readonly rejection: string | undefined
}

/** What a submit may carry beyond its body. */
export interface SubmitOptions {
  /** The request's Idempotency-Key and the fingerprint of its body (`IdempotencyKeys.fingerprint`). */
  readonly idempotency?: { readonly key: string; readonly fingerprint: string } | undefined
}

/**
 * Submit and query, independent of any transport. Everything it works with is in its type:
 * a composition without an engine or a deliverer in this process provides the wake-ups'
 * `layerNone`, one without credits `Ledger.layerUnbilled`.
 */
export class TaskService extends Effect.Service<TaskService>()("@mediagate/core/TaskService", {
  effect: Effect.gen(function*() {
    const store = yield* TaskStore
    const ids = yield* Ids
    const catalog = yield* ModelCatalog
    const moderation = yield* Moderation
    const wakeup = yield* TaskWakeup
    const deliverer = yield* CallbackWakeup
    const upstream = yield* Upstream
    const deadlines = yield* Deadlines
    const writes = yield* TaskWrites
    const changes = yield* TaskChanges
    const prices = yield* Prices
    // An incomplete price table is the host's configuration bug: stop at start, not at a submit.
    yield* Either.match(Pricing.validate(catalog.models, prices), {
      onLeft: (missing) => Effect.dieMessage(`mediagate: the price table is incomplete: ${missing}`),
      onRight: () => Effect.void
    })
    const modelIds = catalog.models.map((model) => model.id)
    /** Spans without stack traces: capturing one costs about as much as the span (bench:costs). */
    const spanOptions = { captureStackTrace: false }

    /**
     * Every rule a submit checks before moderation, in its order, with nothing written: the
     * model, its normalised and priced job, and the input as the task stores it. Submit and
     * estimate both go through it, so an estimate refuses exactly what a submit refuses.
     */
    const prepare = (request: SubmitRequest) => Effect.gen(function*() {
      const policy = yield* SubmitPolicy
      yield* checkCallBackUrl(request.callBackUrl, policy.allowPrivateUrls)
      if (request.callBackEvents !== undefined && request.callBackUrl === undefined) {
        return yield* new ValidationError({ message: "callBackEvents needs a callBackUrl to send them to" })
      }
      const model = yield* Option.match(catalog.find(request.model), {
        onNone: () => Effect.fail(unsupportedModel(request.model, modelIds)),
        onSome: Effect.succeed
      })
      const normalized = yield* model.normalize(request.input)
      yield* checkMediaUrls(model, request.input, policy.allowPrivateUrls)
      const job: UpstreamJob = { ...normalized.job, priceMicroUsd: model.price(normalized.job, prices) }
      // The task's model is the submitted top-level one, whatever the input holds.
      const { model: _ignored, ...inputFields } = request.input
      const input: TaskInput = { model: request.model, ...inputFields }
      return { model, normalized, job, input }
    })

    /** Validates, moderates and stores a new PENDING task (with `given` as its id, else a new one); returns its id. */
    const create = (account: Account, request: SubmitRequest, given?: TaskId) => Effect.gen(function*() {
      const { input, job, model, normalized } = yield* prepare(request)
      const verdict = yield* moderation.check(job.prompt)
      if (verdict.flagged) {
        return yield* new ModerationRejected({ flagged: verdict.flagged, categories: verdict.categories })
      }

      const now = yield* Clock.currentTimeMillis
      const taskId = given ?? (yield* ids.taskId)
      const pending = new TaskRecord({
          id: taskId,
          ownerId: account.id,
          status: "PENDING",
          input,
          job,
          result: null,
          failureReason: null,
          errorMessage: null,
          callBackUrl: request.callBackUrl ?? null,
          // The events asked for, each once, in a fixed order (started, progress, completed).
          callbackEvents: request.callBackEvents === undefined
            ? null
            : { events: CallbackEvent.literals.filter((event) => request.callBackEvents!.includes(event)), lastProgress: null },
          userId: request.user_id ?? null,
          upstreamId: null,
          createdAt: now,
          updatedAt: now,
          deadlineAt: now + Duration.toMillis(deadlines.get(model.family) ?? model.deadline),
          dueAt: now,
          leaseOwner: null,
          leaseUntil: null,
          version: 1,
          provider: upstream.provider !== undefined ? upstream.provider(job) : null
        })
      // Rules the spec says fail the task (not the call): the task is accepted and fails at
      // once. Otherwise it is stored with its price held, both or neither (one transaction
      // when the ledger is in the task store's database), so a stored running task always has
      // its reservation and a failed write holds nothing; an account that cannot pay gets a
      // task that failed with INSUFFICIENT_POINTS, as the spec's failure table has it.
      const fail = (reason: "INVALID_PARAMETERS" | "INSUFFICIENT_POINTS", message: string) =>
        Effect.flatMap(Effect.orDie(Transition.apply(pending, { to: "FAILURE", reason, message }, now)), writes.create)
      if (normalized.rejection !== undefined) {
        yield* fail("INVALID_PARAMETERS", normalized.rejection)
      } else {
        yield* writes.createHeld(pending, now).pipe(
          Effect.zipRight(wakeup.wake),
          Effect.catchTag("InsufficientCredits", (error) => fail("INSUFFICIENT_POINTS", Credits.insufficientMessage(error)))
        )
      }
      return taskId
    })

    const submitOnce = yield* IdempotentSubmit.make(create)

    /**
     * Validates, moderates and stores a new PENDING task; returns its id, and whether it is
     * the task an earlier request with the same Idempotency-Key created (`replayed`).
     */
    const submit = Effect.fn("TaskService.submit", spanOptions)(
      function*(account: Account, request: SubmitRequest, options: SubmitOptions = {}) {
        if (options.idempotency === undefined) return { taskId: yield* create(account, request), replayed: false }
        return yield* submitOnce(account, request, options.idempotency.key, options.idempotency.fingerprint)
      }
    )

    /**
     * What a submit of `request` would store and charge, with nothing created, held or
     * moderated: the rules' refusals are submit's own (`prepare`). `rejection` is the message
     * a task refused by a rule of its model (motion's mediaUrls counts) would fail with at once.
     */
    const estimate = Effect.fn("TaskService.estimate", spanOptions)(function*(request: SubmitRequest) {
      const { input, job, normalized } = yield* prepare(request)
      return { model: request.model, input, job, rejection: normalized.rejection } satisfies Estimate
    })

    /** The caller's task with this id, as the query endpoint shows it. */
    const query = Effect.fn("TaskService.query", spanOptions)(
      function*(account: Account, taskId: TaskId) {
        const record = yield* store.getOwned(taskId, account.id)
        return yield* Option.match(record, {
          onNone: () => Effect.fail(new TaskNotFound({ taskId })),
          onSome: (found): Effect.Effect<Task> => Effect.succeed(toWire(found))
        })
      }
    )

    /**
     * Cancels the caller's task unless it has ended. The engine's next write for the task
     * then meets a newer version and leaves the task CANCELLED.
     */
    const cancel = Effect.fn("TaskService.cancel", spanOptions)(function*(account: Account, taskId: TaskId) {
      for (let attempt = 0; ; attempt++) {
        const found = yield* store.getOwned(taskId, account.id)
        if (Option.isNone(found)) return yield* new TaskNotFound({ taskId })
        const record = found.value
        if (isTerminal(record.status)) return yield* new TaskNotCancellable({ taskId, status: record.status })
        const now = yield* Clock.currentTimeMillis
        const cancelled = yield* writes.apply(record, { to: "CANCELLED", message: "cancelled by the client" }, now).pipe(
          Effect.map(Option.some),
          // The engine moved the task meanwhile: read it again and decide again.
          Effect.catchTag("TaskConflict", (conflict) => (attempt < 5 ? Effect.succeed(Option.none()) : Effect.fail(conflict))),
          // Not terminal when read, so the state machine allows CANCELLED.
          Effect.catchTag("IllegalTransition", Effect.die)
        )
        if (Option.isSome(cancelled)) {
          // Its running slot is free now: the engine may start waiting work at once.
          yield* wakeup.wake
          yield* stopUpstreamJob(record)
          return toWire(cancelled.value)
        }
      }
    })

    /**
     * Asks the upstream to stop a cancelled task's job, best effort and in the background (the
     * client's answer does not wait for it); a failure is logged. A synchronous call in
     * flight is abandoned by its worker, whose heartbeat finds the task cancelled.
     */
    const stopUpstreamJob = (record: TaskRecord) => {
      const cancelJob = upstream.cancel
      if (record.upstreamId === null || cancelJob === undefined) return Effect.void
      return cancelJob(record.upstreamId, record.job).pipe(
        Effect.timeout("10 seconds"),
        Effect.catchAllCause((cause) => Effect.logWarning(`cancel: the upstream job of task ${record.id} was not stopped`, cause)),
        Effect.forkDaemon,
        Effect.asVoid
      )
    }

    /** The caller's tasks, newest first, `limit` at a time, after the cursor's task, those the filters let through. */
    const list = Effect.fn("TaskService.list", spanOptions)(function*(account: Account, query: ListQuery) {
      const page = yield* store.list(account.id, {
        limit: query.limit,
        cursor: Option.getOrUndefined(query.cursor),
        filter: {
          statuses: query.status,
          model: query.model,
          createdAfter: query.created_after,
          createdBefore: query.created_before
        }
      })
      return { tasks: page.tasks.map(toWire), next_cursor: page.nextCursor }
    })

    /** Makes the task due now, when it is due later; the engine moving it meanwhile is as good. */
    const dueNow = (record: TaskRecord, now: number) =>
      record.dueAt !== null && record.dueAt > now
        ? writes.reschedule(record, now).pipe(Effect.asVoid, Effect.catchTags({ TaskConflict: () => Effect.void, IllegalTransition: () => Effect.void }))
        : Effect.void

    /**
     * For a task a worker holds (a step in flight, which may have asked the provider before the
     * news came): waits until the step's write gives it up, for at most `webhookWatch.limit`
     * ms, then makes it due now. Otherwise the step's write would put the next poll at the
     * safety net's time (30 s and more) and the news would wait for it: with Replicate's
     * `logs` events, polls are frequent and a `completed` event arriving during one is likely.
     * Woken by this node's writes of the task (subscribed before the task is read, so none is
     * missed); a worker on another node is seen at the re-read every `webhookWatch.every` ms.
     */
    const afterStep = (taskId: TaskId, since: number) =>
      Effect.scoped(Effect.gen(function*() {
        const written = yield* changes.subscribe(taskId)
        for (;;) {
          const now = yield* Clock.currentTimeMillis
          const current = yield* store.get(taskId)
          if (Option.isNone(current) || current.value.dueAt === null) return
          if (current.value.leaseUntil === null || current.value.leaseUntil <= now) return yield* dueNow(current.value, now)
          const left = since + webhookWatch.limit - now
          if (left <= 0) return
          yield* Effect.raceFirst(Queue.take(written), Effect.sleep(Duration.millis(Math.min(webhookWatch.every, left))))
        }
      }))

    /**
     * A provider's webhook: when the upstream finds it genuine, its task (the token) is due
     * at once and the engine is woken, so the result is fetched now rather than at the next
     * poll; a task being stepped is made due once the step has written (`afterStep`). Answers
     * whether it was accepted; an unknown, finished or not yet submitted task is accepted and
     * left alone (the provider need not send it again). The webhook's body is never read: a
     * webhook that says the job still runs (Replicate's `start`, `output`, `logs`) only
     * brings a poll, whose answer updates the progress (throttled) and never ends the task.
     */
    const receiveWebhook = Effect.fn("TaskService.receiveWebhook", spanOptions)(function*(webhook: InboundWebhook) {
      if (upstream.verifyWebhook === undefined || !(yield* upstream.verifyWebhook(webhook))) return false
      const found = yield* store.get(TaskId.make(webhook.token))
      if (Option.isNone(found) || found.value.dueAt === null || found.value.upstreamId === null) return true
      const now = yield* Clock.currentTimeMillis
      const { leaseUntil } = found.value
      yield* leaseUntil !== null && leaseUntil > now ? afterStep(found.value.id, now) : dueNow(found.value, now)
      yield* wakeup.wake
      return true
    })

    /** A task's callbacks, each with its attempts. */
    const deliveries = (taskId: TaskId): Effect.Effect<ReadonlyArray<CallbackDelivery>, StoreError> =>
      Effect.flatMap(store.callbacks(taskId), (callbacks) =>
        Effect.forEach(callbacks, (callback) => Effect.map(store.callbackAttempts(callback.id), (attempts) => ({ callback, attempts }))))

    /** The callbacks of the caller's task, each with every attempt made to deliver it. */
    const callbacks = Effect.fn("TaskService.callbacks", spanOptions)(function*(account: Account, taskId: TaskId) {
      if (Option.isNone(yield* store.getOwned(taskId, account.id))) return yield* new TaskNotFound({ taskId })
      return yield* deliveries(taskId)
    })

    /**
     * Sends the callback of the caller's ended task again, now: a new delivery round under the
     * same webhook-id, whether the last one delivered it, gave up or is still retrying (as
     * Stripe resends a delivered event). The deliverer is woken so it goes at once.
     */
    const redeliver = Effect.fn("TaskService.redeliver", spanOptions)(function*(account: Account, taskId: TaskId) {
      const found = yield* store.getOwned(taskId, account.id)
      if (Option.isNone(found)) return yield* new TaskNotFound({ taskId })
      const { callBackUrl, status } = found.value
      if (!isTerminal(status)) return yield* new CallbackNotRedeliverable({ taskId, reason: "NotEnded", status })
      if (callBackUrl === null) return yield* new CallbackNotRedeliverable({ taskId, reason: "NoCallBackUrl", status })
      // An ended task with a callBackUrl owes its callback from the write that ended it (TaskWrites).
      if ((yield* store.redeliverCallbacks(taskId, yield* Clock.currentTimeMillis)) === 0) {
        return yield* Effect.dieMessage(`task ${taskId} ended with a callBackUrl but owes no callback`)
      }
      yield* deliverer.wake
      return yield* deliveries(taskId)
    })

    const { wait, watch } = yield* TaskWatch.make(query)

    return { submit, estimate, query, wait, watch, list, cancel, receiveWebhook, callbacks, redeliver } as const
  })
}) {}

/** Re-exported so handlers can name every failure of submit. */
export type SubmitError =
  | StoreError
  | ValidationError
  | ModerationRejected
  | ModerationUnavailable
  | IdempotencyKeys.IdempotencyKeyMismatch
  | IdempotencyKeys.IdempotencyKeyInUse
