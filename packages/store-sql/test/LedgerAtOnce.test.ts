/**
 * PostgreSQL's one-statement hold and settlement (`HeldAtOnce`, `LedgerWrites.endOnItsOwn`),
 * run directly on a fresh database. Where they apply, each writes everything in its one
 * statement; where the transaction must answer (too little credit, settled already, a capped
 * key's release) it writes nothing and answers no row. The ledger and store contracts cover
 * the answers the services give either way; this shows the one statement does the work.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Ids } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { Database, SqlLedger } from "../src/index.js"
import * as HeldAtOnce from "../src/internal/HeldAtOnce.js"
import * as LedgerWrites from "../src/internal/LedgerWrites.js"
import * as TaskRow from "../src/TaskRow.js"
import { freshPgDatabase, pgSkipReason, pgUrl } from "../src/TestDatabases.js"

pgSkipReason("ledger-at-once")

/** A fresh database named after `name`, its client, its prepared tables and a ledger on it. */
const freshLedger = (name: string) =>
  Effect.gen(function*() {
    const url = yield* freshPgDatabase(pgUrl!, name)
    const context = yield* Layer.build(Database.layerPg(Redacted.make(url)))
    const sql = Context.get(context, SqlClient.SqlClient)
    const prepared = yield* Database.prepare("the test").pipe(Effect.provide(context))
    const ledger = yield* SqlLedger.make().pipe(Effect.provide(context))
    return { ledger, prepared, sql }
  })

describe.skipIf(pgUrl === undefined)("PostgreSQL: a hold and a settlement in one statement", () => {
  it.scoped("a new task's hold writes the sums, reservation, open row, task and callbacks at once; too little credit writes nothing", () =>
    Effect.gen(function*() {
      const { ledger, prepared, sql } = yield* freshLedger("at_once")
      const held = HeldAtOnce.make(prepared)
      const t = prepared.tables
      const account = Ids.AccountId.make("acct_once")
      yield* ledger.credit({ id: "credit_1", accountId: account, amount: 100, at: 1, note: null })
      const count = (table: string, taskId: string) =>
        Effect.map(sql.unsafe<{ n: string }>(`SELECT count(*) AS n FROM "${table}" WHERE ${table === t.tasks ? "id" : "task_id"} = $1`, [taskId]), (rows) => Number(rows[0]!.n))

      const task = Testing.record({ id: "0190c8a4-0000-7000-8000-00000000once", ownerId: account })
      const callback = { id: "msg_once", taskId: task.id, url: "https://hooks.example/x", createdAt: 2 }
      const statement = held(TaskRow.toRow(task), [callback], { id: "reserve_1", accountId: account, taskId: task.id, amount: 60, at: 2, model: "m" })!
      expect((yield* sql.unsafe(statement.text, statement.params)).length).toBe(1)
      expect(yield* ledger.balance(account)).toMatchObject({ balance: 100, reserved: 60 })
      expect((yield* ledger.forTask(task.id)).map((entry) => [entry.kind, entry.held, entry.model])).toEqual([["reserve", 60, "m"]])
      expect([yield* count(t.tasks, task.id), yield* count(t.callbacks, task.id), yield* count(t.ledgerOpen, task.id)]).toEqual([1, 1, 1])

      // 40 left: a hold of 60 writes nothing, the task included.
      const poor = Testing.record({ id: "0190c8a4-0000-7000-8000-00000000poor", ownerId: account })
      const refused = held(TaskRow.toRow(poor), [], { id: "reserve_2", accountId: account, taskId: poor.id, amount: 60, at: 3 })!
      expect(yield* sql.unsafe(refused.text, refused.params)).toEqual([])
      expect(yield* ledger.balance(account)).toMatchObject({ balance: 100, reserved: 60 })
      expect([yield* count(t.tasks, poor.id), yield* count(t.ledgerEntries, poor.id)]).toEqual([0, 0])

      // A hold of nothing, or counted against a key's cap, is the transaction's.
      expect(held(TaskRow.toRow(poor), [], { id: "r", accountId: account, taskId: poor.id, amount: 0, at: 3 })).toBeUndefined()
      expect(held(TaskRow.toRow(poor), [], { id: "r", accountId: account, taskId: poor.id, amount: 1, at: 3, keyId: "key_1", monthlyCapMicroUsd: 5 })).toBeUndefined()
    }), { timeout: 30_000 })

  it.scoped("a charge ends the reservation and moves the sums at once, and only once; a capped key's release is left to the transaction", () =>
    Effect.gen(function*() {
      const { ledger, prepared, sql } = yield* freshLedger("at_once_end")
      const { endOnItsOwn } = LedgerWrites.make(prepared)
      const run = (text: string, params: ReadonlyArray<unknown>) => sql.unsafe<Record<string, unknown>>(text, params)
      const account = Ids.AccountId.make("acct_end")
      yield* ledger.credit({ id: "credit_1", accountId: account, amount: 100, at: 1, note: null })
      yield* ledger.reserve({ id: "reserve_1", accountId: account, taskId: "task_1", amount: 30, at: 2 })

      const charged = yield* endOnItsOwn(run, { id: "charge_1", taskId: "task_1", at: 3, kind: "charge" })
      expect(Option.map(charged, (entry) => [entry.id, entry.kind, entry.amount, entry.held])).toEqual(Option.some(["charge_1", "charge", -30, -30]))
      expect(yield* ledger.balance(account)).toMatchObject({ balance: 70, reserved: 0 })
      expect(yield* ledger.open({ before: Number.MAX_SAFE_INTEGER, limit: 10 })).toEqual([])
      // Asked again: nothing written; the ledger's charge answers with the one that stands.
      expect(yield* endOnItsOwn(run, { id: "charge_2", taskId: "task_1", at: 4, kind: "release" })).toEqual(Option.none())
      expect((yield* ledger.charge({ id: "charge_3", taskId: "task_1", at: 5 })).id).toBe("charge_1")
      expect(yield* ledger.balance(account)).toMatchObject({ balance: 70, reserved: 0 })

      // A release of a reservation a capped key counted: the transaction gives the cap back, so nothing here.
      yield* ledger.reserve({ id: "reserve_2", accountId: account, taskId: "task_2", amount: 20, at: 6, keyId: "key_1", monthlyCapMicroUsd: 1_000 })
      expect(yield* endOnItsOwn(run, { id: "release_1", taskId: "task_2", at: 7, kind: "release" })).toEqual(Option.none())
      expect((yield* ledger.forTask("task_2")).map((entry) => entry.kind)).toEqual(["reserve"])
      expect((yield* ledger.release({ id: "release_2", taskId: "task_2", at: 8 })).kind).toBe("release")
      expect(yield* ledger.balance(account)).toMatchObject({ balance: 70, reserved: 0 })
    }), { timeout: 30_000 })
})
