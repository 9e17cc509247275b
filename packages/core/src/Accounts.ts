/**
 * API keys to accounts. Keys are stored hashed by every backend.
 */
import type { Effect, Option, Redacted } from "effect"
import { Context } from "effect"
import type { AccountId } from "./Ids.js"

/** An account: the owner of tasks. */
export interface Account {
  readonly id: AccountId
  readonly name: string
}

/** Looks up the account of an API key. A database failure is a defect, as in the TaskStore. */
export class Accounts extends Context.Tag("@mediagate/core/Accounts")<Accounts, {
  readonly authenticate: (apiKey: Redacted.Redacted<string>) => Effect.Effect<Option.Option<Account>>
  /** The account's `whsec_` secret that signs its callbacks (Standard Webhooks), if it has one. */
  readonly webhookSecret: (accountId: AccountId) => Effect.Effect<Option.Option<Redacted.Redacted<string>>>
}>() {}

/** The account of the current request, provided by the HTTP auth middleware. */
export class CurrentAccount extends Context.Tag("@mediagate/core/CurrentAccount")<CurrentAccount, Account>() {}
