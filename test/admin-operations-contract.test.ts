/**
 * The operator's service over each backend (memory, SQLite, and PostgreSQL when
 * MEDIAGATE_TEST_PG_URL is set), with the real ledger under the use cases: a task cancelled by
 * an operator has its hold given back once, however many cancels race; credits added with one
 * entry id by racing operators are credited once; each action is audited once.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import {
  Accounts,
  AdminKeys,
  AdminOperations,
  AdminService,
  AuditLog,
  Ids,
  Ledger,
  ModelCatalog,
  Moderation,
  TaskService,
  TaskServiceAlone,
  TaskStore
} from "@mediagate/core"
import { MemoryAccounts, MemoryAdminKeys, MemoryAuditLog, MemoryLedger, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlAccounts, SqlAdminKeys, SqlAuditLog, SqlLedger, SqlTaskStore } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason } from "@mediagate/store-sql/testing"
import { Effect, Exit, Layer, Redacted, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

let counter = 0
const uniquePrefix = () => `op${process.pid}_${++counter}_`

type Stored =
  | Accounts.Accounts
  | Accounts.AccountAdmin
  | Ledger.Ledger
  | TaskStore.TaskStore
  | AuditLog.AuditLog
  | AdminKeys.AdminKeys

type Backend = {
  readonly name: string
  readonly shared: Layer.Layer<SqlClient.SqlClient, unknown> | undefined
  readonly layer: (prefix: string) => Layer.Layer<Stored, unknown, SqlClient.SqlClient>
}

const sqliteDir = mkdtempSync(join(tmpdir(), "mediagate-admin-operations-"))
afterAll(() => rmSync(sqliteDir, { recursive: true, force: true }))
const sqliteFile = join(sqliteDir, "operations.db")
const pgUrl = process.env["MEDIAGATE_TEST_PG_URL"]
pgSkipReason("admin-operations-contract")

const sqlBackends = (tablePrefix: string) =>
  Layer.mergeAll(
    SqlAccounts.layerWith({ tablePrefix }),
    SqlLedger.layerWith({ tablePrefix }),
    SqlAdminKeys.layerWith({ tablePrefix }),
    SqlAuditLog.layerWith({ tablePrefix })
  )

const backends: ReadonlyArray<Backend> = [
  {
    name: "memory",
    shared: undefined,
    layer: () => Layer.mergeAll(MemoryAccounts.layer([]), MemoryLedger.layer, MemoryTaskStore.layer, MemoryAuditLog.layer, MemoryAdminKeys.layer)
  },
  {
    name: "sqlite",
    shared: Database.layerSqlite(sqliteFile),
    // The task store keeps its client's one connection on SQLite: a client of its own.
    layer: (tablePrefix) =>
      Layer.merge(sqlBackends(tablePrefix), SqlTaskStore.layerWith({ tablePrefix }).pipe(Layer.provide(Database.layerSqlite(sqliteFile))))
  },
  ...(pgUrl === undefined ? [] : [{
    name: "postgres",
    shared: Layer.unwrapScoped(Effect.map(freshPgDatabase(pgUrl, "operations"), (target) => Database.layerPg(Redacted.make(target)))),
    layer: (tablePrefix: string) => Layer.merge(sqlBackends(tablePrefix), SqlTaskStore.layerWith({ tablePrefix }))
  }])
]

/** The use cases billed on the ledger in context, with no engine or deliverer (as the admin CLI has them). */
const useCases = TaskServiceAlone.layerBilled.pipe(Layer.provide([ModelCatalog.layer, Moderation.layerAllowAll, TaskServiceAlone.noUpstream]))

const cli = { kind: "cli", id: "ops" } as const

for (const backend of backends) {
  const suite = (it: { readonly effect: (name: string, self: () => Effect.Effect<unknown, unknown, any>) => unknown }) => {
    const withService = <A, E>(
      body: (admin: AdminService.AdminService["Type"]) => Effect.Effect<A, E, SqlClient.SqlClient | Ids.Ids | Stored | TaskService>
    ) =>
      Effect.flatMap(AdminService.AdminService, body).pipe(
        // Fresh as a whole: a fresh layer inside provideMerge would be built twice, once for each side.
        Effect.provide(
          Layer.fresh(AdminOperations.layer.pipe(Layer.provideMerge(useCases), Layer.provideMerge(backend.layer(uniquePrefix())), Layer.provideMerge(Ids.layer)))
        )
      )

    it.effect("an operator's cancel gives the hold back once, however many cancels race; one audit entry", () =>
      withService((admin) =>
        Effect.gen(function*() {
          const ledger = yield* Ledger.Ledger
          const tasks = yield* TaskService
          const { account } = yield* admin.createAccount(cli, { name: "Acme" })
          yield* admin.addCredits(cli, { accountId: account.id, amountMicroUsd: 5_000_000, note: "top-up" })
          const { taskId } = yield* tasks.submit(account, { model: "alpha-image-2/text-to-image", input: { prompt: "a kite" } })
          // Later than the hold, so the task's entries are in order of time.
          yield* TestClock.adjust(1000)
          const held = yield* ledger.balance(account.id)
          expect(held.balance).toBe(5_000_000)
          expect(held.reserved).toBeGreaterThan(0)
          const cancels = yield* Effect.all(Array.from({ length: 4 }, () => Effect.exit(admin.cancelTask(cli, taskId))), { concurrency: "unbounded" })
          expect(cancels.filter(Exit.isSuccess).length).toBe(1)
          for (const refused of cancels.filter(Exit.isFailure)) expect(JSON.stringify(refused)).toContain("AdminRefused")
          expect(yield* ledger.balance(account.id)).toEqual({ balance: 5_000_000, reserved: 0 })
          expect((yield* ledger.forTask(taskId)).map((entry) => entry.kind)).toEqual(["reserve", "release"])
          const detail = yield* admin.task(taskId)
          expect(detail.task.status).toBe("CANCELLED")
          expect(detail.ledger.map((entry) => entry.kind)).toEqual(["reserve", "release"])
          const audited = yield* admin.audit({ limit: 10, action: "task.cancel" })
          expect(audited.entries.map((entry) => [entry.target, entry.before, entry.after])).toEqual([[taskId, { status: "PENDING" }, { status: "CANCELLED" }]])
        })))

    it.effect("racing operators adding credits under one entry id credit once", () =>
      withService((admin) =>
        Effect.gen(function*() {
          const { account } = yield* admin.createAccount(cli, { name: "Acme" })
          const added = yield* Effect.all(
            Array.from({ length: 5 }, () => admin.addCredits(cli, { accountId: account.id, amountMicroUsd: 2_000_000, note: "invoice 7", entryId: "inv-7" })),
            { concurrency: "unbounded" }
          )
          expect(added.filter((each) => each.written).length).toBe(1)
          expect((yield* admin.getAccount(account.id)).balance).toEqual({ balance: 2_000_000, reserved: 0 })
          const audited = (yield* admin.audit({ limit: 10, action: "credits.add" })).entries
          expect(audited.length).toBe(5)
          expect(audited.filter((entry) => (entry.after as { already_credited: boolean }).already_credited === false).length).toBe(1)
        })))
  }

  if (backend.shared === undefined) describe(`admin operations: ${backend.name}`, () => suite(it))
  else it.layer(backend.shared, { timeout: "60 seconds" })(`admin operations: ${backend.name}`, suite)
}
