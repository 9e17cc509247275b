/**
 * The migrations from 0021 on: scoped keys, admin keys, the audit log and the indexes of the
 * usage reports (issue 35); uploaded files (issue 36). Kept apart from Schema.ts, which lists 0001 to 0020, only for
 * length; they run in the one sequence of numbers with those.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** The table names these migrations use (`Schema.tables`). */
interface Tables {
  readonly tasks: string
  readonly apiKeys: string
  readonly ledgerEntries: string
  readonly keySpend: string
  readonly adminKeys: string
  readonly auditLog: string
  readonly uploads: string
}

export const operatorMigrations = (t: Tables): Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> => ({
  "0021_key_scopes": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // A key's scope (ApiKeys.KeyScope): the models it may use (a JSON array of glob patterns,
    // null: every model), its monthly spend cap in micro-USD (null: none) and its own rate
    // limit (JSON `{ perSecond, burst }`, null: the server's).
    yield* sql`ALTER TABLE ${sql(t.apiKeys)} ADD COLUMN allowed_models TEXT`
    yield* sql`ALTER TABLE ${sql(t.apiKeys)} ADD COLUMN monthly_cap BIGINT`
    yield* sql`ALTER TABLE ${sql(t.apiKeys)} ADD COLUMN rate_limit TEXT`
    // The key a task was submitted with (null for tasks from before, and keys given as config).
    yield* sql`ALTER TABLE ${sql(t.tasks)} ADD COLUMN key_id TEXT`
    // Ledger entries of a task carry its key and model, so usage groups the ledger alone.
    yield* sql`ALTER TABLE ${sql(t.ledgerEntries)} ADD COLUMN key_id TEXT`
    yield* sql`ALTER TABLE ${sql(t.ledgerEntries)} ADD COLUMN model TEXT`
    // What counts against a key's monthly cap, per UTC month (`2026-12`): its reservations,
    // less those released; kept in the reservation's transaction, so racing submits and
    // several nodes never take the key past its cap.
    yield* sql`CREATE TABLE ${sql(t.keySpend)} (
      key_id TEXT NOT NULL,
      month TEXT NOT NULL,
      used BIGINT NOT NULL,
      PRIMARY KEY (key_id, month)
    )`
  }),
  "0022_admin": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Admin keys: separate from the accounts' keys, stored as SHA-256 with a hint.
    yield* sql`CREATE TABLE ${sql(t.adminKeys)} (
      id TEXT PRIMARY KEY,
      key_hash TEXT NOT NULL UNIQUE,
      hint TEXT NOT NULL,
      label TEXT,
      created_at BIGINT NOT NULL,
      expires_at BIGINT,
      revoked_at BIGINT
    )`
    // Every admin action: who (actor), when, what, on what, and the state before and after (JSON).
    yield* sql`CREATE TABLE ${sql(t.auditLog)} (
      id TEXT PRIMARY KEY,
      at BIGINT NOT NULL,
      actor TEXT NOT NULL,
      action TEXT NOT NULL,
      target TEXT,
      before TEXT,
      after TEXT
    )`
    yield* sql`CREATE INDEX ${sql(`${t.auditLog}_at`)} ON ${sql(t.auditLog)} (at, id)`
    // Tasks across accounts, newest first (the admin list), and by provider.
    yield* sql`CREATE INDEX ${sql(`${t.tasks}_created`)} ON ${sql(t.tasks)} (created_at, id)`
  }),
  "0023_usage": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Usage reports read the ledger by time across accounts, and a key's entries.
    yield* sql`CREATE INDEX ${sql(`${t.ledgerEntries}_at`)} ON ${sql(t.ledgerEntries)} (at)`
    yield* sql`CREATE INDEX ${sql(`${t.ledgerEntries}_key`)} ON ${sql(t.ledgerEntries)} (key_id, at)`
  }),
  "0024_uploads": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Uploaded input files (core Uploads): their metadata; the bytes are in the media store.
    yield* sql`CREATE TABLE ${sql(t.uploads)} (
      id TEXT PRIMARY KEY,
      owner_id TEXT NOT NULL,
      key_id TEXT,
      media_key TEXT NOT NULL UNIQUE,
      url TEXT NOT NULL,
      content_type TEXT NOT NULL,
      bytes BIGINT NOT NULL,
      width INTEGER,
      height INTEGER,
      duration_seconds DOUBLE PRECISION,
      created_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      pinned_until BIGINT
    )`
    yield* sql`CREATE INDEX ${sql(`${t.uploads}_owner`)} ON ${sql(t.uploads)} (owner_id, created_at)`
    yield* sql`CREATE INDEX ${sql(`${t.uploads}_expires`)} ON ${sql(t.uploads)} (expires_at)`
  }),
  "0025_uploads_deleted": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // A deleted upload's row stays as history (usage counts the uploads created in a window):
    // marked here, its file gone; lookups skip it.
    yield* sql`ALTER TABLE ${sql(t.uploads)} ADD COLUMN deleted_at BIGINT`
  }),
  "0026_uploads_created": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Usage reports read the uploads by creation time across accounts (the admin's report).
    yield* sql`CREATE INDEX ${sql(`${t.uploads}_created`)} ON ${sql(t.uploads)} (created_at)`
  })
})
