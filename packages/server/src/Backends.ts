/**
 * Where a deployment keeps tasks, accounts, credits and files: everything in memory, or a
 * SQL database (SQLite or PostgreSQL) with files on disk. The standalone server and an
 * embedding host choose one of these and hand it to `Deployment.services({ backends, ... })`.
 */
import type { Accounts, IdempotencyKeys, Ids, Ledger, MediaError, MediaStore, TaskStore } from "@mediagate/core"
import { StoreError } from "@mediagate/core"
import { Routes } from "@mediagate/http"
import { FileMediaStore } from "@mediagate/media"
import { MemoryAccounts, MemoryLedger, MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import type * as StoreSql from "@mediagate/store-sql"
import type { Duration } from "effect"
import { Effect, Layer, Option, Redacted } from "effect"
import type * as Mediagate from "./Mediagate.js"

/** Where tasks, accounts, credits and files live. */
export interface Backends {
  readonly store: Layer.Layer<TaskStore.TaskStore, StoreError>
  readonly accounts: Layer.Layer<Accounts.Accounts, StoreError>
  readonly ledger: Layer.Layer<Ledger.Ledger, StoreError>
  readonly media: Layer.Layer<MediaStore.MediaStore, MediaError, Ids.Ids>
  /** Idempotency keys of submits; without it they live in memory (lost with the process). */
  readonly idempotencyKeys?: Layer.Layer<IdempotencyKeys.IdempotencyKeys, StoreError>
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
  media: MemoryMediaStore.layer({ baseUrl: `${config.publicUrl}${Routes.mediaPrefix}` })
})

/** Settings of `sqlBackends`. */
export interface SqlConfig {
  /** Where media URLs point: `<publicUrl>/media/...`. */
  readonly publicUrl: string
  /** `sqlite:<path>` or `postgres://...`. */
  readonly databaseUrl: string
  /** The folder result files are kept in. */
  readonly mediaDir: string
  /** How long a file is kept after it was last stored; none: forever. */
  readonly mediaRetention?: Option.Option<Duration.Duration>
}

/** The SQL backends: their accounts layer also gives the admin side (creating accounts, keys and secrets). */
export interface SqlBackends extends Backends {
  readonly accounts: Layer.Layer<Accounts.Accounts | Accounts.AccountAdmin | StoreSql.SqlAccounts.SqlAccountsService, StoreError>
}

/**
 * Tasks and accounts in the SQL database of `databaseUrl`; files under `mediaDir`. On
 * PostgreSQL, several servers may share the database: they wake each other with
 * LISTEN/NOTIFY.
 *
 * `@mediagate/store-sql` (and its drivers) is loaded only when these layers are built, so a
 * host that keeps everything in memory installs no database driver.
 */
export const sqlBackends = (config: SqlConfig): SqlBackends => {
  const sql = loadSql(config.databaseUrl)
  const postgres = /^postgres(ql)?:\/\//.test(config.databaseUrl)
  return {
    store: Layer.unwrapEffect(Effect.map(sql, (m) => m.store)),
    accounts: Layer.unwrapEffect(Effect.map(sql, (m) => m.accounts)),
    ledger: Layer.unwrapEffect(Effect.map(sql, (m) => m.ledger)),
    idempotencyKeys: Layer.unwrapEffect(Effect.map(sql, (m) => m.idempotencyKeys)),
    media: FileMediaStore.layerWith({
      directory: config.mediaDir,
      baseUrl: `${config.publicUrl}${Routes.mediaPrefix}`,
      ...Option.match(config.mediaRetention ?? Option.none(), { onNone: () => ({}), onSome: (retention) => ({ retention }) })
    }),
    // The relay's type admits no failure: a missing package is a defect there (the other layers fail with StoreError).
    ...(postgres ? { relay: Effect.flatMap(Effect.orDie(sql), (m) => m.PgNotify.make({ url: Redacted.make(config.databaseUrl) })) } : {})
  }
}

/**
 * The SQL layers, built once per `sqlBackends` call: the layers are memoised by reference,
 * so the store, accounts and ledger must each be the same object wherever they are provided.
 */
const loadSql = (databaseUrl: string) => {
  let loaded: Promise<ReturnType<typeof sqlLayers>> | undefined
  return Effect.tryPromise({
    try: () => (loaded ??= import("@mediagate/store-sql").then((m) => sqlLayers(m, databaseUrl))),
    // A missing package fails the backends' layers to build, as a database that cannot be opened does.
    catch: (error) =>
      new StoreError({
        message: `the SQL backends need the package @mediagate/store-sql (npm install @mediagate/store-sql): ${(error as Error).message}`
      })
  })
}

const sqlLayers = (m: typeof StoreSql, databaseUrl: string) => {
  // Two clients: on SQLite the task store keeps its connection to itself; accounts, the
  // ledger and the idempotency keys share the other (one layer, memoised by reference).
  const shared = m.Database.layerFromUrl(databaseUrl)
  return {
    store: m.SqlTaskStore.layer.pipe(Layer.provide(m.Database.layerFromUrl(databaseUrl))),
    accounts: m.SqlAccounts.layer.pipe(Layer.provide(shared)),
    ledger: m.SqlLedger.layer.pipe(Layer.provide(shared)),
    idempotencyKeys: m.SqlIdempotencyKeys.layer.pipe(Layer.provide(shared)),
    PgNotify: m.PgNotify
  }
}
