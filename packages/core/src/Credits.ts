/**
 * What credits do over a task's life, each rule in one place: the submit reserves the task's
 * price before the task is stored (`reserve`), the write that ends the task charges it on
 * SUCCESS and gives it back on FAILURE, TIMEOUT and CANCELLED (`settle`), and the
 * scheduler's settlement sweep finishes what a crash left between two writes. Amounts are
 * integer micro-USD (1 USD = 1,000,000).
 */
import type { Option } from "effect"
import { Effect, Either } from "effect"
import type { Ids } from "./Ids.js"
import * as Ledger from "./Ledger.js"
import type { TaskStatus } from "./Task.js"
import { isTerminal } from "./Task.js"
import type { TaskRecord } from "./Task.js"

/** The movement that ends a task's reservation: a charge on SUCCESS, a release on any other end; none while it runs. */
export const settlementOf = (status: TaskStatus): "charge" | "release" | undefined =>
  status === "SUCCESS" ? "charge" : isTerminal(status) ? "release" : undefined

/** A new ledger entry id. */
export const entryId = (ids: Ids["Type"]) => Effect.map(ids.token(12), (token) => `le_${token}`)

/**
 * Holds the price of the task `record` is about to store, for its owner. Fails with
 * InsufficientCredits, which the submit turns into a task that ends FAILURE with
 * INSUFFICIENT_POINTS.
 */
export const reserve = (ledger: Ledger.Ledger["Type"], ids: Ids["Type"], record: TaskRecord, now: number) =>
  Effect.flatMap(entryId(ids), (id) =>
    ledger.reserve({ id, accountId: record.ownerId, taskId: record.id, amount: record.job.priceMicroUsd, at: now }))

/**
 * Ends an ended task's reservation as its status says, once whoever asks. A task without a
 * reservation (stored before credits existed, or by a host without a Ledger) has nothing to
 * end: none.
 */
export const settle = (
  ledger: Ledger.Ledger["Type"],
  ids: Ids["Type"],
  record: Pick<TaskRecord, "id" | "status">,
  now: number
): Effect.Effect<Option.Option<Ledger.LedgerEntry>> => {
  const kind = settlementOf(record.status)
  if (kind === undefined) return Effect.succeedNone
  return entryId(ids).pipe(
    Effect.flatMap((id) => ledger[kind]({ id, taskId: record.id, at: now })),
    Effect.asSome,
    Effect.catchTag("NoReservation", () => Effect.succeedNone)
  )
}

/** `micro` micro-USD as dollars, with at least two decimals: 20000 is `$0.02`, 1500 is `$0.0015`. */
export const formatUsd = (micro: number): string => {
  const sign = micro < 0 ? "-" : ""
  const digits = String(Math.abs(micro)).padStart(7, "0")
  const fraction = digits.slice(-6).replace(/0+$/, "").padEnd(2, "0")
  return `${sign}$${digits.slice(0, -6)}.${fraction}`
}

/**
 * Dollars as an operator writes them (`10`, `0.50`, `$5`, `1e-3` is refused) into whole
 * micro-USD, exactly: at most six decimals, more than zero, at most a billion dollars.
 */
export const parseUsd = (raw: string): Either.Either<number, string> => {
  const match = /^\$?(\d{1,10})(?:\.(\d{1,6}))?$/.exec(raw.trim())
  if (match === null) return Either.left(`must be an amount in US dollars with at most six decimals, such as 10 or 0.25 (got ${JSON.stringify(raw)})`)
  const micro = Number(match[1]) * 1_000_000 + Number((match[2] ?? "").padEnd(6, "0"))
  if (micro <= 0) return Either.left("must be more than zero")
  if (micro > 1_000_000_000 * 1_000_000) return Either.left("must be at most 1000000000 dollars")
  return Either.right(micro)
}

/** The sentence of a task refused for want of credits. */
export const insufficientMessage = (error: Ledger.InsufficientCredits) =>
  `insufficient credits: the task costs ${formatUsd(error.requested)} and the account has ${formatUsd(Math.max(0, error.available))} available`
