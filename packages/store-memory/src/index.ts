/** Accounts in memory, keys hashed. */
export * as MemoryAccounts from "./MemoryAccounts.js"
/** Files in memory. */
export * as MemoryMediaStore from "./MemoryMediaStore.js"
/** Tasks in memory. */
export * as MemoryTaskStore from "./MemoryTaskStore.js"
/** The credits ledger in memory. */
export * as MemoryLedger from "./MemoryLedger.js"
/** Submit's Idempotency-Keys in memory. */
export * as MemoryIdempotencyKeys from "./MemoryIdempotencyKeys.js"
/** Admin keys in memory, hashed. */
export * as MemoryAdminKeys from "./MemoryAdminKeys.js"
/** The audit log in memory. */
export * as MemoryAuditLog from "./MemoryAuditLog.js"
/** The usage reports' aggregate reads over the memory backends. */
export * as MemoryUsage from "./MemoryUsage.js"
/** The metadata of uploaded files in memory. */
export * as MemoryUploads from "./MemoryUploads.js"
