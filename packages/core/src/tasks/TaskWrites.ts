/**
 * The one write path of task state. A change goes through the state machine, the callbacks
 * it owes are worked out here (a task that reaches a terminal state with a callBackUrl owes
 * exactly one; one that asked for callback events also owes `started` and throttled
 * `progress` ones), and the record and its callbacks are written together, all or nothing. A
 * new task's price is held with it, both or neither (`Credits.storeHeld`). The
 * write that ends a task settles its credits with it where the store keeps its tasks in the
 * ledger's database (`TaskStore.updateSettled`); otherwise it settles them after it
 * (`Credits.settle`; nothing to settle under `Ledger.layerUnbilled`), trying again in the
 * background when the ledger fails, and a crash between the two is finished by the
 * settlement sweep. The API (submit, cancel) and the
 * engine write through the one `TaskWrites` of their composition; each write is published to
 * the task's waiters (`TaskChanges`) and wakes the deliverer when it owes a callback, or hands
 * the callback to it, written leased to it, when it has a slot free.
 */
import * as Metrics from "../services/Metrics.js"
import { Context, Effect, Either, Exit, Layer, Option } from "effect"
import * as Credits from "./Credits.js"
import type { IllegalTransition, StoreError, TaskConflict } from "../domain/Errors.js"
import type { HoldRefused } from "../services/Ledger.js"
import { Ledger } from "../services/Ledger.js"
import type { UpstreamId } from "../domain/Ids.js"
import { Ids } from "../domain/Ids.js"
import type { CallbackEvent, TaskProgress, TaskStatus, UpstreamAttempt, UpstreamJob } from "../domain/Task.js"
import { isTerminal, TaskRecord } from "../domain/Task.js"
import type { CallbackRow } from "../services/TaskStore.js"
import { TaskChanges } from "../services/TaskChanges.js"
import { CallbackWakeup } from "../services/TaskEvents.js"
import { TaskStore } from "../services/TaskStore.js"
import type { TaskChange } from "../domain/Transition.js"
import * as Transition from "../domain/Transition.js"

/** Whether moving a task from `before` (null: a new task) to `after` owes a callback. */
export const owesCallback = (before: TaskStatus | null, after: TaskRecord): boolean =>
  after.callBackUrl !== null && isTerminal(after.status) && (before === null || !isTerminal(before))

/**
 * A task's `progress` callbacks are owed at most once per this many milliseconds: a change
 * within it is told by one callback due at its end (which carries the task as it stands
 * when sent), so the last change is never left untold.
 */
export const progressCallbackMillis = 2000

/** A callback event owed by a write, before its id is drawn: what it tells of and when it is due. */
interface EventOwed {
  readonly event: CallbackEvent
  /** When it happened: the status change, or the progress change. */
  readonly at: number
  readonly dueAt: number
}

/**
 * The callbacks a task that asked for callback events (`callBackEvents`) owes for the write
 * from `before` (null: a new task) to `after`, terminal aside: `started` once, when it leaves
 * PENDING for the upstream (due at that change, `updatedAt`); `progress` when its progress
 * changes, throttled to one per `progressCallbackMillis` from the change's time (due at once,
 * or at the end of the current interval when one was owed within it; none when one is
 * already due later, since it will carry this change).
 */
export const eventsOwed = (before: TaskRecord | null, after: TaskRecord): ReadonlyArray<EventOwed> => {
  const asked = after.callbackEvents
  if (asked === null || after.callBackUrl === null || isTerminal(after.status)) return []
  const owed: Array<EventOwed> = []
  if (asked.events.includes("started") && before !== null && before.status === "PENDING" && after.status !== "PENDING") {
    owed.push({ event: "started", at: after.updatedAt, dueAt: after.updatedAt })
  }
  if (asked.events.includes("progress") && after.progress !== null && after.progress !== before?.progress) {
    const now = after.progress.updatedAt
    const last = asked.lastProgress?.dueAt
    if (last === undefined || now >= last + progressCallbackMillis) owed.push({ event: "progress", at: now, dueAt: now })
    else if (last <= now) owed.push({ event: "progress", at: now, dueAt: last + progressCallbackMillis })
  }
  return owed
}

/**
 * What a write may carry besides the change: the upstream attempts as they now stand, the
 * task's progress (folded into a write made anyway, never one of its own), and a lease the
 * writer keeps (a worker busy with a call keeps the task; others skip it until the lease ends).
 */
export interface WriteOptions {
  readonly attempts?: ReadonlyArray<UpstreamAttempt>
  readonly progress?: TaskProgress | null
  readonly lease?: { readonly owner: string; readonly until: number }
}

/** Writes task state; see the module comment. One per composition, shared by the use cases and the engine. */
export class TaskWrites extends Context.Tag("@mediagate/core/TaskWrites")<TaskWrites, {
  /** Stores a new task (PENDING, or already ended by a rule of its model) with the callback it owes. */
  readonly create: (record: TaskRecord) => Effect.Effect<void, StoreError>
  /**
   * Stores a new PENDING task with its price held at `now`, both or neither
   * (`Credits.storeHeld`); InsufficientCredits when its owner cannot pay, KeyCapReached when
   * its key's monthly cap (`monthlyCapMicroUsd`, of the key `record.keyId`) would be passed,
   * nothing written.
   */
  readonly createHeld: (record: TaskRecord, now: number, monthlyCapMicroUsd?: number | null) => Effect.Effect<void, HoldRefused | StoreError>
  /** Applies `change` to `current` at `now` and writes it if `current` is still the stored version. */
  readonly apply: (
    current: TaskRecord,
    change: TaskChange,
    now: number,
    options?: WriteOptions
  ) => Effect.Effect<TaskRecord, IllegalTransition | TaskConflict | StoreError>
  /** Moves a non-terminal task's next look to `dueAt` (same status), optionally with a new job or upstream id. */
  readonly reschedule: (
    current: TaskRecord,
    dueAt: number,
    patch?: { readonly job?: UpstreamJob; readonly upstreamId?: UpstreamId | null; readonly provider?: string | null } & WriteOptions
  ) => Effect.Effect<TaskRecord, IllegalTransition | TaskConflict | StoreError>
}>() {}

/**
 * The write path on the TaskStore in context; callback ids come from Ids. Every collaborator
 * is required: a host without credits, a deliverer or waiters says so with `Ledger.layerUnbilled`,
 * `CallbackWakeup.layerNone` and a `TaskChanges` nobody subscribes to.
 */
export const make: Effect.Effect<TaskWrites["Type"], never, TaskStore | Ids | Ledger | TaskChanges | CallbackWakeup> = Effect.gen(function*() {
  const store = yield* TaskStore
  const ids = yield* Ids
  const deliverer = yield* CallbackWakeup
  const ledger = yield* Ledger
  const changes = yield* TaskChanges
  const reserve = deliverer.reserve
  /**
   * `write` of a record with the callbacks it owes. The spec's one callback (a task that did
   * not ask for callback events) goes to this process's deliverer when it has a slot free
   * (`CallbackWakeup.reserve`): written leased to it, then handed to it with the record, so
   * that it is sent without a claim (a round trip to the store, and the claim's statements).
   * Otherwise, once written, the deliverer is woken to claim what is owed: a task's events
   * are claimed, so that the claim that takes its `completed` one also takes a throttled
   * `progress` one due with it.
   */
  const withCallbacks = <A, E>(
    record: TaskRecord,
    callbacks: ReadonlyArray<CallbackRow>,
    now: number,
    write: (callbacks: ReadonlyArray<CallbackRow>) => Effect.Effect<A, E>
  ): Effect.Effect<A, E> => {
    if (callbacks.length === 0) return write(callbacks)
    // Once written, the deliverer sends them now rather than at its next scan.
    const woken = Effect.tap(write(callbacks), () => deliverer.wake)
    const lone = callbacks.length === 1 && record.callbackEvents == null ? callbacks[0]! : undefined
    if (reserve === undefined || lone === undefined || (lone.dueAt !== undefined && lone.dueAt > now)) return woken
    return Effect.flatMap(reserve, (slot) => {
      if (slot === undefined) return woken
      const leased = { ...lone, leaseUntil: slot.leaseUntil }
      return write([leased]).pipe(
        Effect.onExit((exit) => Exit.isSuccess(exit) ? slot.deliver({ ...leased, attempts: 0, roundStart: 0, task: record }) : slot.release)
      )
    })
  }
  const noCallbacks: ReadonlyArray<CallbackRow> = []

  /**
   * The callbacks the write from `before` (null: a new task) to `after` owes, and the record
   * to write: `after`, or `after` noting the progress callback it now owes last.
   */
  const callbacksOwed = (before: TaskRecord | null, after: TaskRecord) => {
    const terminal = owesCallback(before?.status ?? null, after)
    const events = eventsOwed(before, after)
    if (!terminal && events.length === 0) return Effect.succeed({ record: after, callbacks: noCallbacks })
    return Effect.gen(function*() {
      const asked = after.callbackEvents
      const callbacks: Array<CallbackRow> = []
      let record = after
      for (const { at, dueAt, event } of events) {
        const id = `msg_${yield* ids.token(12)}`
        callbacks.push({ id, taskId: after.id, url: after.callBackUrl!, createdAt: at, event, dueAt })
        if (event === "progress") {
          record = new TaskRecord({ ...record, callbackEvents: { ...asked!, lastProgress: { id, dueAt } } }, true)
        }
      }
      if (terminal) {
        callbacks.push({
          id: `msg_${yield* ids.token(12)}`,
          taskId: after.id,
          url: after.callBackUrl!,
          createdAt: after.updatedAt,
          ...(asked === null ? {} : { event: "completed" as const })
        })
      }
      return { record, callbacks }
    })
  }

  /** `record` holding `lease`, if the writer keeps one. */
  const leased = (record: TaskRecord, lease: WriteOptions["lease"]) =>
    lease === undefined ? record : new TaskRecord({ ...record, leaseOwner: lease.owner, leaseUntil: lease.until }, true)

  /**
   * After the write that ended a task: its reservation charged or released. A failure here
   * (the ledger's database connection dropped) is tried again in the background at once
   * (`settleLater`); the task's own write stands either way.
   */
  const settled = (before: TaskStatus, after: TaskRecord, now: number) =>
    isTerminal(before) || !isTerminal(after.status)
      ? Effect.void
      : Credits.settle(ledger, ids, after, now).pipe(
        Effect.catchTag("StoreError", (cause) =>
          Effect.logWarning(`credits: task ${after.id} ended ${after.status} but its reservation was not settled; trying again`, cause).pipe(
            Effect.zipRight(settleLater(after.id, Effect.succeedSome(after), now))
          )
        ),
        Effect.asVoid
      )

  /**
   * The settlement of an ended task (`task`: the record, or a read of it), tried again
   * (`Credits.retrySchedule`, 2 minutes at most) without holding up the write that ended it;
   * past that the settlement sweep has it. A daemon fiber: the writer's fiber (an engine
   * step, a request) goes on and ends at once, which would interrupt a child, and the tries
   * are bounded in time.
   */
  const settleLater = (taskId: TaskRecord["id"], task: Effect.Effect<Option.Option<TaskRecord>, StoreError>, now: number) =>
    Credits.settleRetrying(ledger, ids, task, now).pipe(
      Effect.flatMap((entry) =>
        Option.isSome(entry) ? Effect.logInfo(`credits: task ${taskId} settled (${entry.value.kind}) on a later try`) : Effect.void
      ),
      Effect.catchAll((cause) =>
        Effect.logWarning(`credits: the reservation of task ${taskId} is still not settled after retries; the settlement sweep will`, cause)
      ),
      Effect.forkDaemon,
      Effect.asVoid
    )

  /**
   * A write that would end a task and failed on the store (its connection dropped) may have been stored all
   * the same, and then nobody else settles it: the engine reads an ended task back and has
   * nothing left to write. So its settlement is owed as the stored task says.
   */
  const maybeEnded = (before: TaskStatus, after: TaskRecord, now: number) =>
    isTerminal(before) || !isTerminal(after.status)
      ? Effect.void
      : settleLater(after.id, Effect.map(store.get(after.id), Option.filter((stored) => isTerminal(stored.status))), now)

  /**
   * The store's write of `record`; one that ends the task settles its credits in the same
   * transaction where the store keeps its tasks in the ledger's database
   * (`TaskStore.updateSettled`), and then nothing is left to settle after it.
   */
  const stored = (current: TaskRecord, record: TaskRecord, callbacks: ReadonlyArray<CallbackRow>, now: number) => {
    const kind = isTerminal(current.status) ? undefined : Credits.settlementOf(record.status)
    const updateSettled = store.updateSettled
    return kind === undefined || updateSettled === undefined || !Credits.sharesDatabase(ledger, store)
      ? withCallbacks(record, callbacks, now, (callbacks) => Effect.as(store.update(record, current.version, callbacks), false))
      : Effect.flatMap(Credits.entryId(ids), (id) =>
        withCallbacks(record, callbacks, now, (callbacks) => Effect.as(updateSettled(record, current.version, callbacks, { id, at: now, kind }), true)))
  }

  const write = (current: TaskRecord, next: Either.Either<TaskRecord, IllegalTransition>, now: number) =>
    Effect.flatMap(next, (proposed) =>
      Effect.flatMap(callbacksOwed(current, proposed), ({ callbacks, record }) =>
        stored(current, record, callbacks, now).pipe(
          Effect.tapErrorTag("StoreError", () => maybeEnded(current.status, record, now)),
          Effect.tap(() => changes.publish(record, current)),
          Effect.flatMap((settledWithIt) => settledWithIt ? Effect.void : settled(current.status, record, now)),
          Effect.zipRight(!isTerminal(current.status) && isTerminal(record.status) ? Metrics.taskEnded(record) : Effect.void),
          Effect.as(record)
        )))

  /** A new task stored by `store` with the callbacks it owes. */
  const created = <E>(proposed: TaskRecord, store: (record: TaskRecord, callbacks: ReadonlyArray<CallbackRow>) => Effect.Effect<void, E>) =>
    Effect.flatMap(callbacksOwed(null, proposed), ({ callbacks, record }) =>
      withCallbacks(record, callbacks, record.createdAt, (callbacks) => store(record, callbacks)).pipe(
        Effect.zipRight(Metrics.taskSubmitted(record))
      ))

  return {
    create: (proposed) => created(proposed, store.create),
    createHeld: (proposed, now, monthlyCapMicroUsd = null) =>
      created(proposed, (record, callbacks) => Credits.storeHeld(ledger, store, ids, record, callbacks, now, monthlyCapMicroUsd)),
    apply: (current, change, now, options = {}) => {
      const base = options.attempts === undefined && options.progress === undefined ? current : new TaskRecord({
        ...current,
        ...(options.attempts === undefined ? {} : { attempts: options.attempts }),
        ...(options.progress === undefined ? {} : { progress: options.progress })
      }, true)
      return write(current, Either.map(Transition.apply(base, change, now), (next) => leased(next, options.lease)), now)
    },
    reschedule: (current, dueAt, { lease, ...patch } = {}) =>
      write(current, Either.map(Transition.reschedule(current, dueAt, patch), (next) => leased(next, lease)), dueAt)
  }
})

/** The write path as a layer: one per composition, so that the use cases and the engine share it. */
export const layer: Layer.Layer<TaskWrites, never, TaskStore | Ids | Ledger | TaskChanges | CallbackWakeup> = Layer.effect(TaskWrites, make)
