/**
 * Where tasks live. Backends: @mediagate/store-memory, @mediagate/store-sql.
 */
import type { Effect, Option } from "effect"
import { Context } from "effect"
import type { StoreError, TaskConflict } from "../domain/Errors.js"
import type { AccountId, TaskId } from "../domain/Ids.js"
import type { CallbackEvent, TaskRecord, TaskStatus } from "../domain/Task.js"
import type { Hold, HoldRefused } from "./Ledger.js"

/** Options of a claim for due work. */
export interface ClaimOptions {
  readonly now: number
  readonly limit: number
  readonly worker: string
  /** The lease holds until this time; nobody else claims the task before then. */
  readonly leaseUntil: number
  /**
   * Limits on starting new work. A task is running from its claim out of PENDING until it
   * ends: SUBMITTED, PROCESSING, or PENDING under a live lease. A PENDING task is claimed
   * only while fewer than `running` tasks run in all and fewer than `perAccount` of its
   * owner's, and, for a task with a `provider`, fewer than `perProvider[provider]` of those
   * with the same provider (`perProvider["*"]` for a provider not named; default: no such
   * limit), and, for a provider named in `within`, fewer than the limit of
   * `within[provider]` of those counted under that one. Work in flight (polls, a task whose
   * worker died) is claimed regardless. Default: no limits. Data, not functions, so that a
   * store can plan the claim where its database is (the SQLite worker does).
   */
  readonly limits?: {
    readonly running: number
    readonly perAccount: number
    readonly perProvider?: Readonly<Record<string, number>>
    /**
     * Names that count against a second limit as well as their own: a route target with a
     * limit of its own (`fal:fal-ai/flux/dev`) to its provider (`fal`). A task whose
     * `provider` is such a target counts against both, and starts only while both have room.
     */
    readonly within?: Readonly<Record<string, string>>
  }
}

/**
 * A callback to deliver, written in the same transaction as the terminal transition that
 * causes it, so a task never ends without its callback being owed (transactional outbox).
 */
export interface CallbackRow {
  /** Stable across retries: the `webhook-id` of every attempt. */
  readonly id: string
  readonly taskId: TaskId
  readonly url: string
  readonly createdAt: number
  /**
   * The event it tells of, for a task that asked for callback events (`callBackEvents`);
   * absent for the spec's one terminal callback, whose body has no `event`.
   */
  readonly event?: CallbackEvent | undefined
  /** When its first attempt is due, if not at once (`createdAt`): a throttled progress callback. */
  readonly dueAt?: number | undefined
  /**
   * Written leased until then: handed to the deliverer of the process that writes it
   * (`CallbackWakeup.reserve`), which sends it without a claim. No claim takes it before
   * then; after, it is owed as any other (the process stopped before sending it).
   */
  readonly leaseUntil?: number | undefined
}

/** A callback due for delivery, as a deliverer claims it. */
export interface DueCallback extends CallbackRow {
  /** Attempts made so far, in every round. */
  readonly attempts: number
  /**
   * Attempts made before the current delivery round (0 until a redeliver starts a new one):
   * the retry schedule counts from here, the attempt numbers do not.
   */
  readonly roundStart: number
  /**
   * The task, read with the claim (in the same statement on SQL), so that the deliverer does
   * not read it once more per callback; null when it no longer exists. Absent when the store
   * does not read it with the claim: the deliverer reads it then.
   */
  readonly task?: TaskRecord | null
}

/** Where a callback's delivery stands: an attempt due (pending), delivered, or given up (failed). */
export type CallbackStatus = "pending" | "delivered" | "failed"

/** A callback and where its delivery stands, as the callbacks endpoint shows it. */
export interface CallbackState extends CallbackRow {
  /** Attempts made so far, in every round. */
  readonly attempts: number
  readonly status: CallbackStatus
  /** When the next attempt is due; null once delivered or given up. */
  readonly nextAttemptAt: number | null
}

/** One delivery attempt and what follows from it. */
export interface CallbackAttempt {
  readonly callbackId: string
  /** 1 for the first attempt. */
  readonly attempt: number
  readonly at: number
  /** HTTP status of the receiver's answer, or null when there was none. */
  readonly status: number | null
  /** Why the attempt failed, or null when it was delivered. */
  readonly error: string | null
  readonly durationMs: number
  /** What happens next: delivered, another attempt at `retryAt`, or given up. */
  readonly outcome: { readonly _tag: "Delivered" } | { readonly _tag: "Retry"; readonly retryAt: number } | { readonly _tag: "GaveUp" }
}

/** Which of an owner's tasks a list shows: every condition given must hold. */
export interface ListFilter {
  /** In one of these statuses. */
  readonly statuses?: ReadonlyArray<TaskStatus> | undefined
  /** Of this model, as submitted (`input.model`). */
  readonly model?: string | undefined
  /** Created strictly after this time (epoch milliseconds). */
  readonly createdAfter?: number | undefined
  /** Created strictly before this time (epoch milliseconds). */
  readonly createdBefore?: number | undefined
}

/** Which tasks of every owner the admin list shows (`listAll`): the owner's filter, and these. */
export interface AdminListFilter extends ListFilter {
  /** Owned by this account. */
  readonly ownerId?: AccountId | undefined
  /** Run by this provider (`TaskRecord.provider`, the upstream's name for where the job runs). */
  readonly provider?: string | undefined
}

/** A page of an owner's tasks, newest first. */
export interface TaskPage {
  readonly tasks: ReadonlyArray<TaskRecord>
  /** Pass it back as `cursor` for the next page; null on the last page. */
  readonly nextCursor: TaskId | null
}

/**
 * The task store. Every operation may fail with StoreError when the database does not answer
 * (logged where it happens; the HTTP layer answers 503 with Retry-After for a database out
 * of reach, 500 otherwise; the engine and the deliverer try again later); `update` also fails with TaskConflict on a lost optimistic check. A backend
 * whose database is unreachable at start fails to build its layer.
 */
export class TaskStore extends Context.Tag("@mediagate/core/TaskStore")<TaskStore, {
  /** Stores a new task, with the callbacks it already owes (a task that fails at once). */
  readonly create: (task: TaskRecord, callbacks?: ReadonlyArray<CallbackRow>) => Effect.Effect<void, StoreError>
  /**
   * The database (and table prefix) the tasks are kept in, for a store that can write its
   * ledger's entries too (`createHeld`): the Ledger with the same `databaseId` keeps them there.
   */
  readonly databaseId?: string | undefined
  /**
   * `create` and the ledger's `reserve` of `hold` (the Ledger whose `databaseId` is this
   * store's) in one transaction: both or neither. Too little credit fails it with
   * InsufficientCredits, and nothing is written.
   */
  readonly createHeld?: (
    task: TaskRecord,
    callbacks: ReadonlyArray<CallbackRow>,
    hold: Hold
  ) => Effect.Effect<void, HoldRefused | StoreError>
  /**
   * `update` of a write that ends a task, and the settlement of its reservation by the
   * ledger whose `databaseId` is this store's, in one transaction: both or neither. `end` is
   * the movement (`Credits.settlementOf` the new status), written once for the task as the
   * ledger's charge or release would write it; a task with no reservation has nothing to
   * settle and is updated all the same. Optional: without it the update and the ledger's
   * settlement are two writes.
   */
  readonly updateSettled?: (
    next: TaskRecord,
    expectedVersion: number,
    callbacks: ReadonlyArray<CallbackRow>,
    end: { readonly id: string; readonly at: number; readonly kind: "charge" | "release" }
  ) => Effect.Effect<void, TaskConflict | StoreError>
  /** The task with this id, whoever owns it: for the engine and the deliverer, never for a client's request. */
  readonly get: (id: TaskId) => Effect.Effect<Option.Option<TaskRecord>, StoreError>
  /** The task with this id if `owner` owns it: what a client's request may read. */
  readonly getOwned: (id: TaskId, owner: AccountId) => Effect.Effect<Option.Option<TaskRecord>, StoreError>
  /**
   * Replaces a task with `next` if its stored version is still `expectedVersion`, and
   * records `callbacks`, all or nothing; on a stale version fails with TaskConflict and
   * changes nothing.
   */
  readonly update: (
    next: TaskRecord,
    expectedVersion: number,
    callbacks?: ReadonlyArray<CallbackRow>
  ) => Effect.Effect<void, TaskConflict | StoreError>
  /**
   * Leases up to `limit` non-terminal tasks that are due and not leased by someone else:
   * work in flight first, earliest due first; then PENDING tasks within `limits`, taking the
   * owners in turn (an owner's waiting tasks line up behind its running ones, and the lines
   * are served a place at a time), so one account's burst does not keep another's task
   * waiting behind it.
   */
  readonly claimDue: (options: ClaimOptions) => Effect.Effect<ReadonlyArray<TaskRecord>, StoreError>
  /**
   * Gives up every lease `worker` holds (a node shutting down), so other workers take its
   * tasks at once; their due times, and so their places in line, stay as they were.
   */
  readonly releaseLeases: (worker: string) => Effect.Effect<void, StoreError>
  /** How many tasks wait PENDING, every owner's (for the queue-depth metric). Optional for stores that cannot count cheaply. */
  readonly countPending?: Effect.Effect<number, StoreError>
  /**
   * An owner's tasks, newest first, `limit` at a time, those the filter lets through; stable
   * while new tasks arrive. The next page passes the same filter with the cursor.
   */
  readonly list: (
    owner: AccountId,
    options: { readonly limit: number; readonly cursor?: TaskId | undefined; readonly filter?: ListFilter | undefined }
  ) => Effect.Effect<TaskPage, StoreError>
  /**
   * Every owner's tasks, newest first, `limit` at a time, those the filter lets through; as
   * `list`, for operators (the admin API), never for a client's request.
   */
  readonly listAll: (
    options: { readonly limit: number; readonly cursor?: TaskId | undefined; readonly filter?: AdminListFilter | undefined }
  ) => Effect.Effect<TaskPage, StoreError>
  /** The callbacks owed for a task, oldest first, each with where its delivery stands. */
  readonly callbacks: (taskId: TaskId) => Effect.Effect<ReadonlyArray<CallbackState>, StoreError>
  /**
   * Starts a new delivery round for a task's terminal callback (its `event` absent or
   * `completed`; `started` and `progress` ones are not sent again), delivered and given up
   * ones included: it is due at `now`, the retry schedule starts over (`roundStart` is the
   * attempts made so far), its id and attempt numbering carry on. An attempt in flight is
   * not stopped; its outcome, when recorded, stands as the new round's first. Answers how
   * many callbacks it restarted.
   */
  readonly redeliverCallbacks: (taskId: TaskId, now: number) => Effect.Effect<number, StoreError>
  /** Leases up to `limit` callbacks whose next attempt is due, earliest first, each with its task where the store reads it at once (`DueCallback.task`). */
  readonly claimCallbacks: (options: {
    readonly now: number
    readonly limit: number
    readonly leaseUntil: number
  }) => Effect.Effect<ReadonlyArray<DueCallback>, StoreError>
  /** Records an attempt and its consequence (delivered, retry time, given up), releasing the lease. */
  readonly recordCallbackAttempt: (attempt: CallbackAttempt) => Effect.Effect<void, StoreError>
  /**
   * Records several attempts, of different callbacks, as `recordCallbackAttempt` would one
   * after the other, in one write (one transaction on SQL): a deliverer writes the attempts
   * that ended together at once.
   */
  readonly recordCallbackAttempts: (attempts: ReadonlyArray<CallbackAttempt>) => Effect.Effect<void, StoreError>
  /** Every attempt made for a callback, in order. */
  readonly callbackAttempts: (callbackId: string) => Effect.Effect<ReadonlyArray<CallbackAttempt>, StoreError>
}>() {}
