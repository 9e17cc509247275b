/**
 * What the admin API answers: the shapes of accounts, keys and their scopes, secrets,
 * credits, tasks across accounts, admin keys and the audit log, as Schemas (the OpenAPI
 * document and the console's types come from them) and the functions that make them from the
 * services' values. Keys and secrets appear in full only in the answer that creates them (and
 * signing secrets in the secrets endpoints, as the admin CLI shows them); everywhere else a
 * key is its hint.
 */
import { Redacted, Schema } from "effect"
import type { AccountOverview, TaskDetail } from "../admin/AdminService.js"
import * as ApiKeys from "../domain/ApiKeys.js"
import { isoTime, Task, toWire } from "../domain/Task.js"
import type { TaskRecord } from "../domain/Task.js"
import type { SecretsInfo } from "../services/Accounts.js"
import type { AdminKeyInfo } from "../services/AdminKeys.js"
import type { AuditEntry as AuditEntryValue } from "../services/AuditLog.js"
import type { Balance } from "../services/Ledger.js"
import { auditActions } from "./AdminRequests.js"
// Api.ts adds the admin groups to MediagateApi, so these are read lazily (Schema.suspend):
// this module is evaluated before Api.ts has defined them.
import { Callback as CustomerCallback, callbackWire, LedgerEntry as CustomerLedgerEntry, ledgerEntryWire } from "./Api.js"
import { okSchema } from "./Envelope.js"

const Callback = Schema.suspend((): Schema.Schema<typeof CustomerCallback.Type, typeof CustomerCallback.Encoded> => CustomerCallback)
const LedgerEntry = Schema.suspend((): Schema.Schema<typeof CustomerLedgerEntry.Type, typeof CustomerLedgerEntry.Encoded> => CustomerLedgerEntry)

const iso = (millis: number | null) => (millis === null ? null : isoTime(millis))

const time = (description: string) => Schema.String.annotations({ description: `${description} (ISO 8601 UTC).` })
const maybeTime = (description: string) => Schema.NullOr(Schema.String).annotations({ description: `${description} (ISO 8601 UTC).` })

/** A key's scope as the admin API shows it. */
export const KeyScope = Schema.Struct({
  models: Schema.NullOr(Schema.Array(Schema.String)).annotations({
    description: "Glob patterns of the model ids the key may submit; null: every model."
  }),
  monthly_cap_micro_usd: Schema.NullOr(Schema.Int).annotations({
    description: "The most the key may spend in a UTC calendar month, in micro-USD; null: no cap."
  }),
  rate_limit: Schema.NullOr(Schema.Struct({ per_second: Schema.Number, burst: Schema.Int })).annotations({
    description: "The key's own rate limit (requests a second on average, and at once); null: the server's."
  })
}).annotations({ identifier: "AdminKeyScope" })

export const keyScopeWire = (scope: ApiKeys.KeyScope | undefined): typeof KeyScope.Type => {
  const { models, monthlyCapMicroUsd, rateLimit } = scope ?? ApiKeys.unscoped
  return {
    models,
    monthly_cap_micro_usd: monthlyCapMicroUsd,
    rate_limit: rateLimit === null ? null : { per_second: rateLimit.perSecond, burst: rateLimit.burst }
  }
}

const KeyState = Schema.Literal("active", "revoked", "expired").annotations({ description: "What the key does now." })

/** An account's key: never the key itself. */
export const ApiKey = Schema.Struct({
  id: Schema.String,
  account_id: Schema.String,
  hint: Schema.String.annotations({ description: "The key's first characters, enough to tell keys apart." }),
  label: Schema.NullOr(Schema.String),
  state: KeyState,
  created_at: time("When it was made"),
  expires_at: maybeTime("When it stops working; null: never"),
  revoked_at: maybeTime("When it was revoked; null: not revoked"),
  scope: KeyScope
}).annotations({ identifier: "AdminApiKey" })

export const keyWire = (key: ApiKeys.KeyInfo, now: number): typeof ApiKey.Type => ({
  id: key.id,
  account_id: key.accountId,
  hint: key.hint,
  label: key.label,
  state: ApiKeys.stateOf(key, now),
  created_at: isoTime(key.createdAt),
  expires_at: iso(key.expiresAt),
  revoked_at: iso(key.revokedAt),
  scope: keyScopeWire(key.scope)
})

/** What an account holds, in micro-USD. */
const balanceFields = {
  balance_micro_usd: Schema.Int.annotations({ description: "Credits held for the account: the sum of every ledger entry's amount." }),
  reserved_micro_usd: Schema.Int.annotations({ description: "The part of the balance held for tasks that have not ended." }),
  available_micro_usd: Schema.Int.annotations({ description: "What new tasks may reserve: balance minus reserved." })
}

const balanceWire = ({ balance, reserved }: Balance) => ({
  balance_micro_usd: balance,
  reserved_micro_usd: reserved,
  available_micro_usd: balance - reserved
})

/** An account with its keys and what it holds. */
export const Account = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  created_at: time("When it was made"),
  ...balanceFields,
  keys: Schema.Array(ApiKey).annotations({ description: "Every key of the account, oldest first, with its state and scope." })
}).annotations({ identifier: "AdminAccount" })

export const accountWire = (account: AccountOverview, now: number): typeof Account.Type => ({
  id: account.id,
  name: account.name,
  created_at: isoTime(account.createdAt),
  ...balanceWire(account.balance),
  keys: account.keys.map((key) => keyWire(key, now))
})

export const AccountsResponse = okSchema(Schema.Struct({ accounts: Schema.Array(Account) })).annotations({ identifier: "AdminAccountsResponse" })
export const AccountResponse = okSchema(Account).annotations({ identifier: "AdminAccountResponse" })

const shownOnce = "Shown only in this answer: only its hash is kept."

export const CreatedAccountResponse = okSchema(Schema.Struct({
  account: Account,
  key: Schema.String.annotations({ description: `The account's first API key. ${shownOnce}` }),
  webhook_secret: Schema.String.annotations({ description: "The `whsec_` secret that signs the account's callbacks (Standard Webhooks)." })
})).annotations({ identifier: "AdminCreatedAccountResponse" })

export const CreatedKeyResponse = okSchema(Schema.Struct({
  key: Schema.String.annotations({ description: `The new API key. ${shownOnce}` }),
  info: ApiKey
})).annotations({ identifier: "AdminCreatedKeyResponse" })

export const KeyResponse = okSchema(ApiKey).annotations({ identifier: "AdminApiKeyResponse" })

/** An account's signing secrets, as the admin CLI's `secret show` prints them. */
export const SecretsResponse = okSchema(Schema.Struct({
  account_id: Schema.String,
  current: Schema.NullOr(Schema.String).annotations({ description: "The secret that signs the account's callbacks; null: none." }),
  previous: Schema.NullOr(Schema.String).annotations({ description: "The secret before the last rotation while it still signs; null otherwise." }),
  previous_signs_until: maybeTime("Until when the previous secret signs; null when it no longer does")
})).annotations({ identifier: "AdminSecretsResponse" })

export const secretsWire = (accountId: string, secrets: SecretsInfo, now: number): typeof SecretsResponse.Type["data"] => {
  const signing = secrets.previous !== null && (secrets.previousUntil ?? 0) > now
  return {
    account_id: accountId,
    current: secrets.current === null ? null : Redacted.value(secrets.current),
    previous: signing ? Redacted.value(secrets.previous!) : null,
    previous_signs_until: signing ? iso(secrets.previousUntil) : null
  }
}

export const CreditsAddedResponse = okSchema(Schema.Struct({
  account_id: Schema.String,
  entry: LedgerEntry,
  already_credited: Schema.Boolean.annotations({
    description: "True when an entry with this entry_id had credited the account already: nothing was added this time."
  }),
  ...balanceFields
})).annotations({ identifier: "AdminCreditsAddedResponse" })

export const creditsAddedWire = (accountId: string, added: { readonly entry: Parameters<typeof ledgerEntryWire>[0]; readonly written: boolean; readonly balance: Balance }) => ({
  account_id: accountId,
  entry: ledgerEntryWire(added.entry),
  already_credited: !added.written,
  ...balanceWire(added.balance)
})

export const CreditsResponse = okSchema(Schema.Struct({
  account_id: Schema.String,
  ...balanceFields,
  entries: Schema.Array(LedgerEntry).annotations({ description: "The latest ledger entries, newest first." })
})).annotations({ identifier: "AdminCreditsResponse" })

export const creditsWire = (accountId: string, credits: { readonly balance: Balance; readonly entries: ReadonlyArray<Parameters<typeof ledgerEntryWire>[0]> }) => ({
  account_id: accountId,
  ...balanceWire(credits.balance),
  entries: credits.entries.map(ledgerEntryWire)
})

/** A task as an operator sees it: the customer's shape, and whose it is and where it runs. */
export const AdminTask = Schema.Struct({
  ...Task.fields,
  account_id: Schema.String.annotations({ description: "The account that owns the task." }),
  key_id: Schema.NullOr(Schema.String).annotations({ description: "The key it was submitted with; null where unknown (a key given as configuration, older tasks)." }),
  provider: Schema.NullOr(Schema.String).annotations({ description: "The provider that runs its job; null where the upstream names none (the simulator)." }),
  callback_url: Schema.NullOr(Schema.String),
  user_id: Schema.NullOr(Schema.String)
}).annotations({ identifier: "AdminTask" })

export const adminTaskWire = (record: TaskRecord): typeof AdminTask.Type => ({
  ...toWire(record),
  account_id: record.ownerId,
  key_id: record.keyId,
  provider: record.provider,
  callback_url: record.callBackUrl,
  user_id: record.userId
})

export const AdminTaskResponse = okSchema(AdminTask).annotations({ identifier: "AdminTaskResponse" })

export const AdminTaskListResponse = okSchema(Schema.Struct({ tasks: Schema.Array(AdminTask), next_cursor: Schema.NullOr(Schema.String) }))
  .annotations({ identifier: "AdminTaskListResponse" })

const callbacksWire = (callbacks: TaskDetail["callbacks"]) => callbacks.map(({ attempts, callback }) => callbackWire(callback, attempts))

export const TaskDetailResponse = okSchema(Schema.Struct({
  task: AdminTask,
  callbacks: Schema.Array(Callback).annotations({ description: "The task's callbacks, each with every delivery attempt and the receiver's answer." }),
  ledger: Schema.Array(LedgerEntry).annotations({ description: "The task's ledger entries (reservation, charge or release), oldest first." })
})).annotations({ identifier: "AdminTaskDetailResponse" })

export const taskDetailWire = (detail: TaskDetail) => ({
  task: adminTaskWire(detail.task),
  callbacks: callbacksWire(detail.callbacks),
  ledger: detail.ledger.map(ledgerEntryWire)
})

export const AdminCallbacksResponse = okSchema(Schema.Struct({ callbacks: Schema.Array(Callback) })).annotations({ identifier: "AdminCallbacksResponse" })

export const adminCallbacksWire = (callbacks: TaskDetail["callbacks"]) => ({ callbacks: callbacksWire(callbacks) })

/** An admin key: never the key itself. */
export const AdminKey = Schema.Struct({
  id: Schema.String,
  hint: Schema.String.annotations({ description: "The key's first characters (`mga_` and 4 more)." }),
  label: Schema.NullOr(Schema.String),
  state: KeyState,
  created_at: time("When it was made"),
  expires_at: maybeTime("When it stops working; null: never"),
  revoked_at: maybeTime("When it was revoked; null: not revoked")
}).annotations({ identifier: "AdminKey" })

export const adminKeyWire = (key: AdminKeyInfo, now: number): typeof AdminKey.Type => ({
  id: key.id,
  hint: key.hint,
  label: key.label,
  state: ApiKeys.stateOf(key, now),
  created_at: isoTime(key.createdAt),
  expires_at: iso(key.expiresAt),
  revoked_at: iso(key.revokedAt)
})

export const AdminKeysResponse = okSchema(Schema.Struct({ admin_keys: Schema.Array(AdminKey) })).annotations({ identifier: "AdminKeysResponse" })
export const AdminKeyResponse = okSchema(AdminKey).annotations({ identifier: "AdminKeyResponse" })
export const CreatedAdminKeyResponse = okSchema(Schema.Struct({
  key: Schema.String.annotations({ description: `The new admin key. ${shownOnce}` }),
  info: AdminKey
})).annotations({ identifier: "AdminCreatedAdminKeyResponse" })

/** An entry of the audit log. */
export const AuditEntry = Schema.Struct({
  id: Schema.String,
  at: time("When it was done"),
  actor: Schema.String.annotations({ description: "Who did it: `admin_key:<id>` (the admin API, the console) or `cli:<user>` (the admin CLI)." }),
  action: Schema.Literal(...auditActions),
  target: Schema.NullOr(Schema.String).annotations({ description: "The id of what it was done to (account, key, admin key, task)." }),
  before: Schema.Unknown.annotations({ description: "The target's state before (hints, never a key or a secret); null where there was none." }),
  after: Schema.Unknown.annotations({ description: "The target's state after; null where there is none." })
}).annotations({ identifier: "AdminAuditEntry" })

export const auditEntryWire = (entry: AuditEntryValue): typeof AuditEntry.Type => ({
  id: entry.id,
  at: isoTime(entry.at),
  actor: entry.actor,
  action: entry.action,
  target: entry.target,
  before: entry.before ?? null,
  after: entry.after ?? null
})

export const AuditResponse = okSchema(Schema.Struct({ entries: Schema.Array(AuditEntry), next_cursor: Schema.NullOr(Schema.String) }))
  .annotations({ identifier: "AdminAuditResponse" })
