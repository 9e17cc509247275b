/**
 * The usage reports' and the operator's aggregate reads over the memory backends: every task
 * (`TaskStore.listAll`) and every account's ledger entries (the accounts of `AccountAdmin`
 * and the tasks' owners), folded as the SQL backend's GROUP BY queries fold them
 * (`UsageRecords`). It reads everything on each call, which memory affords.
 */
import type { StoreError, Task } from "@mediagate/core"
import { Accounts, Ids, Ledger, TaskStore, UsageRecords, UsageStore } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer } from "effect"

/** Tasks read per page of `listAll`. */
const page = 1_000

export const make: Effect.Effect<
  Context.Tag.Service<UsageStore.UsageStore>,
  never,
  TaskStore.TaskStore | Ledger.Ledger | Accounts.AccountAdmin
> = Effect.gen(function*() {
  const store = yield* TaskStore.TaskStore
  const ledger = yield* Ledger.Ledger
  const admin = yield* Accounts.AccountAdmin
  const listAll = store.listAll
  if (listAll === undefined) return yield* Effect.dieMessage("MemoryUsage needs a task store with listAll")

  const allTasks: Effect.Effect<ReadonlyArray<Task.TaskRecord>, StoreError> = Effect.gen(function*() {
    const found: Array<Task.TaskRecord> = []
    let cursor: Ids.TaskId | undefined
    for (;;) {
      const { nextCursor, tasks } = yield* listAll({ limit: page, cursor })
      found.push(...tasks)
      if (nextCursor === null) return found
      cursor = nextCursor
    }
  })

  /** The entries of `accountId`'s ledger, or of every account known (listed, or owning a task). */
  const allEntries = (tasks: ReadonlyArray<Task.TaskRecord>, accountId: Ids.AccountId | undefined) =>
    Effect.gen(function*() {
      const accounts = accountId !== undefined
        ? [accountId]
        : [...new Set([...(yield* admin.listAccounts).map((account) => account.id), ...tasks.map((task) => task.ownerId)])]
      const entries = yield* Effect.forEach(accounts, (id) => ledger.entries(Ids.AccountId.make(id), Number.MAX_SAFE_INTEGER))
      return entries.flat()
    })

  return {
    usage: (query) =>
      Effect.gen(function*() {
        const tasks = yield* allTasks
        return UsageRecords.usageRows(query, tasks, yield* allEntries(tasks, query.accountId))
      }),
    stats: (query) =>
      Effect.gen(function*() {
        const tasks = yield* allTasks
        return UsageRecords.statsRows(query, tasks, yield* allEntries(tasks, undefined))
      }),
    providers: (query) => Effect.map(allTasks, (tasks) => UsageRecords.providerRows(query, tasks))
  }
})

/** The usage reads over the memory task store, ledger and accounts in context. */
export const layer: Layer.Layer<UsageStore.UsageStore, never, TaskStore.TaskStore | Ledger.Ledger | Accounts.AccountAdmin> = Layer.effect(
  UsageStore.UsageStore,
  make
)
