/**
 * Accounts in SQL. Only SHA-256 hashes of API keys are stored.
 */
import { SqlClient } from "@effect/sql"
import { Accounts, Ids, StoreError } from "@mediagate/core"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { createHash } from "node:crypto"
import { migrate, tables } from "./Schema.js"
import { defaultPrefix } from "./SqlTaskStore.js"

/** SHA-256 of an API key, hex. */
export const hashKey = (key: string): string => createHash("sha256").update(key, "utf8").digest("hex")

/** The SQL accounts service: authentication plus what a server needs at startup. */
export interface SqlAccounts extends Context.Tag.Service<Accounts.Accounts> {
  /** Creates the account unless one with this key exists; returns the account holding the key. */
  readonly ensure: (account: Accounts.Account & {
    readonly apiKey: Redacted.Redacted<string>
    /** Given to an account that has no secret yet. */
    readonly webhookSecret: Redacted.Redacted<string>
    readonly now: number
  }) => Effect.Effect<Accounts.Account, StoreError>
  /** How many accounts exist. */
  readonly count: Effect.Effect<number, StoreError>
}

const storeError = (operation: string) => (error: { readonly message: string }) =>
  new StoreError({ message: `${operation} failed: ${error.message}` })

/** While serving, a database failure is a defect (logged, answered 500), as in the task store. */
const orDie = (operation: string) => <A, R>(effect: Effect.Effect<A, { readonly message: string }, R>) =>
  effect.pipe(
    Effect.tapError((error) => Effect.logError(`accounts: ${operation} failed`, error)),
    Effect.mapError(storeError(operation)),
    Effect.orDie
  )

/** Builds the SQL accounts on the SqlClient in context, migrating first. */
export const make = (options: { readonly tablePrefix?: string } = {}): Effect.Effect<SqlAccounts, StoreError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const prefix = options.tablePrefix ?? defaultPrefix
    const table = tables(prefix).accounts
    yield* migrate(prefix).pipe(Effect.mapError((error) => new StoreError({ message: `migrating failed: ${String(error)}` })))

    const byHash = (hash: string) =>
      sql<{ id: string; name: string }>`SELECT id, name FROM ${sql(table)} WHERE key_hash = ${hash}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => ({ id: Ids.AccountId.make(String(row.id)), name: String(row.name) })))
      )

    return {
      authenticate: (apiKey) => {
        const key = Redacted.value(apiKey)
        return key.length === 0
          ? Effect.succeed(Option.none())
          : byHash(hashKey(key)).pipe(orDie("authenticate"))
      },
      ensure: ({ apiKey, id, name, now, webhookSecret }) =>
        Effect.gen(function*() {
          const hash = hashKey(Redacted.value(apiKey))
          const existing = yield* byHash(hash)
          if (Option.isSome(existing)) {
            yield* sql`UPDATE ${sql(table)} SET webhook_secret = ${Redacted.value(webhookSecret)} WHERE id = ${existing.value.id} AND webhook_secret IS NULL`
            return existing.value
          }
          yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ id, name, key_hash: hash, created_at: now, webhook_secret: Redacted.value(webhookSecret) })}`
          return { id, name }
        }).pipe(Effect.mapError(storeError("ensure account"))),
      webhookSecret: (accountId) =>
        sql<{ webhook_secret: string | null }>`SELECT webhook_secret FROM ${sql(table)} WHERE id = ${accountId}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]?.webhook_secret), (secret) => Redacted.make(String(secret)))),
          orDie("webhook secret")
        ),
      count: sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(table)}`.pipe(
        Effect.map((rows) => Number(rows[0]?.n ?? 0)),
        Effect.mapError(storeError("count accounts"))
      )
    }
  })

/** Tag of the SQL accounts, for the startup code that needs `ensure` and `count`. */
export class SqlAccountsService extends Effect.Tag("@mediagate/store-sql/SqlAccounts")<SqlAccountsService, SqlAccounts>() {}

/** Provides both the core Accounts tag and the SQL accounts service. */
export const layer = (options: { readonly tablePrefix?: string } = {}): Layer.Layer<
  Accounts.Accounts | SqlAccountsService,
  StoreError,
  SqlClient.SqlClient
> =>
  Layer.effectContext(
    Effect.map(make(options), (accounts) =>
      Context.make(Accounts.Accounts, accounts).pipe(Context.add(SqlAccountsService, accounts)))
  )
