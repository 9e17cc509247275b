/**
 * A database that refuses to serve is a failure callers handle, not a defect: every SQL
 * backend answers StoreError naming the operation (the engine and the deliverer try again
 * later, the HTTP layer answers 500). The tables are dropped behind the backends' backs.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Accounts, Ids, IdempotencyKeys, Ledger, StoreError, TaskStore } from "@mediagate/core"
import { Cause, Effect, Exit, Layer, Option, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Database, SqlAccounts, SqlIdempotencyKeys, SqlLedger, SqlTaskStore } from "../src/index.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-storeerror-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const failsWithStoreError = (exit: Exit.Exit<unknown, unknown>, operation: string) => {
  const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
  expect(Option.isSome(failure) && failure.value instanceof StoreError).toBe(true)
  expect(Option.isSome(failure) && (failure.value as StoreError).message).toMatch(new RegExp(`^${operation} failed: `))
}

describe("SQL backends when the database refuses to serve", () => {
  it.effect("the task store, the ledger, the accounts and the idempotency keys fail with StoreError, not a defect", () =>
    Effect.gen(function*() {
      const file = join(dir, "gone.db")
      const other = Database.layerSqlite(file)
      const exits = yield* Effect.gen(function*() {
        const store = yield* TaskStore.TaskStore
        const ledger = yield* Ledger.Ledger
        const accounts = yield* Accounts.Accounts
        const keys = yield* IdempotencyKeys.IdempotencyKeys
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          for (const table of ["tasks", "ledger_entries", "api_keys", "accounts", "idempotency_keys"]) {
            yield* sql.unsafe(`DROP TABLE gone_${table}`)
          }
        }).pipe(Effect.provide(other))
        return {
          get: yield* Effect.exit(store.get(Ids.TaskId.make("0190c8a4-0000-7000-8000-000000000001"))),
          claimDue: yield* Effect.exit(store.claimDue({ now: 0, limit: 1, worker: "w", leaseUntil: 1 })),
          forTask: yield* Effect.exit(ledger.forTask("t")),
          authenticate: yield* Effect.exit(accounts.authenticate(Redacted.make("some-long-enough-api-key"))),
          prune: yield* Effect.exit(keys.prune(0))
        }
      }).pipe(
        Effect.provide(Layer.mergeAll(
          SqlTaskStore.layerWith({ tablePrefix: "gone_" }).pipe(Layer.provide(Database.layerSqlite(file))),
          Layer.mergeAll(
            SqlLedger.layerWith({ tablePrefix: "gone_" }),
            SqlAccounts.layerWith({ tablePrefix: "gone_" }),
            SqlIdempotencyKeys.layerWith({ tablePrefix: "gone_" })
          ).pipe(Layer.provide(Database.layerSqlite(file)))
        ))
      )
      failsWithStoreError(exits.get, "get")
      failsWithStoreError(exits.claimDue, "claimDue")
      failsWithStoreError(exits.forTask, "entries")
      failsWithStoreError(exits.authenticate, "authenticate")
      failsWithStoreError(exits.prune, "prune")
    }))
})
