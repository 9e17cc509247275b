/**
 * Where a deployment keeps tasks, accounts, credits, files and uploads: everything in memory here;
 * a SQL database (SQLite or PostgreSQL) with files on disk in `@mediagate/server/sql`
 * (`SqlBackends.make`), which needs `@mediagate/store-sql` installed. The standalone server
 * and an embedding host choose one and hand it to `Deployment.services({ backends, ... })`.
 */
import type {
  Accounts,
  AdminKeys,
  AuditLog,
  IdempotencyKeys,
  Ids,
  Ledger,
  MediaError,
  MediaStore,
  SharedLimits,
  StoreError,
  TaskStore,
  Uploads,
  UsageStore
} from "@mediagate/core"
import { Routes } from "@mediagate/http"
import { MemoryAccounts, MemoryAdminKeys, MemoryAuditLog, MemoryLedger, MemoryMediaStore, MemoryTaskStore, MemoryUploads } from "@mediagate/store-memory"
import type { Layer } from "effect"
import type * as Mediagate from "./Mediagate.js"

/** Where tasks, accounts, credits, files and uploads live. */
export interface Backends {
  readonly store: Layer.Layer<TaskStore.TaskStore, StoreError>
  /** The accounts, and their admin side (the admin API and CLI create accounts and keys there). */
  readonly accounts: Layer.Layer<Accounts.Accounts | Accounts.AccountAdmin, StoreError>
  /** The operators' keys, for the admin API and the console. */
  readonly adminKeys: Layer.Layer<AdminKeys.AdminKeys, StoreError>
  /** The audit log of every admin action. */
  readonly audit: Layer.Layer<AuditLog.AuditLog, StoreError>
  readonly ledger: Layer.Layer<Ledger.Ledger, StoreError>
  readonly media: Layer.Layer<MediaStore.MediaStore, MediaError, Ids.Ids>
  /** The metadata of uploaded files (`POST /files`); their bytes are in `media`. */
  readonly uploads: Layer.Layer<Uploads.Uploads, StoreError>
  /** Idempotency keys of submits; without it they live in memory (lost with the process). */
  readonly idempotencyKeys?: Layer.Layer<IdempotencyKeys.IdempotencyKeys, StoreError>
  /** The aggregate reads of usage reports and insights; without it, reads over the store, ledger and uploads (every row, each time). */
  readonly usage?: Layer.Layer<UsageStore.UsageStore, StoreError>
  /**
   * The HTTP edge's limits shared with the other nodes on the same database (PostgreSQL
   * only; `Deployment.edgeLimits` takes them): without it they are kept in this process.
   */
  readonly limits?: Layer.Layer<SharedLimits.SharedLimits, StoreError>
  /** Wake-ups to and from the other nodes on the same database (PostgreSQL only). */
  readonly relay?: Mediagate.Options["relay"]
}

/** An account of the memory backends, with the credits (micro-USD) it starts with. */
export interface MemoryAccount extends MemoryAccounts.AccountWithKey {
  readonly credits?: number
}

/** Everything in memory, with the given accounts and their starting credits; media URLs under `publicUrl`. */
export const memoryBackends = (
  config: { readonly publicUrl: string },
  accounts: ReadonlyArray<MemoryAccount>
): Backends => ({
  store: MemoryTaskStore.layer,
  accounts: MemoryAccounts.layer(accounts),
  ledger: MemoryLedger.layerWithCredits(
    accounts.flatMap((account) => (account.credits === undefined || account.credits <= 0 ? [] : [{ accountId: account.id, amount: account.credits }]))
  ),
  media: MemoryMediaStore.layer({ baseUrl: `${config.publicUrl}${Routes.mediaPrefix}` }),
  adminKeys: MemoryAdminKeys.layer,
  audit: MemoryAuditLog.layer,
  uploads: MemoryUploads.layer
})
