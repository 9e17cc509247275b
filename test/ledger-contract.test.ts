/**
 * The credits ledger's contract, one suite run unchanged against memory, SQLite and
 * PostgreSQL (when MEDIAGATE_TEST_PG_URL is set; CI sets it): credits, reservations,
 * charges and releases, each written once whoever asks again, a reservation never larger
 * than what is available, and sums that always equal the entries, also under hundreds of
 * concurrent movements asked twice each.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Ids, Ledger } from "@mediagate/core"
import { MemoryLedger } from "@mediagate/store-memory"
import { Database, SqlLedger } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason } from "@mediagate/store-sql/testing"
import { Effect, Either, Layer, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

let counter = 0
const uniquePrefix = () => `l${process.pid}_${++counter}_`
const sqliteDir = mkdtempSync(join(tmpdir(), "mediagate-ledger-"))
afterAll(() => rmSync(sqliteDir, { recursive: true, force: true }))
const pgUrl = process.env["MEDIAGATE_TEST_PG_URL"]
pgSkipReason("ledger-contract")

type Backend = {
  readonly name: string
  readonly shared: Layer.Layer<SqlClient.SqlClient, unknown> | undefined
  readonly ledger: (prefix: string) => Layer.Layer<Ledger.Ledger, unknown, SqlClient.SqlClient>
}

const backends: ReadonlyArray<Backend> = [
  { name: "memory", shared: undefined, ledger: () => MemoryLedger.layer },
  { name: "sqlite", shared: Database.layerSqlite(join(sqliteDir, "ledger.db")), ledger: (tablePrefix) => SqlLedger.layerWith({ tablePrefix }) },
  ...(pgUrl === undefined ? [] : [{
    name: "postgres",
    shared: Layer.unwrapScoped(Effect.map(freshPgDatabase(pgUrl, "ledger"), (target) => Database.layerPg(Redacted.make(target)))),
    ledger: (tablePrefix: string) => SqlLedger.layerWith({ tablePrefix })
  }])
]

const alice = Ids.AccountId.make("acct_alice")

/** The account's sums recomputed from its entries. */
const fromEntries = (ledger: Ledger.Ledger["Type"], account: Ids.AccountId) =>
  Effect.map(ledger.entries(account, 1_000_000), (all) => ({
    balance: all.reduce((sum, entry) => sum + entry.amount, 0),
    reserved: all.reduce((sum, entry) => sum + entry.held, 0)
  }))

for (const backend of backends) {
  const suite = (it: { readonly effect: (name: string, self: () => Effect.Effect<unknown, unknown, any>) => unknown }) => {
    const withLedger = <A, E>(body: (ledger: Ledger.Ledger["Type"]) => Effect.Effect<A, E, SqlClient.SqlClient>) =>
      Effect.flatMap(Ledger.Ledger, body).pipe(Effect.provide(Layer.fresh(backend.ledger(uniquePrefix()))))

    it.effect("credit, reserve, charge and release move the balance and the reserved sum as the table says", () =>
      withLedger((ledger) =>
        Effect.gen(function*() {
          yield* ledger.credit({ id: "e1", accountId: alice, amount: 100_000, at: 1, note: "top-up" })
          yield* ledger.reserve({ id: "e2", accountId: alice, taskId: "t1", amount: 30_000, at: 2 })
          yield* ledger.reserve({ id: "e3", accountId: alice, taskId: "t2", amount: 20_000, at: 3 })
          expect(yield* ledger.balance(alice)).toEqual({ balance: 100_000, reserved: 50_000 })
          yield* ledger.charge({ id: "e4", taskId: "t1", at: 4 })
          yield* ledger.release({ id: "e5", taskId: "t2", at: 5 })
          expect(yield* ledger.balance(alice)).toEqual({ balance: 70_000, reserved: 0 })
          expect(yield* fromEntries(ledger, alice)).toEqual({ balance: 70_000, reserved: 0 })
          expect((yield* ledger.entries(alice, 10)).map((entry) => [entry.kind, entry.taskId, entry.amount, entry.held])).toEqual([
            ["release", "t2", 0, -20_000],
            ["charge", "t1", -30_000, -30_000],
            ["reserve", "t2", 0, 20_000],
            ["reserve", "t1", 0, 30_000],
            ["credit", null, 100_000, 0]
          ])
          expect((yield* ledger.forTask("t1")).map((entry) => entry.kind)).toEqual(["reserve", "charge"])
        })
      ))

    it.effect("movements of one instant read in the order they happen: the credit, the reservation, then its end", () =>
      withLedger((ledger) =>
        Effect.gen(function*() {
          // Ids chosen so that id order is the wrong order: the kinds must order them.
          yield* ledger.credit({ id: "z-credit", accountId: alice, amount: 10_000, at: 7, note: null })
          for (const task of ["t1", "t2", "t3"]) {
            yield* ledger.reserve({ id: `y-${task}`, accountId: alice, taskId: task, amount: 1_000, at: 7 })
            yield* (task === "t2" ? ledger.release : ledger.charge)({ id: `a-${task}`, taskId: task, at: 7 })
            expect((yield* ledger.forTask(task)).map((entry) => entry.kind)).toEqual(["reserve", task === "t2" ? "release" : "charge"])
          }
          // Newest first: each task's end before its reservation, the credit last.
          const newestFirst = yield* ledger.entries(alice, 10)
          for (const task of ["t1", "t2", "t3"]) {
            const of = newestFirst.flatMap((entry) => (entry.taskId === task ? [entry.kind] : []))
            expect(of).toEqual([task === "t2" ? "release" : "charge", "reserve"])
          }
          expect(newestFirst.at(-1)?.kind).toBe("credit")
        })
      ))

    it.effect("a reservation beyond what is available is refused and writes nothing", () =>
      withLedger((ledger) =>
        Effect.gen(function*() {
          yield* ledger.credit({ id: "c1", accountId: alice, amount: 10_000, at: 1, note: null })
          yield* ledger.reserve({ id: "r1", accountId: alice, taskId: "t1", amount: 8_000, at: 2 })
          const refused = yield* Effect.either(ledger.reserve({ id: "r2", accountId: alice, taskId: "t2", amount: 2_001, at: 3 }))
          expect(Either.getLeft(refused)).toMatchObject({ _tag: "Some", value: { _tag: "InsufficientCredits", requested: 2_001, available: 2_000 } })
          expect(yield* ledger.forTask("t2")).toEqual([])
          const nobody = yield* Effect.either(ledger.reserve({ id: "r3", accountId: Ids.AccountId.make("acct_empty"), taskId: "t3", amount: 1, at: 3 }))
          expect(Either.isLeft(nobody)).toBe(true)
          expect(yield* ledger.balance(alice)).toEqual({ balance: 10_000, reserved: 8_000 })
        })
      ))

    it.effect("each movement of a task is written once; asked again, the first entry answers; no end without a reservation", () =>
      withLedger((ledger) =>
        Effect.gen(function*() {
          yield* ledger.credit({ id: "c1", accountId: alice, amount: 50_000, at: 1, note: null })
          const first = yield* ledger.reserve({ id: "r1", accountId: alice, taskId: "t1", amount: 5_000, at: 2 })
          expect((yield* ledger.reserve({ id: "r1-again", accountId: alice, taskId: "t1", amount: 7_000, at: 3 })).id).toBe(first.id)
          const charged = yield* ledger.charge({ id: "x1", taskId: "t1", at: 4 })
          expect((yield* ledger.charge({ id: "x1-again", taskId: "t1", at: 5 })).id).toBe(charged.id)
          // A release after the charge does not undo it: the task's one end is the charge.
          expect((yield* ledger.release({ id: "x2", taskId: "t1", at: 6 })).id).toBe(charged.id)
          expect(yield* ledger.balance(alice)).toEqual({ balance: 45_000, reserved: 0 })
          expect(Either.getLeft(yield* Effect.either(ledger.charge({ id: "x3", taskId: "t-none", at: 7 })))).toMatchObject({
            _tag: "Some",
            value: { _tag: "NoReservation", taskId: "t-none" }
          })
        })
      ))

    it.effect("a credit asked again with the same id is written once", () =>
      withLedger((ledger) =>
        Effect.gen(function*() {
          const first = yield* ledger.credit({ id: "top-up-1", accountId: alice, amount: 10_000, at: 1, note: "card" })
          expect(first).toEqual({ entry: { id: "top-up-1", accountId: alice, taskId: null, kind: "credit", amount: 10_000, held: 0, at: 1, note: "card" }, written: true })
          // Asked again, the answer says so: the entry of the first time, not written now.
          const again = yield* ledger.credit({ id: "top-up-1", accountId: alice, amount: 10_000, at: 2, note: "card" })
          expect(again).toEqual({ entry: first.entry, written: false })
          const racing = yield* Effect.all([1, 2, 3].map(() => ledger.credit({ id: "top-up-2", accountId: alice, amount: 5_000, at: 3, note: null })), { concurrency: 3 })
          expect(racing.map((answer) => answer.written).sort()).toEqual([false, false, true])
          expect(yield* ledger.balance(alice)).toEqual({ balance: 15_000, reserved: 0 })
          expect(yield* ledger.entries(alice, 10)).toHaveLength(2)
        })
      ))

    it.effect("open lists the reservations not yet ended, made before a time, oldest first, a page at a time", () =>
      withLedger((ledger) =>
        Effect.gen(function*() {
          yield* ledger.credit({ id: "c1", accountId: alice, amount: 100_000, at: 1, note: null })
          for (const [taskId, at] of [["t3", 30], ["t1", 10], ["t2", 10], ["t4", 40], ["t5", 50]] as const) {
            yield* ledger.reserve({ id: `r-${taskId}`, accountId: alice, taskId, amount: 1_000, at })
          }
          yield* ledger.charge({ id: "x-t2", taskId: "t2", at: 60 })
          yield* ledger.release({ id: "x-t4", taskId: "t4", at: 60 })
          const taskIds = (entries: ReadonlyArray<Ledger.LedgerEntry>) => entries.map((entry) => entry.taskId)
          expect(taskIds(yield* ledger.open({ before: 100, limit: 10 }))).toEqual(["t1", "t3", "t5"])
          expect(taskIds(yield* ledger.open({ before: 50, limit: 10 }))).toEqual(["t1", "t3"])
          const first = yield* ledger.open({ before: 100, limit: 2 })
          expect(taskIds(first)).toEqual(["t1", "t3"])
          const last = first[first.length - 1]!
          expect(taskIds(yield* ledger.open({ before: 100, limit: 2, after: { at: last.at, taskId: last.taskId! } }))).toEqual(["t5"])
          expect((yield* ledger.open({ before: 100, limit: 10 }))[0]).toMatchObject({ kind: "reserve", accountId: alice, held: 1_000 })
        })
      ))

    it.effect("hundreds of concurrent tasks, every movement asked twice at once: sums equal the entries, nothing twice, never overdrawn", () =>
      withLedger((ledger) =>
        Effect.gen(function*() {
          yield* ledger.credit({ id: "c1", accountId: alice, amount: 1_000_000, at: 1, note: null })
          let seed = 17
          const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648
          const tasks = Array.from({ length: 300 }, (_, i) => ({ id: `t${i}`, amount: 1 + Math.floor(random() * 10_000), charge: random() < 0.5 }))
          const twice = <A, E>(effect: Effect.Effect<A, E>) => Effect.all([effect, effect], { concurrency: 2 })
          const refusals = yield* Effect.forEach(tasks, (task) =>
            Effect.gen(function*() {
              const reserved = yield* Effect.either(twice(ledger.reserve({ id: `r-${task.id}`, accountId: alice, taskId: task.id, amount: task.amount, at: 2 })))
              if (Either.isLeft(reserved)) return 1 as number
              const end = task.charge ? ledger.charge({ id: `e-${task.id}`, taskId: task.id, at: 3 }) : ledger.release({ id: `e-${task.id}`, taskId: task.id, at: 3 })
              yield* twice(end)
              return 0
            }), { concurrency: 50 })
          const recomputed = yield* fromEntries(ledger, alice)
          expect(yield* ledger.balance(alice)).toEqual(recomputed)
          expect(recomputed.reserved).toBe(0)
          for (const task of tasks) {
            const kinds = (yield* ledger.forTask(task.id)).map((entry) => entry.kind)
            expect(kinds.length === 0 || (kinds.length === 2 && kinds[0] === "reserve" && kinds[1] === (task.charge ? "charge" : "release"))).toBe(true)
          }
          expect(recomputed.balance).toBeGreaterThanOrEqual(0)
          // 300 tasks of up to 10,000 against 1,000,000: none is refused.
          expect(refusals.reduce((a, b) => a + b, 0)).toBe(0)
          const expected = 1_000_000 - tasks.filter((task) => task.charge).reduce((sum, task) => sum + task.amount, 0)
          expect(recomputed.balance).toBe(expected)

          // Concurrent reservations against too little: exactly what fits is reserved, never more.
          const bob = Ids.AccountId.make("acct_bob")
          yield* ledger.credit({ id: "c-bob", accountId: bob, amount: 50_000, at: 1, note: null })
          const outcomes = yield* Effect.forEach(Array.from({ length: 100 }, (_, i) => `b${i}`), (taskId) =>
            Effect.either(twice(ledger.reserve({ id: `r-${taskId}`, accountId: bob, taskId, amount: 1_000, at: 2 }))), { concurrency: 50 })
          expect(outcomes.filter(Either.isRight)).toHaveLength(50)
          expect(yield* ledger.balance(bob)).toEqual({ balance: 50_000, reserved: 50_000 })
          expect(yield* fromEntries(ledger, bob)).toEqual({ balance: 50_000, reserved: 50_000 })
        })
      ))
  }

  if (backend.shared === undefined) {
    describe(`Ledger contract: ${backend.name}`, () => suite(it))
  } else {
    describe(`Ledger contract: ${backend.name}`, () => {
      it.layer(backend.shared as Layer.Layer<SqlClient.SqlClient>, { timeout: 60_000 })((it) => suite(it))
    })
  }
}
