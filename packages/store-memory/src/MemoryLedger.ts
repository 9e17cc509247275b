/**
 * The Ledger in memory. Every method is atomic: JavaScript runs it without interleaving.
 * A capped key's count per UTC month (`KeyScopes.monthOf` of the reservation) is moved with
 * its reservation and release, as the SQL ledger's key_spend table is.
 */
import { Ids, KeyScopes, Ledger } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option } from "effect"

/** An entry's key and model: absent, not null, where unknown (as the SQL ledger answers them). */
const keyAndModel = (keyId: string | null, model: string | null) => ({
  ...(keyId === null ? {} : { keyId }),
  ...(model === null ? {} : { model })
})

/** A ledger in memory. Its operations cannot fail with StoreError, and its type says so. */
export const make = () => {
  const entries: Array<Ledger.LedgerEntry> = []
  const sums = new Map<string, { balance: number; reserved: number }>()
  /** A task's reservation and its end (charge or release). */
  const reservations = new Map<string, Ledger.LedgerEntry>()
  const ends = new Map<string, Ledger.LedgerEntry>()
  /** Reservations without an end yet, by task. */
  const open = new Map<string, Ledger.LedgerEntry>()
  const credits = new Map<string, Ledger.LedgerEntry>()
  /** What counts against capped keys' caps, by key id and month (`key\u0000month`). */
  const keySpend = new Map<string, number>()
  const spendOf = (keyId: string, at: number) => `${keyId}\u0000${KeyScopes.monthOf(at)}`
  const write = (entry: Ledger.LedgerEntry) => {
    entries.push(entry)
    const sum = sums.get(entry.accountId) ?? { balance: 0, reserved: 0 }
    sum.balance += entry.amount
    sum.reserved += entry.held
    sums.set(entry.accountId, sum)
    return entry
  }
  const end = (kind: "charge" | "release") => ({ at, id, taskId }: { readonly id: string; readonly taskId: string; readonly at: number }) =>
    Effect.suspend(() => {
      const done = ends.get(taskId)
      if (done !== undefined) return Effect.succeed(done)
      const held = reservations.get(taskId)
      if (held === undefined) return Effect.fail(new Ledger.NoReservation({ taskId }))
      const entry = write({
        id,
        accountId: held.accountId,
        taskId,
        kind,
        amount: kind === "charge" ? -held.held : 0,
        held: -held.held,
        at,
        note: null,
        ...keyAndModel(held.keyId ?? null, held.model ?? null)
      })
      // A release gives the key's cap back what the reservation took in its month; a charge leaves it.
      const spend = held.keyId == null ? undefined : spendOf(held.keyId, held.at)
      if (kind === "release" && spend !== undefined && keySpend.has(spend)) keySpend.set(spend, keySpend.get(spend)! - held.held)
      ends.set(taskId, entry)
      open.delete(taskId)
      return Effect.succeed(entry)
    })
  return {
    credit: ({ accountId, amount, at, id, note }) =>
      Effect.suspend(() =>
        !Number.isSafeInteger(amount) || amount <= 0
          ? Effect.dieMessage(`a credit must be a positive whole number of micro-USD (got ${amount})`)
          : Effect.sync(() => {
            const existing = credits.get(id)
            if (existing !== undefined) return { entry: existing, written: false }
            const entry = write({ id, accountId, taskId: null, kind: "credit", amount, held: 0, at, note })
            credits.set(id, entry)
            return { entry, written: true }
          })
      ),
    reserve: ({ accountId, amount, at, id, keyId = null, model = null, monthlyCapMicroUsd = null, taskId }) =>
      Effect.suspend((): Effect.Effect<Ledger.LedgerEntry, Ledger.HoldRefused> => {
        const existing = reservations.get(taskId)
        if (existing !== undefined) return Effect.succeed(existing)
        const spend = keyId === null || monthlyCapMicroUsd === null ? undefined : spendOf(keyId, at)
        const used = spend === undefined ? 0 : keySpend.get(spend) ?? 0
        if (spend !== undefined && used + amount > monthlyCapMicroUsd!) {
          return Effect.fail(
            new Ledger.KeyCapReached({ keyId: keyId!, month: KeyScopes.monthOf(at), capMicroUsd: monthlyCapMicroUsd!, usedMicroUsd: used, requested: amount })
          )
        }
        const sum = sums.get(accountId) ?? { balance: 0, reserved: 0 }
        const available = sum.balance - sum.reserved
        if (amount > available) return Effect.fail(new Ledger.InsufficientCredits({ accountId, requested: amount, available }))
        if (spend !== undefined) keySpend.set(spend, used + amount)
        const entry = write({ id, accountId, taskId, kind: "reserve", amount: 0, held: amount, at, note: null, ...keyAndModel(keyId, model) })
        reservations.set(taskId, entry)
        open.set(taskId, entry)
        return Effect.succeed(entry)
      }),
    charge: end("charge"),
    release: end("release"),
    balance: (accountId) => Effect.sync(() => ({ ...(sums.get(accountId) ?? { balance: 0, reserved: 0 }) })),
    entries: (accountId, limit) => Effect.sync(() => entries.filter((entry) => entry.accountId === accountId).reverse().slice(0, limit)),
    forTask: (taskId) => Effect.sync(() => entries.filter((entry) => entry.taskId === taskId)),
    reservation: (taskId) => Effect.sync(() => Option.fromNullable(reservations.get(taskId))),
    open: ({ after, before, limit }) =>
      Effect.sync(() =>
        [...open.values()]
          .filter((entry) => entry.at < before && (after === undefined || entry.at > after.at || (entry.at === after.at && entry.taskId! > after.taskId)))
          .sort((a, b) => a.at - b.at || (a.taskId! < b.taskId! ? -1 : a.taskId! > b.taskId! ? 1 : 0))
          .slice(0, limit)
      )
  } satisfies Context.Tag.Service<Ledger.Ledger>
}

export const layer: Layer.Layer<Ledger.Ledger> = Layer.sync(Ledger.Ledger, make)

/** A ledger whose accounts start with these credits (micro-USD), each one entry `credit` at time 0. */
export const layerWithCredits = (
  credits: ReadonlyArray<{ readonly accountId: string; readonly amount: number }>
): Layer.Layer<Ledger.Ledger> =>
  Layer.effect(
    Ledger.Ledger,
    Effect.suspend(() => {
      const ledger = make()
      return Effect.forEach(
        credits,
        ({ accountId, amount }) => ledger.credit({ id: `starting-credits:${accountId}`, accountId: Ids.AccountId.make(accountId), amount, at: 0, note: "starting credits" }),
        { discard: true }
      ).pipe(Effect.as(ledger))
    })
  )
