/**
 * The usage reports' and the operator's aggregate reads over the memory backends: every task
 * (`TaskStore.listAll`), every account's ledger entries and the uploads created in the window
 * (`Uploads.created`, deleted ones included), folded as the SQL backend's GROUP BY queries fold
 * them (core's `UsageRecords`). It reads everything on each call, which memory affords.
 */
import type { Accounts, Ledger, TaskStore, Uploads, UsageStore } from "@mediagate/core"
import { UsageRecords } from "@mediagate/core"
import type { Layer } from "effect"

/** The usage reads over the memory task store, ledger, accounts and uploads in context. */
export const layer: Layer.Layer<UsageStore.UsageStore, never, TaskStore.TaskStore | Ledger.Ledger | Accounts.AccountAdmin | Uploads.Uploads> =
  UsageRecords.layer
