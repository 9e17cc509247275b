/**
 * The usage reports' and the operator's aggregate reads over the memory backends: every task
 * (`TaskStore.listAll`) and every account's ledger entries, folded as the SQL backend's
 * GROUP BY queries fold them (core's `UsageRecords`). It reads everything on each call, which
 * memory affords.
 */
import type { Accounts, Ledger, TaskStore, UsageStore } from "@mediagate/core"
import { UsageRecords } from "@mediagate/core"
import type { Layer } from "effect"

/** The usage reads over the memory task store, ledger and accounts in context. */
export const layer: Layer.Layer<UsageStore.UsageStore, never, TaskStore.TaskStore | Ledger.Ledger | Accounts.AccountAdmin> = UsageRecords.layer
