/**
 * API keys to accounts. Keys are stored hashed by every backend.
 */
import { Clock, Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import type { KeyInfo, KeyScope } from "../domain/ApiKeys.js"
import type { StoreError } from "../domain/Errors.js"
import type { AccountId } from "../domain/Ids.js"

/** An account: the owner of tasks. */
export interface Account {
  readonly id: AccountId
  readonly name: string
  /** The key the request authenticated with, where the backend knows it (stored keys). */
  readonly keyId?: string | undefined
  /** That key's scope; absent or `ApiKeys.unscoped`: no rule beyond the account's. */
  readonly scope?: KeyScope | undefined
}

/** Looks up the account of an API key. A database failure is a StoreError, as in the TaskStore. */
export class Accounts extends Context.Tag("@mediagate/core/Accounts")<Accounts, {
  readonly authenticate: (apiKey: Redacted.Redacted<string>) => Effect.Effect<Option.Option<Account>, StoreError>
  /** The account's `whsec_` secret that signs its callbacks (Standard Webhooks), if it has one. */
  readonly webhookSecret: (accountId: AccountId) => Effect.Effect<Option.Option<Redacted.Redacted<string>>, StoreError>
  /**
   * Every secret a callback of the account is signed with now: the current one, and after a
   * rotation the previous one until its grace period ends (Standard Webhooks sends one
   * signature per secret, so receivers that still hold the old secret keep verifying).
   * Optional: without it, callbacks are signed with `webhookSecret` alone.
   */
  readonly signingSecrets?: (accountId: AccountId) => Effect.Effect<ReadonlyArray<Redacted.Redacted<string>>, StoreError>
  /**
   * Forgets what a cache in front of the backend holds (`cached`), so a key revoked or a
   * secret rotated by an operator takes effect in this process at once. Absent: nothing cached.
   */
  readonly invalidate?: Effect.Effect<void>
}>() {}

/** An account's signing secrets as admin tools show them. */
export interface SecretsInfo {
  readonly current: Redacted.Redacted<string> | null
  /** The secret before the last rotation, still signing until `previousUntil`. */
  readonly previous: Redacted.Redacted<string> | null
  readonly previousUntil: number | null
}

/** An account as admin tools show it, with its keys (never the keys themselves). */
export interface AccountInfo extends Account {
  readonly createdAt: number
  readonly keys: ReadonlyArray<KeyInfo>
}

/**
 * What an operator does with accounts and keys (the admin CLI). Every backend implements it
 * over the same data `Accounts` authenticates from; a key is given here already hashed.
 */
export class AccountAdmin extends Context.Tag("@mediagate/core/AccountAdmin")<AccountAdmin, {
  /** A new account with its first key. */
  readonly createAccount: (account: {
    readonly id: AccountId
    readonly name: string
    readonly webhookSecret: Redacted.Redacted<string>
    readonly key: NewKey
  }) => Effect.Effect<void, StoreError>
  readonly getAccount: (id: AccountId) => Effect.Effect<Option.Option<AccountInfo>, StoreError>
  /** Every account, oldest first. */
  readonly listAccounts: Effect.Effect<ReadonlyArray<AccountInfo>, StoreError>
  /** Adds a key to an existing account; false when there is no such account. */
  readonly createKey: (accountId: AccountId, key: NewKey) => Effect.Effect<boolean, StoreError>
  /** The account's signing secrets; none when there is no such account. */
  readonly secrets: (accountId: AccountId) => Effect.Effect<Option.Option<SecretsInfo>, StoreError>
  /**
   * Makes `secret` the account's signing secret; the one it replaces keeps signing until
   * `previousUntil`. False when there is no such account.
   */
  readonly rotateSecret: (accountId: AccountId, secret: Redacted.Redacted<string>, previousUntil: number) => Effect.Effect<boolean, StoreError>
  /** Revokes a key at `now`; the key as it now stands, none when there is no such key. Revoking twice keeps the first time. */
  readonly revokeKey: (keyId: string, now: number) => Effect.Effect<Option.Option<KeyInfo>, StoreError>
}>() {}

/** A key to store: its id, its SHA-256 and hint (`ApiKeys`), and its terms. */
export interface NewKey {
  readonly id: string
  readonly hash: string
  readonly hint: string
  readonly label: string | null
  readonly createdAt: number
  readonly expiresAt: number | null
  /** Its scope; absent: none. */
  readonly scope?: KeyScope | undefined
}

/** The account of the current request, provided by the HTTP auth middleware. */
export class CurrentAccount extends Context.Tag("@mediagate/core/CurrentAccount")<CurrentAccount, Account>() {}

/** Settings of `cached`. */
export interface CacheOptions {
  /** How long an account found for a key (or a signing secret) is kept. Default 5 s. */
  readonly ttl?: Duration.DurationInput
  /** Keys kept at most; the oldest are dropped first. Default 10,000. */
  readonly maxEntries?: number
}

/** Accounts with a short-lived cache in front, and a way to drop it (revoking a key calls it). */
export interface CachedAccounts extends Context.Tag.Service<Accounts> {
  /** Forgets every cached key and secret, so a revoked key stops working at once. */
  readonly invalidate: Effect.Effect<void>
}

/**
 * A cache in front of `inner`: every request authenticates, and looking a key up costs a
 * hash and a database read, more than the rest of a query. Only keys that name an account
 * are kept, so a key created a moment ago works at once; a key revoked in another process
 * works for at most `ttl` more (in this process, `invalidate` ends it at once). Times come
 * from the Clock.
 */
export const cached = (inner: Context.Tag.Service<Accounts>, options: CacheOptions = {}): CachedAccounts => {
  const ttl = Duration.toMillis(options.ttl ?? "5 seconds")
  const maxEntries = options.maxEntries ?? 10_000
  const remembered = <K, V>() => {
    const entries = new Map<K, { readonly value: V; readonly until: number }>()
    return {
      entries,
      through: <E>(key: K, load: Effect.Effect<Option.Option<V>, E>): Effect.Effect<Option.Option<V>, E> =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const hit = entries.get(key)
          if (hit !== undefined && hit.until > now) return Effect.succeed(Option.some(hit.value))
          return Effect.tap(load, (found) =>
            Effect.sync(() => {
              entries.delete(key)
              if (Option.isNone(found)) return
              entries.set(key, { value: found.value, until: now + ttl })
              if (entries.size > maxEntries) entries.delete(entries.keys().next().value!)
            }))
        })
    }
  }
  const keys = remembered<string, Account>()
  const secrets = remembered<AccountId, Redacted.Redacted<string>>()
  const signing = remembered<AccountId, ReadonlyArray<Redacted.Redacted<string>>>()
  const signingSecrets = inner.signingSecrets
  return {
    authenticate: (apiKey) => keys.through(Redacted.value(apiKey), inner.authenticate(apiKey)),
    webhookSecret: (accountId) => secrets.through(accountId, inner.webhookSecret(accountId)),
    ...(signingSecrets === undefined ? {} : {
      signingSecrets: (accountId: AccountId) =>
        Effect.map(signing.through(accountId, Effect.map(signingSecrets(accountId), Option.some)), Option.getOrElse(() => []))
    }),
    invalidate: Effect.sync(() => {
      keys.entries.clear()
      secrets.entries.clear()
      signing.entries.clear()
    })
  }
}

/** Puts `cached` in front of the Accounts in context. */
export const layerCached = (options: CacheOptions = {}): Layer.Layer<Accounts, never, Accounts> =>
  Layer.effect(Accounts, Effect.map(Accounts, (inner): Context.Tag.Service<Accounts> => cached(inner, options)))
