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

/** SHA-256 of an API key. */
export const hashKey = (key: string): Buffer => createHash("sha256").update(key, "utf8").digest()

/** Accounts for the given keys. */
export const make = (accounts: ReadonlyArray<AccountWithKey>): Context.Tag.Service<Accounts.Accounts> => {
  const byHash = new Map(
    accounts.map((account) => [
      hashKey(Redacted.value(account.apiKey)).toString("hex"),
      { id: Ids.AccountId.make(account.id), name: account.name }
    ])
  )
  const secrets = new Map(accounts.flatMap((account) => (account.webhookSecret ? [[account.id, account.webhookSecret] as const] : [])))
  return {
    webhookSecret: (accountId) => Effect.sync(() => Option.fromNullable(secrets.get(accountId))),
    authenticate: (apiKey) =>
      Effect.sync(() => {
        const key = Redacted.value(apiKey)
        // Looked up by hash: the time taken says nothing about how close a guess was.
        return key.length === 0 ? Option.none() : Option.fromNullable(byHash.get(hashKey(key).toString("hex")))
      })
  }
}

/** The memory Accounts layer. */
export const layer = (accounts: ReadonlyArray<AccountWithKey>): Layer.Layer<Accounts.Accounts> =>
  Layer.succeed(Accounts.Accounts, make(accounts))
