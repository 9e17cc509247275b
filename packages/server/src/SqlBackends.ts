/**
 * Tasks, accounts, credits and idempotency keys in a SQL database (SQLite or PostgreSQL),
 * files on disk. This module is `@mediagate/server/sql`, apart from the package's main entry,
 * so that a host that keeps everything in memory neither installs `@mediagate/store-sql`
 * and its drivers nor sees them named in the declarations it typechecks.
 */
import type { Accounts } from "@mediagate/core"
import type { StoreError } from "@mediagate/core"
import { Routes } from "@mediagate/http"
import { FileMediaStore } from "@mediagate/media"
import { Database, PgLimits, PgNotify, SqlAccounts, SqlAdminKeys, SqlAuditLog, SqlIdempotencyKeys, SqlLedger, SqlTaskStore, SqlUploads, SqlUsage } from "@mediagate/store-sql"
import type { Duration } from "effect"
import { Layer, Option, Redacted } from "effect"
import type { Backends } from "./Backends.js"

/** Settings of `make`. */
export interface Config {
  /** Where media URLs point: `<publicUrl>/media/...`. */
  readonly publicUrl: string
  /** `sqlite:<path>` or `postgres://...`. */
  readonly databaseUrl: string
  /** The folder result files are kept in (unless `media` says otherwise). */
  readonly mediaDir: string
  /**
   * Result files somewhere else than `mediaDir`: another MediaStore layer, such as
   * `S3MediaStore.layerWith` from `@mediagate/media/s3` (given here rather than imported, so
   * that this module never needs the S3 SDK installed).
   */
  readonly media?: Backends["media"]
  /** How long a file is kept after it was last stored; none: forever. */
  readonly mediaRetention?: Option.Option<Duration.Duration>
}

/** The SQL backends: their accounts layer also gives the admin side (creating accounts, keys and secrets). */
export interface SqlBackends extends Backends {
  readonly accounts: Layer.Layer<Accounts.Accounts | Accounts.AccountAdmin | SqlAccounts.SqlAccountsService, StoreError>
}

/**
 * Tasks and accounts in the SQL database of `databaseUrl`; files under `mediaDir`, or in
 * the `media` layer given. On
 * PostgreSQL, several servers may share the database: they wake each other with
 * LISTEN/NOTIFY, and the HTTP edge's limits (the per-key rate limit, the caps on held
 * requests) are kept in the database for all of them (`PgLimits`, as `limits`).
 */
export const make = (config: Config): SqlBackends => {
  // One client that accounts, the ledger, the idempotency keys and the rest share (one layer,
  // memoised by reference, so each of these layers must be the same object wherever it is
  // provided). On PostgreSQL the task store has a pool of its own beside it; on SQLite it
  // shares the one connection too, as two connections of one file would wait for each
  // other's write lock in SQLite's sleeping busy handler (docs/decisions.md, "SQLite: one
  // connection").
  const shared = Database.layerFromUrl(config.databaseUrl)
  const postgres = /^postgres(ql)?:\/\//.test(config.databaseUrl)
  return {
    store: SqlTaskStore.layer.pipe(Layer.provide(postgres ? Database.layerFromUrl(config.databaseUrl) : shared)),
    accounts: SqlAccounts.layer.pipe(Layer.provide(shared)),
    ledger: SqlLedger.layer.pipe(Layer.provide(shared)),
    idempotencyKeys: SqlIdempotencyKeys.layer.pipe(Layer.provide(shared)),
    usage: SqlUsage.layer.pipe(Layer.provide(shared)),
    adminKeys: SqlAdminKeys.layer.pipe(Layer.provide(shared)),
    audit: SqlAuditLog.layer.pipe(Layer.provide(shared)),
    uploads: SqlUploads.layer.pipe(Layer.provide(shared)),
    media: config.media ?? FileMediaStore.layerWith({
      directory: config.mediaDir,
      baseUrl: `${config.publicUrl}${Routes.mediaPrefix}`,
      ...Option.match(config.mediaRetention ?? Option.none(), { onNone: () => ({}), onSome: (retention) => ({ retention }) })
    }),
    ...(postgres ? { relay: PgNotify.make({ url: Redacted.make(config.databaseUrl) }), limits: PgLimits.layer().pipe(Layer.provide(shared)) } : {})
  }
}
