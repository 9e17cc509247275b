/**
 * Accounts in memory. Keys are kept as SHA-256 hashes, never in the clear.
 */
import { Accounts, Ids } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option, Redacted } from "effect"
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

/**
 * Everything the memory accounts hold, as a plain value: the service reads nothing else, so
 * what is in here is all a heap dump of the process could reveal.
 */
export interface State {
  /** Accounts by the SHA-256 (hex) of their API key. */
  readonly byKeyHash: ReadonlyMap<string, Accounts.Account>
  /** `whsec_` secrets by account id. */
  readonly webhookSecrets: ReadonlyMap<string, Redacted.Redacted<string>>
}

/** SHA-256 of an API key. */
export const hashKey = (key: string): Buffer => createHash("sha256").update(key, "utf8").digest()

/** The state for the given keys: the keys themselves are hashed and dropped. */
export const state = (accounts: ReadonlyArray<AccountWithKey>): State => ({
  byKeyHash: new Map(
    accounts.map((account) => [
      hashKey(Redacted.value(account.apiKey)).toString("hex"),
      { id: Ids.AccountId.make(account.id), name: account.name }
    ])
  ),
  webhookSecrets: new Map(accounts.flatMap((account) => (account.webhookSecret ? [[account.id, account.webhookSecret] as const] : [])))
})

/** Accounts served from a state. */
export const fromState = ({ byKeyHash, webhookSecrets }: State): Context.Tag.Service<Accounts.Accounts> => ({
  webhookSecret: (accountId) => Effect.sync(() => Option.fromNullable(webhookSecrets.get(accountId))),
  authenticate: (apiKey) =>
    Effect.sync(() => {
      const key = Redacted.value(apiKey)
      // Looked up by hash: the time taken says nothing about how close a guess was.
      return key.length === 0 ? Option.none() : Option.fromNullable(byKeyHash.get(hashKey(key).toString("hex")))
    })
})

/** Accounts for the given keys. */
export const make = (accounts: ReadonlyArray<AccountWithKey>): Context.Tag.Service<Accounts.Accounts> => fromState(state(accounts))

/** The memory Accounts layer. */
export const layer = (accounts: ReadonlyArray<AccountWithKey>): Layer.Layer<Accounts.Accounts> =>
  Layer.succeed(Accounts.Accounts, make(accounts))
