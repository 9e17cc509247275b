/** The database by URL: SQLite or PostgreSQL. */
export * as Database from "./Database.js"
/** Wake-ups between nodes on one PostgreSQL database (LISTEN/NOTIFY). */
export * as PgNotify from "./PgNotify.js"
/** Tables and migrations. */
export * as Schema from "./Schema.js"
/** Accounts in SQL, keys hashed. */
export * as SqlAccounts from "./SqlAccounts.js"
/** The SQL TaskStore. */
export * as SqlTaskStore from "./SqlTaskStore.js"
/** A row of the tasks table and its transform to a TaskRecord. */
export * as TaskRow from "./TaskRow.js"
/** The credits ledger on SQL. */
export * as SqlLedger from "./SqlLedger.js"
/** Submit's Idempotency-Keys on SQL. */
export * as SqlIdempotencyKeys from "./SqlIdempotencyKeys.js"
/** The HTTP edge's limits shared by every node on one PostgreSQL database. */
export * as PgLimits from "./PgLimits.js"
/** The usage reports' aggregate reads on SQL. */
export * as SqlUsage from "./SqlUsage.js"
/** Admin keys on SQL, hashed. */
export * as SqlAdminKeys from "./SqlAdminKeys.js"
/** The audit log on SQL. */
export * as SqlAuditLog from "./SqlAuditLog.js"
/** The metadata of uploaded files on SQL. */
export * as SqlUploads from "./SqlUploads.js"
