/**
 * A scoped key's monthly cap in the ledger, one suite run unchanged against memory, SQLite
 * and PostgreSQL (when MEDIAGATE_TEST_PG_URL is set): racing reservations of one key never
 * take it past its cap, a refusal writes nothing (neither the account's sums nor the key's
 * count), a release gives room back and a charge does not, and a new UTC month starts afresh.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Ids, KeyScopes, Ledger } from "@mediagate/core"
import { MemoryLedger } from "@mediagate/store-memory"
import { Database, SqlLedger } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason } from "@mediagate/store-sql/testing"
import { Clock, Effect, Either, Layer, Redacted, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

let counter = 0
const uniquePrefix = () => `kc${process.pid}_${++counter}_`
const sqliteDir = mkdtempSync(join(tmpdir(), "mediagate-keycap-"))
afterAll(() => rmSync(sqliteDir, { recursive: true, force: true }))
const pgUrl = process.env["MEDIAGATE_TEST_PG_URL"]
pgSkipReason("key-cap-contract")

type Backend = {
  readonly name: string
  readonly shared: Layer.Layer<SqlClient.SqlClient, unknown> | undefined
  readonly ledger: (prefix: string) => Layer.Layer<Ledger.Ledger, unknown, SqlClient.SqlClient>
}

const backends: ReadonlyArray<Backend> = [
  { name: "memory", shared: undefined, ledger: () => MemoryLedger.layer },
  { name: "sqlite", shared: Database.layerSqlite(join(sqliteDir, "keycap.db")), ledger: (tablePrefix) => SqlLedger.layerWith({ tablePrefix }) },
  ...(pgUrl === undefined ? [] : [{
    name: "postgres",
    shared: Layer.unwrapScoped(Effect.map(freshPgDatabase(pgUrl, "keycap"), (target) => Database.layerPg(Redacted.make(target)))),
    ledger: (tablePrefix: string) => SqlLedger.layerWith({ tablePrefix })
  }])
]

const acct = Ids.AccountId.make("acct_capped")
const price = 1_000
/** Room for 7 tasks at `price`, not 8. */
const cap = 7 * price + 500
const december = Date.UTC(2026, 11, 31, 23, 59, 59, 0)
const january = Date.UTC(2027, 0, 1)

for (const backend of backends) {
  const suite = (it: { readonly effect: (name: string, self: () => Effect.Effect<unknown, unknown, any>) => unknown }) => {
    const withLedger = <A, E>(body: (ledger: Ledger.Ledger["Type"]) => Effect.Effect<A, E, SqlClient.SqlClient>) =>
      Effect.flatMap(Ledger.Ledger, body).pipe(Effect.provide(Layer.fresh(backend.ledger(uniquePrefix()))))

    /** A hold of `price` for `taskId` by the capped key, at the Clock's time. */
    const hold = (ledger: Ledger.Ledger["Type"], taskId: string, keyId = "key_capped") =>
      Effect.flatMap(Clock.currentTimeMillis, (at) =>
        ledger.reserve({ id: `r-${taskId}`, accountId: acct, taskId, amount: price, at, keyId, model: "clip3", monthlyCapMicroUsd: cap }))

    /** What a refusal says the key has used this month (and that it is the cap's refusal). */
    const usedNow = (ledger: Ledger.Ledger["Type"], taskId: string) =>
      Effect.map(Effect.flip(hold(ledger, taskId)), (refused) => {
        expect(refused).toBeInstanceOf(Ledger.KeyCapReached)
        return refused as Ledger.KeyCapReached
      })

    it.effect("50 racing reservations of one key against a cap with room for 7: exactly 7 granted, 7 x price counted, nothing else written", () =>
      withLedger((ledger) =>
        Effect.gen(function*() {
          yield* TestClock.setTime(december - 60_000)
          yield* ledger.credit({ id: "c1", accountId: acct, amount: 1_000_000, at: 0, note: null })
          const results = yield* Effect.forEach(
            Array.from({ length: 50 }, (_, i) => `t${i}`),
            (taskId) => Effect.either(hold(ledger, taskId)),
            { concurrency: "unbounded" }
          )
          const granted = results.filter(Either.isRight)
          expect(granted).toHaveLength(7)
          for (const refused of results.filter(Either.isLeft)) {
            expect(refused.left).toMatchObject({ _tag: "KeyCapReached", keyId: "key_capped", month: "2026-12", capMicroUsd: cap, requested: price })
          }
          expect(yield* ledger.balance(acct)).toEqual({ balance: 1_000_000, reserved: 7 * price })
          const refusal = yield* usedNow(ledger, "t-after")
          expect(refusal.usedMicroUsd).toBe(7 * price)
          expect(KeyScopes.capRefusal(refusal)).toBe("this key has spent its $0.0075 cap for 2026-12")
          // The granted reservations carry the key and the model; the refused wrote nothing.
          const entries = yield* ledger.entries(acct, 100)
          expect(entries.filter((entry) => entry.kind === "reserve")).toHaveLength(7)
          expect(entries.filter((entry) => entry.kind === "reserve").every((entry) => entry.keyId === "key_capped" && entry.model === "clip3")).toBe(true)
          // Another key of the same account has its own count.
          yield* hold(ledger, "t-other", "key_other")
        })
      ))

    it.effect("a release gives its amount back to the key's month; a charge does not; both keep the key and model", () =>
      withLedger((ledger) =>
        Effect.gen(function*() {
          yield* TestClock.setTime(december - 60_000)
          yield* ledger.credit({ id: "c1", accountId: acct, amount: 1_000_000, at: 0, note: null })
          for (let i = 0; i < 7; i++) yield* hold(ledger, `t${i}`)
          yield* usedNow(ledger, "t7")
          const charged = yield* ledger.charge({ id: "ch0", taskId: "t0", at: december })
          expect(charged).toMatchObject({ kind: "charge", keyId: "key_capped", model: "clip3" })
          expect((yield* usedNow(ledger, "t7")).usedMicroUsd).toBe(7 * price)
          const released = yield* ledger.release({ id: "rl1", taskId: "t1", at: december })
          expect(released).toMatchObject({ kind: "release", keyId: "key_capped", model: "clip3" })
          expect((yield* hold(ledger, "t7")).held).toBe(price)
          expect((yield* usedNow(ledger, "t8")).usedMicroUsd).toBe(7 * price)
          // A release asked again writes nothing and gives nothing back twice.
          yield* ledger.release({ id: "rl1-again", taskId: "t1", at: december })
          expect((yield* usedNow(ledger, "t8")).usedMicroUsd).toBe(7 * price)
        })
      ))

    it.effect("a new UTC month starts afresh; a release of last month's hold gives room back to last month only", () =>
      withLedger((ledger) =>
        Effect.gen(function*() {
          yield* TestClock.setTime(december)
          yield* ledger.credit({ id: "c1", accountId: acct, amount: 1_000_000, at: 0, note: null })
          for (let i = 0; i < 7; i++) yield* hold(ledger, `d${i}`)
          expect((yield* usedNow(ledger, "d7")).month).toBe("2026-12")
          yield* TestClock.setTime(january)
          for (let i = 0; i < 7; i++) yield* hold(ledger, `j${i}`)
          const refused = yield* usedNow(ledger, "j7")
          expect(refused).toMatchObject({ month: "2027-01", usedMicroUsd: 7 * price })
          // December's hold released in January: January is still full.
          yield* ledger.release({ id: "rl-d0", taskId: "d0", at: january })
          expect((yield* usedNow(ledger, "j7")).usedMicroUsd).toBe(7 * price)
          expect(yield* ledger.balance(acct)).toEqual({ balance: 1_000_000, reserved: 13 * price })
        })
      ))

    it.effect("a hold refused for want of credit counts nothing against the key; a cap refusal leaves the account's credits untouched", () =>
      withLedger((ledger) =>
        Effect.gen(function*() {
          yield* TestClock.setTime(december - 60_000)
          yield* ledger.credit({ id: "c1", accountId: acct, amount: 3 * price, at: 0, note: null })
          const results = yield* Effect.forEach(Array.from({ length: 10 }, (_, i) => `p${i}`), (taskId) => Effect.either(hold(ledger, taskId)), {
            concurrency: "unbounded"
          })
          expect(results.filter(Either.isRight)).toHaveLength(3)
          expect(results.filter(Either.isLeft).every((result) => result.left._tag === "InsufficientCredits")).toBe(true)
          yield* ledger.credit({ id: "c2", accountId: acct, amount: 100 * price, at: 0, note: null })
          // Only the 3 granted count: 4 more fit under the cap.
          for (let i = 0; i < 4; i++) yield* hold(ledger, `q${i}`)
          const before = yield* ledger.balance(acct)
          const entries = (yield* ledger.entries(acct, 100)).length
          expect((yield* usedNow(ledger, "q4")).usedMicroUsd).toBe(7 * price)
          expect(yield* ledger.balance(acct)).toEqual(before)
          expect(yield* ledger.entries(acct, 100)).toHaveLength(entries)
          // A hold larger than the whole cap is refused at once.
          const huge = yield* Effect.flip(
            ledger.reserve({ id: "r-huge", accountId: acct, taskId: "huge", amount: cap + 1, at: december, keyId: "key_fresh", monthlyCapMicroUsd: cap })
          )
          expect(huge).toMatchObject({ _tag: "KeyCapReached", usedMicroUsd: 0, requested: cap + 1 })
        })
      ))
  }

  if (backend.shared === undefined) {
    describe(`Key cap contract: ${backend.name}`, () => suite(it))
  } else {
    describe(`Key cap contract: ${backend.name}`, () => {
      it.layer(backend.shared as Layer.Layer<SqlClient.SqlClient>, { timeout: 60_000 })((it) => suite(it))
    })
  }
}
