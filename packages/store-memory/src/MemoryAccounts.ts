/**
 * Accounts in memory. Keys are kept as SHA-256 hashes, never in the clear.
 */
import { Accounts, ApiKeys, Ids } from "@mediagate/core"
import { Clock, Context, Effect, Layer, Option, Redacted } from "effect"
import { createHash } from "node:crypto"

/** An account together with its API key, as a host configures it. */
export interface AccountWithKey {
  /** Branded on the way in, so a host can write a plain string. */
  readonly id: string
  readonly name: string
  readonly apiKey: Redacted.Redacted<string>
  /** `whsec_` secret that signs the account's callbacks. */
  readonly webhookSecret?: Redacted.Redacted<string>
}

/** A stored key: its terms and its SHA-256 (hex). */
interface StoredKey extends ApiKeys.KeyInfo {
  readonly hash: string
}

/**
 * Everything the memory accounts hold, as a plain value: the service reads nothing else, so
 * what is in here is all a heap dump of the process could reveal.
 */
export interface State {
  readonly accounts: Map<string, {
    readonly name: string
    readonly createdAt: number
    webhookSecret: Redacted.Redacted<string> | null
    previousSecret: Redacted.Redacted<string> | null
    previousUntil: number | null
  }>
  /** Keys by id. */
  readonly keys: Map<string, StoredKey>
  /** Key ids by the SHA-256 (hex) of the key. */
  readonly byHash: Map<string, string>
}

/** SHA-256 of an API key. */
export const hashKey = (key: string): Buffer => createHash("sha256").update(key, "utf8").digest()

/** The state for the given keys: the keys themselves are hashed and dropped. */
export const state = (accounts: ReadonlyArray<AccountWithKey>): State => {
  const held: State = { accounts: new Map(), keys: new Map(), byHash: new Map() }
  for (const account of accounts) {
    held.accounts.set(account.id, { name: account.name, createdAt: 0, webhookSecret: account.webhookSecret ?? null, previousSecret: null, previousUntil: null })
    const key = Redacted.value(account.apiKey)
    addKey(held, account.id, { id: `key_${account.id}`, hash: hashKey(key).toString("hex"), hint: ApiKeys.hint(key), label: null, createdAt: 0, expiresAt: null })
  }
  return held
}

const addKey = (held: State, accountId: string, key: Accounts.NewKey) => {
  const { hash, scope, ...terms } = key
  held.keys.set(key.id, { ...terms, hash, accountId, revokedAt: null, scope: scope ?? ApiKeys.unscoped })
  held.byHash.set(hash, key.id)
}

const keyInfo = ({ hash: _hash, ...info }: StoredKey): ApiKeys.KeyInfo => info

/** Accounts served from a state, with the admin operations on it. */
export const fromState = (held: State): Context.Tag.Service<Accounts.Accounts> & Context.Tag.Service<Accounts.AccountAdmin> => {
  const info = (id: string): Option.Option<Accounts.AccountInfo> =>
    Option.map(Option.fromNullable(held.accounts.get(id)), (account) => ({
      id: Ids.AccountId.make(id),
      name: account.name,
      createdAt: account.createdAt,
      keys: [...held.keys.values()].filter((key) => key.accountId === id).sort((a, b) => a.createdAt - b.createdAt).map(keyInfo)
    }))
  return {
    webhookSecret: (accountId) => Effect.sync(() => Option.fromNullable(held.accounts.get(accountId)?.webhookSecret)),
    authenticate: (apiKey) =>
      Effect.gen(function*() {
        const key = Redacted.value(apiKey)
        // A mistyped generated key is refused before any lookup.
        if (ApiKeys.classify(key) === "malformed") return Option.none()
        const now = yield* Clock.currentTimeMillis
        // Looked up by hash: the time taken says nothing about how close a guess was.
        const hash = hashKey(key).toString("hex")
        const stored = held.keys.get(held.byHash.get(hash) ?? "")
        if (stored === undefined || !ApiKeys.sameHash(stored.hash, hash) || ApiKeys.stateOf(stored, now) !== "active") return Option.none()
        return Option.map(Option.fromNullable(held.accounts.get(stored.accountId)), (account) => ({
          id: Ids.AccountId.make(stored.accountId),
          name: account.name,
          keyId: stored.id,
          scope: stored.scope ?? ApiKeys.unscoped
        }))
      }),
    createAccount: ({ id, key, name, webhookSecret }) =>
      Effect.suspend(() => {
        if (held.accounts.has(id) || held.byHash.has(key.hash)) return Effect.dieMessage(`account ${id} or its key exists`)
        held.accounts.set(id, { name, createdAt: key.createdAt, webhookSecret, previousSecret: null, previousUntil: null })
        addKey(held, id, key)
        return Effect.void
      }),
    signingSecrets: (accountId) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const account = held.accounts.get(accountId)
        if (account === undefined) return []
        const previous = account.previousSecret !== null && (account.previousUntil ?? 0) > now ? [account.previousSecret] : []
        return [...(account.webhookSecret === null ? [] : [account.webhookSecret]), ...previous]
      }),
    secrets: (accountId) =>
      Effect.sync(() =>
        Option.map(Option.fromNullable(held.accounts.get(accountId)), (account) => ({
          current: account.webhookSecret,
          previous: account.previousSecret,
          previousUntil: account.previousUntil
        }))
      ),
    rotateSecret: (accountId, secret, previousUntil) =>
      Effect.sync(() => {
        const account = held.accounts.get(accountId)
        if (account === undefined) return false
        account.previousSecret = account.webhookSecret
        account.previousUntil = previousUntil
        account.webhookSecret = secret
        return true
      }),
    getAccount: (id) => Effect.sync(() => info(id)),
    listAccounts: Effect.sync(() =>
      [...held.accounts.entries()].sort(([a, x], [b, y]) => x.createdAt - y.createdAt || (a < b ? -1 : 1)).flatMap(([id]) =>
        Option.toArray(info(id))
      )
    ),
    createKey: (accountId, key) =>
      Effect.sync(() => {
        if (!held.accounts.has(accountId)) return false
        addKey(held, accountId, key)
        return true
      }),
    revokeKey: (keyId, now) =>
      Effect.sync(() => {
        const stored = held.keys.get(keyId)
        if (stored === undefined) return Option.none()
        const revoked = stored.revokedAt === null ? { ...stored, revokedAt: now } : stored
        held.keys.set(keyId, revoked)
        return Option.some(keyInfo(revoked))
      })
  }
}

/** Accounts for the given keys. */
export const make = (accounts: ReadonlyArray<AccountWithKey>) => fromState(state(accounts))

/** The memory Accounts layer, with its admin operations. */
export const layer = (accounts: ReadonlyArray<AccountWithKey>): Layer.Layer<Accounts.Accounts | Accounts.AccountAdmin> =>
  Layer.effectContext(Effect.sync(() => {
    const service = make(accounts)
    return Context.make(Accounts.Accounts, service).pipe(Context.add(Accounts.AccountAdmin, service))
  }))
