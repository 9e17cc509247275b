/**
 * What credits do over a task's life, each rule in one place: the submit stores the task with
 * its price held, both or neither (`storeHeld`), the write that ends the task charges it on
 * SUCCESS and gives it back on FAILURE, TIMEOUT and CANCELLED (`settle`), a settlement that
 * failed (a dropped database connection) is tried again at once in the background
 * (`settleRetrying`), and the scheduler's settlement sweep finishes what a crash left between
 * two writes. Amounts are integer micro-USD (1 USD = 1,000,000).
 */
import { Clock, Duration, Effect, Option, Schedule } from "effect"
import type { StoreError } from "../domain/Errors.js"
import { formatUsd } from "../domain/Usd.js"
import type { Ids } from "../domain/Ids.js"
import * as Ledger from "../services/Ledger.js"
import type { TaskStatus } from "../domain/Task.js"
import { isTerminal } from "../domain/Task.js"
import type { TaskRecord } from "../domain/Task.js"
import type { CallbackRow, TaskStore } from "../services/TaskStore.js"

/** The movement that ends a task's reservation: a charge on SUCCESS, a release on any other end; none while it runs. */
export const settlementOf = (status: TaskStatus): "charge" | "release" | undefined =>
  status === "SUCCESS" ? "charge" : isTerminal(status) ? "release" : undefined

/** Whether the store keeps its tasks in the ledger's database: then a task's write and its credits' movement can be one transaction. */
export const sharesDatabase = (ledger: Ledger.Ledger["Type"], store: TaskStore["Type"]): boolean =>
  store.databaseId !== undefined && store.databaseId === ledger.databaseId

/** A new ledger entry id. */
export const entryId = (ids: Ids["Type"]) => Effect.map(ids.token(12), (token) => `le_${token}`)

/**
 * Stores the new task `record` (with the callbacks it owes) with its price held for its
 * owner, both or neither. Fails with InsufficientCredits, having written nothing, which the
 * submit turns into a task that ends FAILURE with INSUFFICIENT_POINTS; or with KeyCapReached
 * when its key (`record.keyId`) has a monthly cap (`monthlyCapMicroUsd`) the hold would
 * pass, having written nothing, which the submit refuses (403). The hold carries the key and
 * the model, which its entries keep.
 *
 * A store that keeps its tasks in the ledger's database (the same `databaseId`) writes both
 * in one transaction (`TaskStore.createHeld`). Otherwise the hold is written first and the
 * task after it, the two never split by an interruption; a task write that fails leaves a
 * hold without a task, which `lapse` gives back within moments unless the task was stored
 * all the same.
 */
export const storeHeld = (
  ledger: Ledger.Ledger["Type"],
  store: TaskStore["Type"],
  ids: Ids["Type"],
  record: TaskRecord,
  callbacks: ReadonlyArray<CallbackRow>,
  now: number,
  monthlyCapMicroUsd: number | null = null
): Effect.Effect<void, Ledger.HoldRefused | StoreError> =>
  Effect.flatMap(entryId(ids), (id) => {
    const hold: Ledger.Hold = {
      id,
      accountId: record.ownerId,
      taskId: record.id,
      amount: record.job.priceMicroUsd,
      at: now,
      keyId: record.keyId,
      model: typeof record.input["model"] === "string" ? record.input["model"] : null,
      monthlyCapMicroUsd: record.keyId === null ? null : monthlyCapMicroUsd
    }
    if (store.createHeld !== undefined && sharesDatabase(ledger, store)) {
      return store.createHeld(record, callbacks, hold)
    }
    return Effect.uninterruptible(
      Effect.zipRight(ledger.reserve(hold), store.create(record, callbacks).pipe(Effect.onError(() => lapse(ledger, store, ids, record.id))))
    )
  })

/**
 * The hold of a task whose write failed (the ledger in another database than the task):
 * released unless the task was stored all the same (the write's answer was lost), read back
 * and tried again on `retrySchedule` in the background, as `settleRetrying` is; past that the
 * settlement sweep has it. A daemon fiber, bounded in time: the submit goes on to fail.
 */
const lapse = (ledger: Ledger.Ledger["Type"], store: TaskStore["Type"], ids: Ids["Type"], taskId: TaskRecord["id"]) =>
  store.get(taskId).pipe(
    Effect.flatMap(Option.match({
      onSome: () => Effect.succeed(false),
      onNone: () =>
        Effect.all([entryId(ids), Clock.currentTimeMillis]).pipe(
          Effect.flatMap(([id, at]) => ledger.release({ id, taskId, at })),
          Effect.as(true),
          Effect.catchTag("NoReservation", () => Effect.succeed(false))
        )
    })),
    Effect.retry(retrySchedule),
    Effect.flatMap((released) =>
      released ? Effect.logWarning(`credits: released the hold of task ${taskId}, whose write failed`) : Effect.void
    ),
    Effect.catchAll((cause) =>
      Effect.logWarning(`credits: the hold of task ${taskId}, whose write failed, is still held after retries; the settlement sweep will release it`, cause)
    ),
    Effect.forkDaemon,
    Effect.asVoid
  )

/**
 * Ends an ended task's reservation as its status says, once whoever asks. A task without a
 * reservation (stored before credits existed, or under `Ledger.layerUnbilled`) has nothing to
 * end: none.
 */
export const settle = (
  ledger: Ledger.Ledger["Type"],
  ids: Ids["Type"],
  record: Pick<TaskRecord, "id" | "status">,
  now: number
): Effect.Effect<Option.Option<Ledger.LedgerEntry>, StoreError> => {
  const kind = settlementOf(record.status)
  if (kind === undefined) return Effect.succeedNone
  return entryId(ids).pipe(
    Effect.flatMap((id) => ledger[kind]({ id, taskId: record.id, at: now })),
    Effect.asSome,
    Effect.catchTag("NoReservation", () => Effect.succeedNone)
  )
}

/**
 * How a settlement that failed is tried again: after 100 ms, then twice as long each time up
 * to 2 s between tries, for 2 minutes. A dropped connection is usually replaced by the next
 * try; a database that keeps dropping them (an outage, a failover) is settled at most 2 s
 * after it is back, not at the settlement sweep's next run. Past 2 minutes the sweep has it.
 */
export const retrySchedule: Schedule.Schedule<unknown> = Schedule.exponential("100 millis").pipe(
  Schedule.modifyDelay((_, delay) => Duration.min(delay, Duration.seconds(2))),
  Schedule.upTo("2 minutes")
)

/**
 * `settle` for the task `task` reads, tried again on `retrySchedule` while the read or the
 * movement fails with a StoreError (a defect is a bug, not tried again).
 * `task` is the ended record when the task's write is known to be stored, or a read of the
 * store when the writer did not hear whether it was (the task may not have ended after all:
 * then there is nothing to settle yet). Each movement is written once per task whoever asks,
 * so a try that was written but not heard is harmless. Fails with the last try's error.
 */
export const settleRetrying = (
  ledger: Ledger.Ledger["Type"],
  ids: Ids["Type"],
  task: Effect.Effect<Option.Option<Pick<TaskRecord, "id" | "status">>, StoreError>,
  now: number
): Effect.Effect<Option.Option<Ledger.LedgerEntry>, StoreError> =>
  task.pipe(
    Effect.flatMap(Option.match({ onNone: () => Effect.succeedNone, onSome: (record) => settle(ledger, ids, record, now) })),
    Effect.retry(retrySchedule)
  )

export { formatUsd, parseUsd, usdDecimal } from "../domain/Usd.js"

/** The sentence of a task refused for want of credits. */
export const insufficientMessage = (error: Ledger.InsufficientCredits) =>
  `insufficient credits: the task costs ${formatUsd(error.requested)} and the account has ${formatUsd(Math.max(0, error.available))} available`
