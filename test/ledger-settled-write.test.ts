/**
 * The write that ends a task and the settlement of its reservation together
 * (`SqlTaskStore`'s `updateSettled`): on SQLite in one transaction, on PostgreSQL in one
 * statement (a database of its own per case, when MEDIAGATE_TEST_PG_URL is set); and
 * `TaskWrites` choosing it when the store keeps its tasks in the ledger's database. The
 * store and the ledger share one client, as the standalone server has them.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Ids, Ledger, Task, TaskChanges, TaskConflict, TaskEvents, TaskStore, TaskWrites } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryLedger } from "@mediagate/store-memory"
import { Database, SqlLedger, SqlTaskStore } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason } from "@mediagate/store-sql/testing"
import { Effect, Exit, Layer, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const dir = mkdtempSync(join(tmpdir(), "mediagate-update-settled-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0

const alice = Ids.AccountId.make("acct_alice")
const price = 30_000

const processing = () =>
  Testing.record({
    id: Ids.uuidV7(1_700_000_000_000, Array.from(randomBytes(10))),
    ownerId: alice,
    status: "PROCESSING",
    input: { model: "alpha-image-2/text-to-image", prompt: "p" },
    job: Testing.job({ priceMicroUsd: price }),
    callBackUrl: "https://example.com/hook",
    createdAt: 1_700_000_000_000
  })

const ended = (task: Task.TaskRecord, status: "SUCCESS" | "FAILURE") =>
  new Task.TaskRecord({ ...task, status, dueAt: null, updatedAt: task.updatedAt + 1, version: task.version + 1 })

const callbackOf = (task: Task.TaskRecord): TaskStore.CallbackRow => ({
  id: `cb_${task.id}`,
  taskId: task.id,
  url: "https://example.com/hook",
  createdAt: task.updatedAt + 1
})

const pgUrl = process.env["MEDIAGATE_TEST_PG_URL"]
pgSkipReason("ledger-settled-write")

/** A fresh database of each backend. */
const databases: ReadonlyArray<readonly ["SQLite" | "PostgreSQL", () => Layer.Layer<SqlClient.SqlClient, unknown>]> = [
  ["SQLite", () => Database.layerSqlite(join(dir, `s${++files}.db`))],
  ...(pgUrl === undefined ? [] : [
    ["PostgreSQL", () => Layer.unwrapScoped(Effect.map(freshPgDatabase(pgUrl, "settled"), (url) => Database.layerPg(Redacted.make(url))))] as const
  ])
]

/** A PROCESSING task stored with its price held. */
const heldTask = (store: TaskStore.TaskStore["Type"], hold: Partial<Ledger.Hold> = {}) =>
  Effect.gen(function*() {
    const task = processing()
    yield* store.createHeld!(task, [], { id: `r_${task.id}`, accountId: alice, taskId: task.id, amount: price, at: 2, ...hold })
    return task
  })

const callbackCount = (taskId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT COUNT(*) AS n FROM mediagate_callbacks WHERE task_id = ${taskId}`).pipe(
    Effect.map((rows) => Number(rows[0]!.n))
  )

for (const [backend, database] of databases) {
  /** A fresh database with the store and the ledger on one client, alice credited 100,000. */
  const onOneFile = <A, E>(body: (store: TaskStore.TaskStore["Type"], ledger: Ledger.Ledger["Type"]) => Effect.Effect<A, E, SqlClient.SqlClient>) =>
    Effect.gen(function*() {
      const store = yield* TaskStore.TaskStore
      const ledger = yield* Ledger.Ledger
      yield* ledger.credit({ id: "c1", accountId: alice, amount: 100_000, at: 1, note: null })
      return yield* body(store, ledger)
    }).pipe(
      Effect.provide(Layer.mergeAll(SqlTaskStore.layer, SqlLedger.layer)),
      Effect.provide(database())
    )

  describe(`SqlTaskStore.updateSettled (${backend})`, () => {
    it.effect("writes the ending update, its callback and the charge together", () =>
      onOneFile((store, ledger) =>
        Effect.gen(function*() {
          expect(store.updateSettled).toBeDefined()
          const task = yield* heldTask(store)
          const done = ended(task, "SUCCESS")
          yield* store.updateSettled!(done, task.version, [callbackOf(done)], { id: "e_charge", at: 3, kind: "charge" })
          expect(Option.getOrThrow(yield* store.get(task.id)).status).toBe("SUCCESS")
          expect(yield* callbackCount(task.id)).toBe(1)
          expect((yield* ledger.forTask(task.id)).map((entry) => [entry.id, entry.kind, entry.amount, entry.held])).toEqual([
            [`r_${task.id}`, "reserve", 0, price],
            ["e_charge", "charge", -price, -price]
          ])
          expect(yield* ledger.balance(alice)).toEqual({ balance: 100_000 - price, reserved: 0 })
          expect(yield* ledger.open({ before: 1e15, limit: 10 })).toEqual([])
        })
      ))

    it.effect("a stale version writes nothing: no update, no callback, no settlement", () =>
      onOneFile((store, ledger) =>
        Effect.gen(function*() {
          const task = yield* heldTask(store)
          const done = ended(task, "SUCCESS")
          const exit = yield* Effect.exit(store.updateSettled!(done, task.version + 5, [callbackOf(done)], { id: "e_charge", at: 3, kind: "charge" }))
          expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error instanceof TaskConflict).toBe(true)
          expect(Option.getOrThrow(yield* store.get(task.id)).status).toBe("PROCESSING")
          expect(yield* callbackCount(task.id)).toBe(0)
          expect((yield* ledger.forTask(task.id)).map((entry) => entry.kind)).toEqual(["reserve"])
          expect(yield* ledger.balance(alice)).toEqual({ balance: 100_000, reserved: price })
        })
      ))

    it.effect("a task without a reservation is updated, and nothing is settled", () =>
      onOneFile((store, ledger) =>
        Effect.gen(function*() {
          const task = processing()
          yield* store.create(task)
          yield* store.updateSettled!(ended(task, "FAILURE"), task.version, [], { id: "e_release", at: 3, kind: "release" })
          expect(Option.getOrThrow(yield* store.get(task.id)).status).toBe("FAILURE")
          expect(yield* ledger.forTask(task.id)).toEqual([])
          expect(yield* ledger.balance(alice)).toEqual({ balance: 100_000, reserved: 0 })
        })
      ))

    it.effect("a reservation already settled is not settled twice", () =>
      onOneFile((store, ledger) =>
        Effect.gen(function*() {
          const task = yield* heldTask(store)
          yield* ledger.release({ id: "e_first", taskId: task.id, at: 3 })
          yield* store.updateSettled!(ended(task, "SUCCESS"), task.version, [], { id: "e_second", at: 4, kind: "charge" })
          expect(Option.getOrThrow(yield* store.get(task.id)).status).toBe("SUCCESS")
          expect((yield* ledger.forTask(task.id)).map((entry) => [entry.id, entry.kind])).toEqual([[`r_${task.id}`, "reserve"], ["e_first", "release"]])
          expect(yield* ledger.balance(alice)).toEqual({ balance: 100_000, reserved: 0 })
        })
      ))

    it.effect("a release gives a capped key's month back what the reservation counted", () =>
      onOneFile((store, ledger) =>
        Effect.gen(function*() {
          const hold = { keyId: "key_1", monthlyCapMicroUsd: price }
          const task = yield* heldTask(store, hold)
          // The cap is reached: a second task of the key is refused.
          const refused = yield* Effect.exit(heldTask(store, hold))
          expect(Exit.isFailure(refused)).toBe(true)
          yield* store.updateSettled!(ended(task, "FAILURE"), task.version, [], { id: "e_release", at: 3, kind: "release" })
          // Given back: the next one fits again.
          yield* heldTask(store, hold)
          expect(yield* ledger.balance(alice)).toEqual({ balance: 100_000, reserved: price })
        })
      ))

    it.effect("a settlement that fails rolls the update back with it", () =>
      onOneFile((store, ledger) =>
        Effect.gen(function*() {
          const task = yield* heldTask(store)
          const sql = yield* SqlClient.SqlClient
          // A trigger that fails every insert of an entry.
          if (backend === "SQLite") {
            // json() of something that is not JSON fails the statement.
            yield* sql.unsafe(`CREATE TRIGGER test_die BEFORE INSERT ON mediagate_ledger_entries BEGIN SELECT json('not json'); END`)
          } else {
            yield* sql.unsafe(`CREATE FUNCTION test_die() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'no entries'; END $$`)
            yield* sql.unsafe(`CREATE TRIGGER test_die BEFORE INSERT ON mediagate_ledger_entries FOR EACH ROW EXECUTE FUNCTION test_die()`)
          }
          const done = ended(task, "SUCCESS")
          const exit = yield* Effect.exit(store.updateSettled!(done, task.version, [callbackOf(done)], { id: "e_charge", at: 3, kind: "charge" }))
          expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error._tag === "StoreError").toBe(true)
          expect(Option.getOrThrow(yield* store.get(task.id))).toMatchObject({ status: "PROCESSING", version: task.version })
          expect(yield* callbackCount(task.id)).toBe(0)
          expect(yield* ledger.balance(alice)).toEqual({ balance: 100_000, reserved: price })
        })
      ))
  })
}

describe("TaskWrites: the write that ends a task", () => {
  /** The ledger with its charges and releases counted. */
  const counted = (ledger: Ledger.Ledger["Type"], calls: { settlements: number }): Ledger.Ledger["Type"] => ({
    ...ledger,
    charge: (input) => Effect.suspend(() => (calls.settlements++, ledger.charge(input))),
    release: (input) => Effect.suspend(() => (calls.settlements++, ledger.release(input)))
  })

  const end = (ledgerIn: "the store's database" | "memory") =>
    Effect.gen(function*() {
      const calls = { settlements: 0 }
      const sqlLedger = yield* Ledger.Ledger
      const ledger = counted(ledgerIn === "memory" ? MemoryLedger.make() : sqlLedger, calls)
      yield* ledger.credit({ id: "c1", accountId: alice, amount: 100_000, at: 1, note: null })
      const writes = yield* TaskWrites.make.pipe(
        Effect.provideService(Ledger.Ledger, ledger),
        Effect.provide(Layer.mergeAll(TaskChanges.layer, TaskEvents.CallbackWakeup.layerNone, Ids.layer))
      )
      const store = yield* TaskStore.TaskStore
      const task = processing()
      yield* writes.createHeld(task, 2)
      const stored = Option.getOrThrow(yield* store.get(task.id))
      yield* writes.apply(stored, { to: "SUCCESS", result: { type: "image", urls: ["https://cdn/a.png"] } }, 3)
      return { calls, entries: (yield* ledger.forTask(task.id)).map((entry) => entry.kind), balance: yield* ledger.balance(alice) }
    }).pipe(
      Effect.provide(Layer.mergeAll(SqlTaskStore.layer, SqlLedger.layer)),
      Effect.provide(Database.layerSqlite(join(dir, `w${++files}.db`)))
    )

  const cases = [
    ["settles in the store's transaction when the ledger shares its database", "the store's database", 0],
    ["asks the ledger after the write when it keeps its entries elsewhere", "memory", 1]
  ] as const
  for (const [name, ledgerIn, settlements] of cases) {
    it.effect(name, () =>
      Effect.gen(function*() {
        const { balance, calls, entries } = yield* end(ledgerIn)
        expect(calls.settlements).toBe(settlements)
        expect(entries).toEqual(["reserve", "charge"])
        expect(balance).toEqual({ balance: 100_000 - price, reserved: 0 })
      }))
  }
})
