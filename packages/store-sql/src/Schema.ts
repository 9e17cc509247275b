/**
 * Tables of the SQL store and their migrations. Every name carries the table prefix, so
 * the store can live inside a host application's database next to its own tables; the
 * migrations table is ours too (`<prefix>migrations`). The DDL is plain enough to be the
 * same for SQLite and PostgreSQL.
 */
import type { SqlError } from "@effect/sql"
import { Migrator, SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { operatorMigrations } from "./internal/OperatorMigrations.js"

/** Table names for a prefix. */
export const tables = (prefix: string) => ({
  tasks: `${prefix}tasks`,
  callbacks: `${prefix}callbacks`,
  accounts: `${prefix}accounts`,
  apiKeys: `${prefix}api_keys`,
  ledgerEntries: `${prefix}ledger_entries`,
  ledgerBalances: `${prefix}ledger_balances`,
  ledgerOpen: `${prefix}ledger_open`,
  callbackAttempts: `${prefix}callback_attempts`,
  idempotencyKeys: `${prefix}idempotency_keys`,
  rateBuckets: `${prefix}rate_buckets`,
  holds: `${prefix}holds`,
  databaseId: `${prefix}database_id`,
  keySpend: `${prefix}key_spend`,
  adminKeys: `${prefix}admin_keys`,
  auditLog: `${prefix}audit_log`,
  uploads: `${prefix}uploads`,
  migrations: `${prefix}migrations`
})

/**
 * The tables of the shared limits (`PgLimits`), on PostgreSQL only: UNLOGGED, since a
 * bucket or a place of a held request is worth nothing after a crash.
 */
export const limitTables = (prefix: string): ReadonlyArray<string> => {
  const t = tables(prefix)
  return [
    `CREATE UNLOGGED TABLE IF NOT EXISTS "${t.rateBuckets}" (
      digest TEXT PRIMARY KEY,
      tokens DOUBLE PRECISION NOT NULL,
      at BIGINT NOT NULL,
      allowed BOOLEAN NOT NULL,
      full_at BIGINT NOT NULL
    )`,
    `CREATE INDEX IF NOT EXISTS "${t.rateBuckets}_full" ON "${t.rateBuckets}" (full_at)`,
    `CREATE UNLOGGED TABLE IF NOT EXISTS "${t.holds}" (
      id TEXT PRIMARY KEY,
      node TEXT NOT NULL,
      digest TEXT NOT NULL,
      expires_at BIGINT NOT NULL
    )`,
    `CREATE INDEX IF NOT EXISTS "${t.holds}_digest" ON "${t.holds}" (digest, expires_at)`,
    `CREATE INDEX IF NOT EXISTS "${t.holds}_node" ON "${t.holds}" (node)`
  ]
}

/** A task's model as submitted (`input.model`), as the list filter and its index read it. */
export const modelExpression = (isPg: boolean) => (isPg ? "((input::jsonb) ->> 'model')" : "json_extract(input, '$.model')")

/** The migrations, listed in the order they run. Add a new entry `NNNN_name` at the end to change the schema. */
export const migrations = (prefix: string): Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> => {
  const t = tables(prefix)
  return {
    "0001_create_tasks": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE ${sql(t.tasks)} (
        id TEXT PRIMARY KEY,
        owner_id TEXT NOT NULL,
        status TEXT NOT NULL,
        input TEXT NOT NULL,
        job TEXT NOT NULL,
        result TEXT,
        failure_reason TEXT,
        error_message TEXT,
        callback_url TEXT,
        user_id TEXT,
        upstream_id TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        deadline_at BIGINT NOT NULL,
        due_at BIGINT,
        lease_owner TEXT,
        lease_until BIGINT,
        version INTEGER NOT NULL
      )`
      yield* sql`CREATE INDEX ${sql(`${t.tasks}_owner`)} ON ${sql(t.tasks)} (owner_id, id)`
      // Only non-terminal tasks have a due time: the engine's claim reads this small index.
      yield* sql`CREATE INDEX ${sql(`${t.tasks}_due`)} ON ${sql(t.tasks)} (due_at) WHERE due_at IS NOT NULL`
    }),
    "0002_create_callbacks": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE ${sql(t.callbacks)} (
        id TEXT PRIMARY KEY,
        task_id TEXT NOT NULL,
        url TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at BIGINT,
        delivered_at BIGINT
      )`
      yield* sql`CREATE INDEX ${sql(`${t.callbacks}_task`)} ON ${sql(t.callbacks)} (task_id)`
    }),
    "0003_create_accounts": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE ${sql(t.accounts)} (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE,
        created_at BIGINT NOT NULL
      )`
    }),
    "0004_callback_delivery": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`ALTER TABLE ${sql(t.callbacks)} ADD COLUMN lease_until BIGINT`
      yield* sql`ALTER TABLE ${sql(t.callbacks)} ADD COLUMN failed_at BIGINT`
      // Only undelivered callbacks have a next attempt: the deliverer's claim reads this index.
      yield* sql`CREATE INDEX ${sql(`${t.callbacks}_due`)} ON ${sql(t.callbacks)} (next_attempt_at) WHERE delivered_at IS NULL AND failed_at IS NULL`
      yield* sql`CREATE TABLE ${sql(t.callbackAttempts)} (
        callback_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        at BIGINT NOT NULL,
        status INTEGER,
        error TEXT,
        duration_ms INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        retry_at BIGINT,
        PRIMARY KEY (callback_id, attempt)
      )`
    }),
    "0005_account_webhook_secret": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`ALTER TABLE ${sql(t.accounts)} ADD COLUMN webhook_secret TEXT`
    }),
    "0006_task_attempts": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // Every upstream attempt of the task, as a JSON array (TaskRecord.attempts).
      yield* sql`ALTER TABLE ${sql(t.tasks)} ADD COLUMN attempts TEXT NOT NULL DEFAULT '[]'`
    }),
    "0007_claim_indexes": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // The engine's claims: work in flight by due time, running tasks by owner, and each
      // owner's line of waiting tasks (with the lease, so the line is read from the index alone).
      yield* sql`CREATE INDEX ${sql(`${t.tasks}_in_flight`)} ON ${sql(t.tasks)} (due_at, id) WHERE due_at IS NOT NULL AND status <> 'PENDING'`
      yield* sql`CREATE INDEX ${sql(`${t.tasks}_running`)} ON ${sql(t.tasks)} (owner_id) WHERE due_at IS NOT NULL AND status <> 'PENDING'`
      yield* sql`CREATE INDEX ${sql(`${t.tasks}_waiting`)} ON ${sql(t.tasks)} (owner_id, due_at, id, lease_until) WHERE status = 'PENDING'`
    }),
    "0008_task_provider": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // The provider a task counts against (TaskRecord.provider): running tasks by provider,
      // and each owner's line read with its tasks' providers, from the indexes.
      yield* sql`ALTER TABLE ${sql(t.tasks)} ADD COLUMN provider TEXT`
      yield* sql`DROP INDEX ${sql(`${t.tasks}_running`)}`
      yield* sql`CREATE INDEX ${sql(`${t.tasks}_running`)} ON ${sql(t.tasks)} (owner_id, provider) WHERE due_at IS NOT NULL AND status <> 'PENDING'`
      yield* sql`DROP INDEX ${sql(`${t.tasks}_waiting`)}`
      yield* sql`CREATE INDEX ${sql(`${t.tasks}_waiting`)} ON ${sql(t.tasks)} (owner_id, due_at, id, lease_until, provider) WHERE status = 'PENDING'`
    }),
    "0009_api_keys": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // An account's keys, each revocable and expirable, stored as SHA-256 with a hint. The
      // accounts' own key_hash (their first key) is copied here; authentication reads only this.
      yield* sql`CREATE TABLE ${sql(t.apiKeys)} (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE,
        hint TEXT NOT NULL,
        label TEXT,
        created_at BIGINT NOT NULL,
        expires_at BIGINT,
        revoked_at BIGINT
      )`
      yield* sql`CREATE INDEX ${sql(`${t.apiKeys}_account`)} ON ${sql(t.apiKeys)} (account_id, created_at)`
      yield* sql`INSERT INTO ${sql(t.apiKeys)} (id, account_id, key_hash, hint, label, created_at)
        SELECT 'key_' || id, id, key_hash, 'mg_...', 'first key', created_at FROM ${sql(t.accounts)}`
    }),
    "0010_secret_rotation": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // After a rotation the previous signing secret still signs until previous_secret_until.
      yield* sql`ALTER TABLE ${sql(t.accounts)} ADD COLUMN previous_webhook_secret TEXT`
      yield* sql`ALTER TABLE ${sql(t.accounts)} ADD COLUMN previous_secret_until BIGINT`
    }),
    "0011_ledger": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // The credits ledger (core Ledger): its entries, and each account's sums of them, kept
      // in the same transaction as each entry so a reservation can check what is available.
      yield* sql`CREATE TABLE ${sql(t.ledgerEntries)} (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL,
        task_id TEXT,
        kind TEXT NOT NULL,
        amount BIGINT NOT NULL,
        held BIGINT NOT NULL,
        at BIGINT NOT NULL,
        note TEXT
      )`
      yield* sql`CREATE INDEX ${sql(`${t.ledgerEntries}_account`)} ON ${sql(t.ledgerEntries)} (account_id, at)`
      // A task has one reservation and one end of it (charge or release), whoever writes them.
      yield* sql`CREATE UNIQUE INDEX ${sql(`${t.ledgerEntries}_reserve`)} ON ${sql(t.ledgerEntries)} (task_id) WHERE kind = 'reserve'`
      yield* sql`CREATE UNIQUE INDEX ${sql(`${t.ledgerEntries}_end`)} ON ${sql(t.ledgerEntries)} (task_id) WHERE kind IN ('charge', 'release')`
      yield* sql`CREATE TABLE ${sql(t.ledgerBalances)} (
        account_id TEXT PRIMARY KEY,
        balance BIGINT NOT NULL,
        reserved BIGINT NOT NULL
      )`
    }),
    "0012_ledger_open": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // Reservations not yet charged or released, one row each (written and deleted in the
      // movement's transaction): the settlement sweep reads what is open, not the history.
      yield* sql`CREATE TABLE ${sql(t.ledgerOpen)} (
        task_id TEXT PRIMARY KEY,
        entry_id TEXT NOT NULL,
        at BIGINT NOT NULL
      )`
      yield* sql`CREATE INDEX ${sql(`${t.ledgerOpen}_at`)} ON ${sql(t.ledgerOpen)} (at, task_id)`
      yield* sql`INSERT INTO ${sql(t.ledgerOpen)} (task_id, entry_id, at)
        SELECT r.task_id, r.id, r.at FROM ${sql(t.ledgerEntries)} r
        WHERE r.kind = 'reserve' AND NOT EXISTS (
          SELECT 1 FROM ${sql(t.ledgerEntries)} e WHERE e.task_id = r.task_id AND e.kind IN ('charge', 'release')
        )`
    }),
    "0013_callback_rounds": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // A redeliver starts a new delivery round: the retry schedule counts the attempts made
      // since round_start (the attempts before it), the attempt numbers carry on.
      yield* sql`ALTER TABLE ${sql(t.callbacks)} ADD COLUMN round_start INTEGER NOT NULL DEFAULT 0`
    }),
    "0014_idempotency_keys": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // Submit's Idempotency-Keys per account: the body's fingerprint and the task the key is
      // reserved for (completed = 0, under a lease) or bound to (completed = 1).
      yield* sql`CREATE TABLE ${sql(t.idempotencyKeys)} (
        owner_id TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        task_id TEXT NOT NULL,
        completed INTEGER NOT NULL,
        created_at BIGINT NOT NULL,
        lease_until BIGINT NOT NULL,
        PRIMARY KEY (owner_id, idempotency_key)
      )`
      // Expired keys are deleted by age.
      yield* sql`CREATE INDEX ${sql(`${t.idempotencyKeys}_created`)} ON ${sql(t.idempotencyKeys)} (created_at)`
    }),
    "0015_list_filters": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // The task list's filters: an owner's tasks by status, and by model as submitted, newest first.
      yield* sql`CREATE INDEX ${sql(`${t.tasks}_owner_status`)} ON ${sql(t.tasks)} (owner_id, status, id)`
      const model = sql.literal(modelExpression(sql.onDialectOrElse({ pg: () => true, orElse: () => false })))
      yield* sql`CREATE INDEX ${sql(`${t.tasks}_owner_model`)} ON ${sql(t.tasks)} (owner_id, ${model}, id)`
    }),
    "0016_ledger_by_task": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // A task's entries by task: the partial unique indexes of 0011 cannot answer
      // `kind IN (?)` with the kinds bound as parameters (the planner cannot prove the index's
      // condition), so every settlement scanned the whole ledger.
      yield* sql`CREATE INDEX ${sql(`${t.ledgerEntries}_task`)} ON ${sql(t.ledgerEntries)} (task_id)`
    }),
    "0017_shared_limits": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // PostgreSQL only: the edge's limits are shared between nodes there (PgLimits).
      yield* sql.onDialectOrElse({
        pg: () => Effect.forEach(limitTables(prefix), (statement) => sql.unsafe(statement), { discard: true }),
        orElse: () => Effect.void
      })
    }),
    "0018_task_progress": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // What the upstream says of a running job (JSON); null when nothing is known.
      yield* sql`ALTER TABLE ${sql(t.tasks)} ADD COLUMN progress TEXT`
    }),
    "0019_callback_events": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // The callback events a task asked for (JSON); null for the spec's one terminal callback.
      yield* sql`ALTER TABLE ${sql(t.tasks)} ADD COLUMN callback_events TEXT`
      // The event a callback tells of; null for the spec's terminal callback with its own body.
      yield* sql`ALTER TABLE ${sql(t.callbacks)} ADD COLUMN event TEXT`
    }),
    "0020_database_id": Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      // One random id for these tables in this database: the task store and the ledger that
      // read the same id write a task and its reservation in one transaction (`databaseIdOf`).
      yield* sql`CREATE TABLE ${sql(t.databaseId)} (id TEXT NOT NULL)`
      const random = sql.literal(sql.onDialectOrElse({ pg: () => "md5(random()::text || clock_timestamp()::text)", orElse: () => "lower(hex(randomblob(16)))" }))
      yield* sql`INSERT INTO ${sql(t.databaseId)} (id) VALUES (${random})`
    }),
    // 0021 on: what running the service as a business needs (scoped keys, admin keys, the audit log, usage).
    ...operatorMigrations(t)
  }
}

/**
 * The id of the tables of `prefix` in the client's database (migration 0020): the same for
 * every backend on them, whichever client or process reads it, and another for another
 * database or prefix (two SQLite `:memory:` clients are two databases).
 */
export const databaseIdOf = (prefix: string): Effect.Effect<string, SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly id: string }>`SELECT id FROM ${sql(tables(prefix).databaseId)}`
    return `${prefix}:${String(rows[0]!.id)}`
  })

/**
 * Runs the pending migrations, each once, in the order of their numbers (the migrator sorts
 * them and records each in `<prefix>migrations`). On PostgreSQL several nodes may start at
 * once: a session advisory lock lets one migrate while the others wait, since the migrator's
 * own first step (creating its table) is not safe to run twice at the same time.
 */
export const migrate = (prefix: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const table = tables(prefix).migrations
    const run = Migrator.make({})({ loader: Migrator.fromRecord(migrations(prefix)), table })
    return yield* sql.onDialectOrElse({
      pg: () =>
        Effect.scoped(
          Effect.gen(function*() {
            const connection = yield* sql.reserve
            yield* Effect.acquireRelease(
              connection.execute("SELECT pg_advisory_lock(hashtext($1))", [table], undefined),
              // Closing the session releases the lock too; a failed unlock leaves nothing to undo.
              () => Effect.ignore(connection.execute("SELECT pg_advisory_unlock(hashtext($1))", [table], undefined))
            )
            return yield* run
          })
        ),
      orElse: () => run
    })
  })
