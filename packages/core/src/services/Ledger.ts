/**
 * Credits, in integer micro-USD, as a ledger of movements per account. The submit reserves a
 * task's price, the task's terminal write charges it (SUCCESS) or releases it (any other end),
 * and the scheduler's settlement sweep finishes what a crash left between two writes
 * (`Credits`). One contract suite runs on every backend.
 *
 * Each entry moves two sums of its account: `amount` the balance (money held for the
 * account), `held` the reserved part of it. A credit adds to the balance; a reservation
 * holds part of it for a task; a charge takes the held amount out of both; a release gives
 * the hold back. So the balance is the sum of the entries' `amount`, what is reserved the
 * sum of their `held`, and what may still be reserved the difference.
 *
 * | kind | amount | held |
 * |---|---|---|
 * | credit | +a | 0 |
 * | reserve | 0 | +a |
 * | charge | -a | -a |
 * | release | 0 | -a |
 *
 * A task has at most one reservation, and then at most one charge or release of it: each is
 * written once, whoever asks again (a retried step, a second node) gets the entry already
 * written. A reservation that would leave less than nothing available is refused.
 */
import { Context, Data, Effect, Layer, Option } from "effect"
import type { StoreError } from "../domain/Errors.js"
import type { AccountId } from "../domain/Ids.js"

export type EntryKind = "credit" | "reserve" | "charge" | "release"

export interface LedgerEntry {
  readonly id: string
  readonly accountId: AccountId
  /** The task the movement is for; null for credits. */
  readonly taskId: string | null
  readonly kind: EntryKind
  /** What the entry adds to the balance (micro-USD, may be negative). */
  readonly amount: number
  /** What the entry adds to the reserved sum (micro-USD, may be negative). */
  readonly held: number
  readonly at: number
  readonly note: string | null
  /** The key the task was submitted with, copied from its reservation; null for credits and where unknown. */
  readonly keyId?: string | null | undefined
  /** The task's model as submitted, copied from its reservation; null for credits and where unknown. */
  readonly model?: string | null | undefined
}

export interface Balance {
  /** The sum of the entries' `amount`. */
  readonly balance: number
  /** The sum of the entries' `held`: reserved for tasks not yet ended. */
  readonly reserved: number
}

/**
 * What a credit answers: the entry with the id asked for, and whether this call wrote it. A
 * credit asked again with the same id (a retried top-up) writes nothing: its answer is the
 * entry written the first time, which may even be another account's or another kind's.
 */
export interface Credited {
  readonly entry: LedgerEntry
  /** False when the entry already existed: nothing was credited by this call. */
  readonly written: boolean
}

/** A reservation larger than what the account has available. */
export class InsufficientCredits extends Data.TaggedError("InsufficientCredits")<{
  readonly accountId: AccountId
  readonly requested: number
  readonly available: number
}> {}

/** A charge or release for a task that has no reservation. */
export class NoReservation extends Data.TaggedError("NoReservation")<{ readonly taskId: string }> {}

/** A reservation to write: `amount` held from the account for the task, under the entry id `id`. */
export interface Hold {
  readonly id: string
  readonly accountId: AccountId
  readonly taskId: string
  readonly amount: number
  readonly at: number
  /** The key the task is submitted with, and its model: kept on the entry (and its charge or release) for usage reports. */
  readonly keyId?: string | null | undefined
  readonly model?: string | null | undefined
  /**
   * The key's monthly cap (`ApiKeys.KeyScope.monthlyCapMicroUsd`): the hold is refused with
   * KeyCapReached when what the key has reserved in `at`'s UTC month, less what was
   * released, plus `amount` would pass it. Needs `keyId`.
   */
  readonly monthlyCapMicroUsd?: number | null | undefined
}

/** A reservation refused: the key's spending in `month` (`2026-12`, UTC) would pass its cap. */
export class KeyCapReached extends Data.TaggedError("KeyCapReached")<{
  readonly keyId: string
  readonly month: string
  readonly capMicroUsd: number
  /** What counts against the cap in that month already (reservations not released). */
  readonly usedMicroUsd: number
  readonly requested: number
}> {}

/** Why a reservation is refused: the account cannot pay, or the key's monthly cap would be passed. Nothing is written either way. */
export type HoldRefused = InsufficientCredits | KeyCapReached

/** The ledger. Every operation may fail with StoreError when the database does not answer, as in the TaskStore. */
export class Ledger extends Context.Tag("@mediagate/core/Ledger")<Ledger, {
  /**
   * The database (and table prefix) the entries are kept in, when a TaskStore can write
   * there too: a store with the same `databaseId` writes a new task and its reservation in
   * one transaction (`TaskStore.createHeld`). Absent: the ledger shares no transaction.
   */
  readonly databaseId?: string | undefined
  /** Adds `amount` (> 0) to the account's balance, once per entry id: asked again with the same id, the entry already written, not written now. */
  readonly credit: (input: { readonly id: string; readonly accountId: AccountId; readonly amount: number; readonly at: number; readonly note: string | null }) => Effect.Effect<Credited, StoreError>
  /**
   * Holds `amount` for the task, once; the existing reservation when there is one. Refused
   * when the account cannot pay it (InsufficientCredits) or the key's cap would be passed
   * (KeyCapReached), the key's count and the account's sums both moved or neither. A
   * release of a capped key's reservation gives its amount back to the reservation's month.
   */
  readonly reserve: (input: Hold) => Effect.Effect<LedgerEntry, HoldRefused | StoreError>
  /** Takes the task's held amount out of the balance, once; the existing charge or release when there is one. */
  readonly charge: (input: { readonly id: string; readonly taskId: string; readonly at: number }) => Effect.Effect<LedgerEntry, NoReservation | StoreError>
  /** Gives the task's held amount back, once; the existing charge or release when there is one. */
  readonly release: (input: { readonly id: string; readonly taskId: string; readonly at: number }) => Effect.Effect<LedgerEntry, NoReservation | StoreError>
  readonly balance: (accountId: AccountId) => Effect.Effect<Balance, StoreError>
  /** The account's entries, newest first. */
  readonly entries: (accountId: AccountId, limit: number) => Effect.Effect<ReadonlyArray<LedgerEntry>, StoreError>
  /** The task's entries, oldest first. */
  readonly forTask: (taskId: string) => Effect.Effect<ReadonlyArray<LedgerEntry>, StoreError>
  /** The reservation of a task, if any. */
  readonly reservation: (taskId: string) => Effect.Effect<Option.Option<LedgerEntry>, StoreError>
  /**
   * Reservations not yet charged or released, made before `before`, oldest first (by `at`,
   * then task id), `limit` at a time after `after` (the last of the previous page): what the
   * settlement sweep looks at. Costs what is open, not the ledger's history.
   */
  readonly open: (options: {
    readonly before: number
    readonly limit: number
    readonly after?: { readonly at: number; readonly taskId: string } | undefined
  }) => Effect.Effect<ReadonlyArray<LedgerEntry>, StoreError>
}>() {}

/**
 * A ledger that bills nothing, for a host that keeps no credits: every reservation is granted
 * and holds nothing, so a task never fails for want of credit, and its end has no reservation
 * to charge or release (`Credits.settle` answers none). Nothing is kept: balances read 0, the
 * settlement sweep finds nothing open.
 */
export const layerUnbilled: Layer.Layer<Ledger> = Layer.succeed(Ledger, {
  credit: (input) => Effect.succeed({ entry: { ...input, taskId: null, kind: "credit", held: 0 }, written: true }),
  reserve: ({ accountId, at, id, taskId }) => Effect.succeed({ id, accountId, taskId, kind: "reserve", amount: 0, held: 0, at, note: null }),
  charge: ({ taskId }) => Effect.fail(new NoReservation({ taskId })),
  release: ({ taskId }) => Effect.fail(new NoReservation({ taskId })),
  balance: () => Effect.succeed({ balance: 0, reserved: 0 }),
  entries: () => Effect.succeed([]),
  forTask: () => Effect.succeed([]),
  reservation: () => Effect.succeedNone,
  open: () => Effect.succeed([])
})
