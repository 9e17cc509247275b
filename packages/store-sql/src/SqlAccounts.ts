/**
 * Accounts in SQL. Only SHA-256 hashes of API keys are stored.
 */
import type { SqlClient } from "@effect/sql"
import { Accounts, ApiKeys, Ids, StoreError } from "@mediagate/core"
import { Clock, Context, Effect, Layer, Option, Redacted } from "effect"
import { createHash } from "node:crypto"
import * as Database from "./Database.js"
import { refail as refailAs } from "./internal/refail.js"

/** Settings of the SQL accounts. */
export type Options = Database.Options

/** SHA-256 of an API key, hex. */
export const hashKey = (key: string): string => createHash("sha256").update(key, "utf8").digest("hex")

/** The SQL accounts service: authentication plus what a server needs at startup. */
export interface SqlAccounts extends Context.Tag.Service<Accounts.Accounts> {
  /** Creates the account unless one with this key exists; returns the account holding the key. */
  readonly ensure: (account: Accounts.Account & {
    readonly apiKey: Redacted.Redacted<string>
    /** The key's label if the account is created now: where the key came from, as `account list` shows it. */
    readonly keyLabel: string
    /** Given to an account that has no secret yet. */
    readonly webhookSecret: Redacted.Redacted<string>
    readonly now: number
  }) => Effect.Effect<Accounts.Account, StoreError>
  /** How many accounts exist. */
  readonly count: Effect.Effect<number, StoreError>
}

/** Driver failures while serving: StoreError, logged as the accounts', as in the task store. */
const refail = (operation: string) => refailAs("accounts", operation)

type KeyRow = {
  id: string
  account_id: string
  key_hash: string
  hint: string
  label: string | null
  created_at: number | string
  expires_at: number | string | null
  revoked_at: number | string | null
  allowed_models: string | null
  monthly_cap: number | string | null
  rate_limit: string | null
}

const numOrNull = (value: unknown) => (value === null || value === undefined ? null : Number(value))

const keyInfo = (row: KeyRow): ApiKeys.KeyInfo => ({
  id: String(row.id),
  accountId: String(row.account_id),
  hint: String(row.hint),
  label: row.label === null ? null : String(row.label),
  createdAt: Number(row.created_at),
  expiresAt: numOrNull(row.expires_at),
  revokedAt: numOrNull(row.revoked_at),
  scope: scopeOf(row)
})

/** JSON of a column, or `fallback` when it does not read (a column written by hand). */
const json = <A>(text: string, fallback: A): A => {
  try {
    return JSON.parse(text) as A
  } catch {
    return fallback
  }
}

/**
 * A key's scope from its columns (migration 0021). Models that do not read as a list of
 * strings allow no model: a damaged column must not widen what the key may do.
 */
const scopeOf = (row: KeyRow): ApiKeys.KeyScope => {
  const models = row.allowed_models === null || row.allowed_models === undefined ? null : json<unknown>(String(row.allowed_models), [])
  const limit = row.rate_limit === null || row.rate_limit === undefined ? null : json<unknown>(String(row.rate_limit), null)
  const rateLimit = typeof limit === "object" && limit !== null && "perSecond" in limit && "burst" in limit &&
      typeof limit.perSecond === "number" && typeof limit.burst === "number" && limit.perSecond > 0 && limit.burst >= 1
    ? { perSecond: limit.perSecond, burst: limit.burst }
    : null
  return {
    models: models === null ? null : Array.isArray(models) ? models.filter((model): model is string => typeof model === "string") : [],
    monthlyCapMicroUsd: numOrNull(row.monthly_cap),
    rateLimit
  }
}

/** A scope's columns (migration 0021); none for a key without one. */
const scopeColumns = (scope: ApiKeys.KeyScope | undefined) => ({
  allowed_models: scope?.models == null ? null : JSON.stringify(scope.models),
  monthly_cap: scope?.monthlyCapMicroUsd ?? null,
  rate_limit: scope?.rateLimit == null ? null : JSON.stringify({ perSecond: scope.rateLimit.perSecond, burst: scope.rateLimit.burst })
})

/** Builds the SQL accounts on the SqlClient in context, migrating first. */
export const make = (options: Options = {}): Effect.Effect<
  SqlAccounts & Context.Tag.Service<Accounts.AccountAdmin>,
  StoreError,
  SqlClient.SqlClient
> =>
  Effect.gen(function*() {
    const { sql, tables } = yield* Database.prepare("the accounts", options)
    const table = tables.accounts
    const keys = tables.apiKeys

    /** The key with this hash (in any state) and its account. */
    const byHash = (hash: string) =>
      sql<KeyRow & { name: string }>`SELECT k.*, a.name FROM ${sql(keys)} k JOIN ${sql(table)} a ON a.id = k.account_id WHERE k.key_hash = ${hash}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]))
      )

    const insertKey = (accountId: string, key: Accounts.NewKey) =>
      sql`INSERT INTO ${sql(keys)} ${
        sql.insert({
          id: key.id,
          account_id: accountId,
          key_hash: key.hash,
          hint: key.hint,
          label: key.label,
          created_at: key.createdAt,
          expires_at: key.expiresAt,
          revoked_at: null,
          ...scopeColumns(key.scope)
        })
      }`

    const info = (row: { id: string; name: string; created_at: number | string }) =>
      sql<KeyRow>`SELECT * FROM ${sql(keys)} WHERE account_id = ${row.id} ORDER BY created_at, id`.pipe(
        Effect.map((rows): Accounts.AccountInfo => ({
          id: Ids.AccountId.make(String(row.id)),
          name: String(row.name),
          createdAt: Number(row.created_at),
          keys: rows.map(keyInfo)
        }))
      )

    return {
      authenticate: (apiKey) => {
        const key = Redacted.value(apiKey)
        // A mistyped generated key is refused without reading the database.
        if (ApiKeys.classify(key) === "malformed") return Effect.succeed(Option.none())
        const hash = hashKey(key)
        return Effect.gen(function*() {
          const found = yield* byHash(hash)
          const now = yield* Clock.currentTimeMillis
          return Option.flatMap(found, (row) =>
            ApiKeys.sameHash(String(row.key_hash), hash) && ApiKeys.stateOf(keyInfo(row), now) === "active"
              ? Option.some({ id: Ids.AccountId.make(String(row.account_id)), name: String(row.name), keyId: String(row.id), scope: scopeOf(row) })
              : Option.none())
        }).pipe(refail("authenticate"))
      },
      ensure: ({ apiKey, id, keyLabel, name, now, webhookSecret }) =>
        Effect.gen(function*() {
          const key = Redacted.value(apiKey)
          const hash = hashKey(key)
          const existing = yield* byHash(hash)
          if (Option.isSome(existing)) {
            const accountId = String(existing.value.account_id)
            yield* sql`UPDATE ${sql(table)} SET webhook_secret = ${Redacted.value(webhookSecret)} WHERE id = ${accountId} AND webhook_secret IS NULL`
            return { id: Ids.AccountId.make(accountId), name: String(existing.value.name) }
          }
          yield* sql.withTransaction(Effect.gen(function*() {
            yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ id, name, key_hash: hash, created_at: now, webhook_secret: Redacted.value(webhookSecret) })}`
            yield* insertKey(id, { id: `key_${id}`, hash, hint: ApiKeys.hint(key), label: keyLabel, createdAt: now, expiresAt: null })
          }))
          return { id, name }
        }).pipe(StoreError.refail("ensure account")),
      webhookSecret: (accountId) =>
        sql<{ webhook_secret: string | null }>`SELECT webhook_secret FROM ${sql(table)} WHERE id = ${accountId}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]?.webhook_secret), (secret) => Redacted.make(String(secret)))),
          refail("webhook secret")
        ),
      signingSecrets: (accountId) =>
        Effect.gen(function*() {
          const rows = yield* sql<{ webhook_secret: string | null; previous_webhook_secret: string | null; previous_secret_until: number | string | null }>`
            SELECT webhook_secret, previous_webhook_secret, previous_secret_until FROM ${sql(table)} WHERE id = ${accountId}`
          const now = yield* Clock.currentTimeMillis
          const row = rows[0]
          if (row === undefined) return []
          const previous = row.previous_webhook_secret !== null && Number(row.previous_secret_until ?? 0) > now ? [row.previous_webhook_secret] : []
          return [...(row.webhook_secret === null ? [] : [row.webhook_secret]), ...previous].map((secret) => Redacted.make(String(secret)))
        }).pipe(refail("signing secrets")),
      secrets: (accountId) =>
        sql<{ webhook_secret: string | null; previous_webhook_secret: string | null; previous_secret_until: number | string | null }>`
          SELECT webhook_secret, previous_webhook_secret, previous_secret_until FROM ${sql(table)} WHERE id = ${accountId}`.pipe(
          Effect.map((rows) =>
            Option.map(Option.fromNullable(rows[0]), (row): Accounts.SecretsInfo => ({
              current: row.webhook_secret === null ? null : Redacted.make(String(row.webhook_secret)),
              previous: row.previous_webhook_secret === null ? null : Redacted.make(String(row.previous_webhook_secret)),
              previousUntil: numOrNull(row.previous_secret_until)
            }))
          ),
          refail("secrets")
        ),
      rotateSecret: (accountId, secret, previousUntil) =>
        sql`UPDATE ${sql(table)} SET previous_webhook_secret = webhook_secret, previous_secret_until = ${previousUntil},
              webhook_secret = ${Redacted.value(secret)} WHERE id = ${accountId} RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          refail("rotate secret")
        ),
      count: sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(table)}`.pipe(
        Effect.map((rows) => Number(rows[0]?.n ?? 0)),
        StoreError.refail("count accounts")
      ),
      createAccount: ({ id, key, name, webhookSecret }) =>
        sql.withTransaction(Effect.gen(function*() {
          // key_hash of the accounts table holds the first key (it predates the keys table).
          yield* sql`INSERT INTO ${sql(table)} ${sql.insert({ id, name, key_hash: key.hash, created_at: key.createdAt, webhook_secret: Redacted.value(webhookSecret) })}`
          yield* insertKey(id, key)
        })).pipe(refail("create account")),
      getAccount: (id) =>
        sql<{ id: string; name: string; created_at: number }>`SELECT id, name, created_at FROM ${sql(table)} WHERE id = ${id}`.pipe(
          Effect.flatMap((rows) => rows[0] === undefined ? Effect.succeed(Option.none()) : Effect.map(info(rows[0]), Option.some)),
          refail("get account")
        ),
      listAccounts: sql<{ id: string; name: string; created_at: number }>`SELECT id, name, created_at FROM ${sql(table)} ORDER BY created_at, id`.pipe(
        Effect.flatMap((rows) => Effect.forEach(rows, info)),
        refail("list accounts")
      ),
      createKey: (accountId, key) =>
        Effect.gen(function*() {
          const found = yield* sql`SELECT id FROM ${sql(table)} WHERE id = ${accountId}`
          if (found.length === 0) return false
          yield* insertKey(accountId, key)
          return true
        }).pipe(refail("create key")),
      revokeKey: (keyId, now) =>
        Effect.gen(function*() {
          yield* sql`UPDATE ${sql(keys)} SET revoked_at = ${now} WHERE id = ${keyId} AND revoked_at IS NULL`
          const rows = yield* sql<KeyRow>`SELECT * FROM ${sql(keys)} WHERE id = ${keyId}`
          return Option.map(Option.fromNullable(rows[0]), keyInfo)
        }).pipe(refail("revoke key"))
    }
  })

/** Tag of the SQL accounts, for the startup code that needs `ensure` and `count`. */
export class SqlAccountsService extends Effect.Tag("@mediagate/store-sql/SqlAccounts")<SqlAccountsService, SqlAccounts>() {}

/** Provides the core Accounts and AccountAdmin tags and the SQL accounts service, with options (table prefix). */
export const layerWith = (options: Options): Layer.Layer<
  Accounts.Accounts | Accounts.AccountAdmin | SqlAccountsService,
  StoreError,
  SqlClient.SqlClient
> =>
  Layer.effectContext(
    Effect.map(make(options), (accounts) =>
      Context.make(Accounts.Accounts, accounts).pipe(
        Context.add(SqlAccountsService, accounts),
        Context.add(Accounts.AccountAdmin, accounts)
      ))
  )

/** The SQL accounts layer (on the SqlClient in context), default table prefix. */
export const layer: Layer.Layer<
  Accounts.Accounts | Accounts.AccountAdmin | SqlAccountsService,
  StoreError,
  SqlClient.SqlClient
> = layerWith({})
