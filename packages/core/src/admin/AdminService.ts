/**
 * What an operator does, in one service for the admin API, the console and the admin CLI
 * alike, so no rule is written twice: accounts, keys and their scopes, signing secrets,
 * credits, tasks across accounts (list, detail, cancel, redeliver), admin keys, and the
 * audit log every action here writes to (`AuditLog`), with who did it and the state before
 * and after. Reads are not logged.
 */
import type { Effect, Redacted } from "effect"
import { Context, Data } from "effect"
import type { KeyInfo, KeyScope } from "../domain/ApiKeys.js"
import type { StoreError } from "../domain/Errors.js"
import type { AccountId, TaskId } from "../domain/Ids.js"
import type { TaskRecord } from "../domain/Task.js"
import type { AccountInfo, SecretsInfo } from "../services/Accounts.js"
import type { AdminKeyInfo } from "../services/AdminKeys.js"
import type { Actor, AuditPage } from "../services/AuditLog.js"
import type { Action } from "../services/AuditLog.js"
import type { Balance, LedgerEntry } from "../services/Ledger.js"
import type { AdminListFilter, CallbackAttempt, CallbackState, TaskPage } from "../services/TaskStore.js"

/** The admin key of the current admin request, provided by the admin API's authentication. */
export class CurrentAdmin extends Context.Tag("@mediagate/core/CurrentAdmin")<CurrentAdmin, AdminKeyInfo>() {}

/** Nothing with this id: 404 in the admin API, one line and exit 1 in the CLI. */
export class AdminNotFound extends Data.TaggedError("AdminNotFound")<{
  readonly what: "account" | "key" | "admin key" | "task"
  readonly id: string
}> {
  override get message() {
    return `no ${this.what} ${this.id}`
  }
}

/** The action does not apply to the target as it stands (409 in the admin API), with why. */
export class AdminRefused extends Data.TaggedError("AdminRefused")<{ readonly message: string }> {}

/** An account with what it holds. */
export interface AccountOverview extends AccountInfo {
  readonly balance: Balance
}

/** A task with everything an operator looks at: its callbacks with their attempts, and its ledger entries. */
export interface TaskDetail {
  readonly task: TaskRecord
  readonly callbacks: ReadonlyArray<{ readonly callback: CallbackState; readonly attempts: ReadonlyArray<CallbackAttempt> }>
  readonly ledger: ReadonlyArray<LedgerEntry>
}

export class AdminService extends Context.Tag("@mediagate/core/AdminService")<AdminService, {
  /** Every account, oldest first, with its keys and balance. */
  readonly listAccounts: Effect.Effect<ReadonlyArray<AccountOverview>, StoreError>
  readonly getAccount: (id: AccountId) => Effect.Effect<AccountOverview, AdminNotFound | StoreError>
  /** A new account with its first key and its signing secret, both shown only in this answer. */
  readonly createAccount: (actor: Actor, input: { readonly name: string }) => Effect.Effect<{
    readonly account: AccountOverview
    readonly key: Redacted.Redacted<string>
    readonly webhookSecret: Redacted.Redacted<string>
  }, StoreError>
  /** Another key for an account, with its scope; the key is shown only in this answer. */
  readonly createKey: (actor: Actor, accountId: AccountId, input: {
    readonly label: string | null
    readonly expiresAt: number | null
    readonly scope: KeyScope
  }) => Effect.Effect<{ readonly key: Redacted.Redacted<string>; readonly info: KeyInfo }, AdminNotFound | StoreError>
  /** Revokes a key at once (and drops this process's cache of keys). */
  readonly revokeKey: (actor: Actor, keyId: string) => Effect.Effect<KeyInfo, AdminNotFound | StoreError>
  readonly secrets: (accountId: AccountId) => Effect.Effect<SecretsInfo, AdminNotFound | StoreError>
  /** A new signing secret; the old one keeps signing for `graceMs`. */
  readonly rotateSecret: (actor: Actor, accountId: AccountId, graceMs: number) => Effect.Effect<SecretsInfo, AdminNotFound | StoreError>
  /**
   * Adds micro-USD to an account, once per `entryId` (a generated one when absent): asked
   * again with the same id, nothing is credited (`written` false); an id already used by
   * another entry is refused.
   */
  readonly addCredits: (actor: Actor, input: {
    readonly accountId: AccountId
    readonly amountMicroUsd: number
    readonly note: string
    readonly entryId?: string | undefined
  }) => Effect.Effect<{ readonly entry: LedgerEntry; readonly written: boolean; readonly balance: Balance }, AdminNotFound | AdminRefused | StoreError>
  /** The account's balance and its latest `limit` entries, newest first. */
  readonly credits: (accountId: AccountId, limit: number) => Effect.Effect<{
    readonly balance: Balance
    readonly entries: ReadonlyArray<LedgerEntry>
  }, AdminNotFound | StoreError>
  /** Every account's tasks, newest first, those the filter lets through. */
  readonly listTasks: (options: {
    readonly limit: number
    readonly cursor?: TaskId | undefined
    readonly filter?: AdminListFilter | undefined
  }) => Effect.Effect<TaskPage, StoreError>
  readonly task: (taskId: TaskId) => Effect.Effect<TaskDetail, AdminNotFound | StoreError>
  /** Cancels a task for its owner, by the owner's rules (a task that has ended is refused). */
  readonly cancelTask: (actor: Actor, taskId: TaskId) => Effect.Effect<TaskRecord, AdminNotFound | AdminRefused | StoreError>
  /** Sends an ended task's callback again, by the owner's rules; the callbacks as they now stand. */
  readonly redeliver: (actor: Actor, taskId: TaskId) => Effect.Effect<TaskDetail["callbacks"], AdminNotFound | AdminRefused | StoreError>
  /** A new admin key, shown only in this answer. */
  readonly createAdminKey: (actor: Actor, input: { readonly label: string | null; readonly expiresAt: number | null }) => Effect.Effect<{
    readonly key: Redacted.Redacted<string>
    readonly info: AdminKeyInfo
  }, StoreError>
  readonly listAdminKeys: Effect.Effect<ReadonlyArray<AdminKeyInfo>, StoreError>
  readonly revokeAdminKey: (actor: Actor, id: string) => Effect.Effect<AdminKeyInfo, AdminNotFound | StoreError>
  /** The audit log, newest first. */
  readonly audit: (options: {
    readonly limit: number
    readonly cursor?: string | undefined
    readonly action?: Action | undefined
    readonly target?: string | undefined
  }) => Effect.Effect<AuditPage, StoreError>
}>() {}
