/**
 * The operator's service (`AdminService`) over the backends: every rule of what an operator
 * does is here once, for the admin API, the console and the admin CLI alike. Each action
 * writes one audit entry with the state of its target before and after (hints, never a key or
 * a secret); reads write none. A task is cancelled and its callback sent again through its
 * owner's own use cases (`TaskService.cancel`, `redeliver`), so the customer's rules hold.
 */
import { Clock, Effect, Layer, Option, Redacted } from "effect"
import * as ApiKeys from "../domain/ApiKeys.js"
import type { StoreError } from "../domain/Errors.js"
import { AccountId, Ids } from "../domain/Ids.js"
import { secretFromHex } from "../domain/StandardWebhooks.js"
import type { TaskId } from "../domain/Ids.js"
import { Accounts, AccountAdmin } from "../services/Accounts.js"
import type { AccountInfo, SecretsInfo } from "../services/Accounts.js"
import { AdminKeys } from "../services/AdminKeys.js"
import type { AdminKeyInfo } from "../services/AdminKeys.js"
import { actorName, AuditLog } from "../services/AuditLog.js"
import type { Action, Actor } from "../services/AuditLog.js"
import { Ledger } from "../services/Ledger.js"
import type { Balance } from "../services/Ledger.js"
import { TaskStore } from "../services/TaskStore.js"
import { entryId, formatUsd } from "../tasks/Credits.js"
import { TaskService } from "../tasks/TaskService.js"
import * as AdminKeyFormat from "./AdminKeyFormat.js"
import { AdminNotFound, AdminRefused, AdminService } from "./AdminService.js"
import type { AccountOverview, TaskDetail } from "./AdminService.js"

const iso = (millis: number | null) => (millis === null ? null : new Date(millis).toISOString())

/** A key as the audit log keeps it: its terms and hint, never the key. */
export const keyAudit = (key: ApiKeys.KeyInfo) => ({
  id: key.id,
  account_id: key.accountId,
  hint: key.hint,
  label: key.label,
  expires_at: iso(key.expiresAt),
  revoked_at: iso(key.revokedAt),
  scope: key.scope ?? ApiKeys.unscoped
})

const adminKeyAudit = (key: AdminKeyInfo) => ({
  id: key.id,
  hint: key.hint,
  label: key.label,
  expires_at: iso(key.expiresAt),
  revoked_at: iso(key.revokedAt)
})

const accountAudit = (account: AccountInfo) => ({ id: account.id, name: account.name, keys: account.keys.map(keyAudit) })

/** What a secret shows in the log: `whsec_` and 4 more characters. */
const secretHint = (secret: Redacted.Redacted<string> | null) => (secret === null ? null : `${Redacted.value(secret).slice(0, 10)}...`)

const secretsAudit = (secrets: SecretsInfo) => ({
  current: secretHint(secrets.current),
  previous: secretHint(secrets.previous),
  previous_until: iso(secrets.previousUntil)
})

const balanceAudit = (balance: Balance) => ({ balance_micro_usd: balance.balance, reserved_micro_usd: balance.reserved })

const callbacksAudit = (callbacks: TaskDetail["callbacks"]) =>
  callbacks.map(({ attempts, callback }) => ({ id: callback.id, status: callback.status, attempts: attempts.length }))

/** Builds the AdminService on the backends and the use cases in context. */
export const make = Effect.gen(function*() {
  const accounts = yield* Accounts
  const admin = yield* AccountAdmin
  const ledger = yield* Ledger
  const store = yield* TaskStore
  const tasks = yield* TaskService
  const audit = yield* AuditLog
  const adminKeys = yield* AdminKeys
  const ids = yield* Ids

  const record = (actor: Actor, action: Action, target: string | null, before: unknown, after: unknown) =>
    Effect.gen(function*() {
      const at = yield* Clock.currentTimeMillis
      yield* audit.record({ id: `aud_${yield* ids.taskId}`, at, actor: actorName(actor), action, target, before, after })
    })

  const overview = (account: AccountInfo): Effect.Effect<AccountOverview, StoreError> =>
    Effect.map(ledger.balance(account.id), (balance) => ({ ...account, balance }))

  const findAccount = (id: AccountId) =>
    Effect.flatMap(admin.getAccount(id), Option.match({
      onNone: () => Effect.fail(new AdminNotFound({ what: "account", id })),
      onSome: Effect.succeed
    }))

  const findTask = (id: TaskId) =>
    Effect.flatMap(store.get(id), Option.match({
      onNone: () => Effect.fail(new AdminNotFound({ what: "task", id })),
      onSome: Effect.succeed
    }))

  const deliveries = (taskId: TaskId): Effect.Effect<TaskDetail["callbacks"], StoreError> =>
    Effect.flatMap(store.callbacks(taskId), (callbacks) =>
      Effect.forEach(callbacks, (callback) => Effect.map(store.callbackAttempts(callback.id), (attempts) => ({ callback, attempts }))))

  /** A new customer key's stored form, with the key itself to show once. */
  const newKey = (label: string | null, now: number, expiresAt: number | null, scope: ApiKeys.KeyScope) =>
    Effect.gen(function*() {
      const key = yield* Effect.provideService(ApiKeys.generate, Ids, ids)
      const plain = Redacted.value(key)
      const id = `key_${yield* ids.token(8)}`
      return { key, stored: { id, hash: AdminKeyFormat.hashKey(plain), hint: ApiKeys.hint(plain), label, createdAt: now, expiresAt, scope } }
    })

  const newSecret = Effect.map(ids.token(24), (hex) => Redacted.make(secretFromHex(hex)))

  /** The owner of a task as its own use cases take it. */
  const ownerOf = (taskId: TaskId) =>
    Effect.gen(function*() {
      const task = yield* findTask(taskId)
      const owner = yield* admin.getAccount(task.ownerId)
      return { task, account: { id: task.ownerId, name: Option.match(owner, { onNone: () => "", onSome: (found) => found.name }) } }
    })

  const service: AdminService["Type"] = {
    listAccounts: Effect.flatMap(admin.listAccounts, (all) => Effect.forEach(all, overview)),
    getAccount: (id) => Effect.flatMap(findAccount(id), overview),
    createAccount: (actor, { name }) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const id = AccountId.make(`acct_${yield* ids.token(12)}`)
        const webhookSecret = yield* newSecret
        const { key, stored } = yield* newKey("first key", now, null, ApiKeys.unscoped)
        yield* admin.createAccount({ id, name, webhookSecret, key: stored })
        const account = yield* Effect.orDie(findAccount(id))
        yield* record(actor, "account.create", id, null, accountAudit(account))
        return { account: yield* overview(account), key, webhookSecret }
      }),
    createKey: (actor, accountId, { expiresAt, label, scope }) =>
      Effect.gen(function*() {
        yield* findAccount(accountId)
        const now = yield* Clock.currentTimeMillis
        const { key, stored } = yield* newKey(label, now, expiresAt, scope)
        if (!(yield* admin.createKey(accountId, stored))) return yield* new AdminNotFound({ what: "account", id: accountId })
        const info: ApiKeys.KeyInfo = { id: stored.id, accountId, hint: stored.hint, label, createdAt: now, expiresAt, revokedAt: null, scope }
        yield* record(actor, "key.create", stored.id, null, keyAudit(info))
        return { key, info }
      }),
    revokeKey: (actor, keyId) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const revoked = yield* admin.revokeKey(keyId, now)
        if (Option.isNone(revoked)) return yield* new AdminNotFound({ what: "key", id: keyId })
        // Revoking only sets revokedAt: the key before is the key now without it, unless it was revoked already.
        const after = revoked.value
        const before = after.revokedAt === now ? { ...after, revokedAt: null } : after
        if (accounts.invalidate !== undefined) yield* accounts.invalidate
        yield* record(actor, "key.revoke", keyId, keyAudit(before), keyAudit(after))
        return after
      }),
    secrets: (accountId) =>
      Effect.flatMap(admin.secrets(accountId), Option.match({
        onNone: () => Effect.fail(new AdminNotFound({ what: "account", id: accountId })),
        onSome: Effect.succeed
      })),
    rotateSecret: (actor, accountId, graceMs) =>
      Effect.gen(function*() {
        const before = yield* service.secrets(accountId)
        const now = yield* Clock.currentTimeMillis
        if (!(yield* admin.rotateSecret(accountId, yield* newSecret, now + graceMs))) {
          return yield* new AdminNotFound({ what: "account", id: accountId })
        }
        const after = yield* service.secrets(accountId)
        if (accounts.invalidate !== undefined) yield* accounts.invalidate
        yield* record(actor, "secret.rotate", accountId, secretsAudit(before), secretsAudit(after))
        return after
      }),
    addCredits: (actor, { accountId, amountMicroUsd: amount, entryId: asked, note }) =>
      Effect.gen(function*() {
        if (!Number.isSafeInteger(amount) || amount <= 0) {
          return yield* new AdminRefused({ message: `the amount must be a whole number of micro-USD above 0 (got ${amount})` })
        }
        yield* findAccount(accountId)
        const before = yield* ledger.balance(accountId)
        const at = yield* Clock.currentTimeMillis
        const { entry, written } = yield* ledger.credit({ id: asked ?? (yield* entryId(ids)), accountId, amount, at, note })
        // The id was taken: by this same credit (a replay, fine), or by another entry (a mistake).
        if (!written && (entry.kind !== "credit" || entry.accountId !== accountId || entry.amount !== amount)) {
          const of = formatUsd(entry.kind === "credit" ? entry.amount : Math.abs(entry.held))
          return yield* new AdminRefused({ message: `entry ${entry.id} is already a ${entry.kind} of ${of} for ${entry.accountId}: nothing credited` })
        }
        const balance = yield* ledger.balance(accountId)
        yield* record(actor, "credits.add", accountId, balanceAudit(before), {
          ...balanceAudit(balance),
          entry_id: entry.id,
          amount_micro_usd: amount,
          already_credited: !written
        })
        return { entry, written, balance }
      }),
    credits: (accountId, limit) =>
      Effect.gen(function*() {
        yield* findAccount(accountId)
        const [balance, entries] = yield* Effect.all([ledger.balance(accountId), ledger.entries(accountId, limit)])
        return { balance, entries }
      }),
    listTasks: store.listAll,
    task: (taskId) =>
      Effect.gen(function*() {
        const task = yield* findTask(taskId)
        const [callbacks, entries] = yield* Effect.all([deliveries(taskId), ledger.forTask(taskId)])
        return { task, callbacks, ledger: entries }
      }),
    cancelTask: (actor, taskId) =>
      Effect.gen(function*() {
        const { account, task } = yield* ownerOf(taskId)
        yield* tasks.cancel(account, taskId).pipe(
          Effect.catchTags({
            TaskNotFound: () => Effect.fail(new AdminNotFound({ what: "task", id: taskId })),
            TaskNotCancellable: (refused) => Effect.fail(new AdminRefused({ message: `task ${taskId} is ${refused.status}: only a task that has not ended can be cancelled` })),
            TaskConflict: () => Effect.fail(new AdminRefused({ message: `task ${taskId} kept changing while it was being cancelled: try again` }))
          })
        )
        const after = yield* findTask(taskId)
        yield* record(actor, "task.cancel", taskId, { status: task.status }, { status: after.status })
        return after
      }),
    redeliver: (actor, taskId) =>
      Effect.gen(function*() {
        const { account } = yield* ownerOf(taskId)
        const before = yield* deliveries(taskId)
        const after = yield* tasks.redeliver(account, taskId).pipe(
          Effect.catchTags({
            TaskNotFound: () => Effect.fail(new AdminNotFound({ what: "task", id: taskId })),
            CallbackNotRedeliverable: (refused) => Effect.fail(new AdminRefused({ message: refused.message }))
          })
        )
        yield* record(actor, "task.redeliver", taskId, callbacksAudit(before), callbacksAudit(after))
        return after
      }),
    createAdminKey: (actor, { expiresAt, label }) =>
      Effect.gen(function*() {
        const key = yield* Effect.provideService(AdminKeyFormat.generate, Ids, ids)
        const plain = Redacted.value(key)
        const createdAt = yield* Clock.currentTimeMillis
        const info: AdminKeyInfo = { id: `adk_${yield* ids.token(8)}`, hint: AdminKeyFormat.hint(plain), label, createdAt, expiresAt, revokedAt: null }
        yield* adminKeys.create({ ...info, hash: AdminKeyFormat.hashKey(plain) })
        yield* record(actor, "admin_key.create", info.id, null, adminKeyAudit(info))
        return { key, info }
      }),
    listAdminKeys: adminKeys.list,
    revokeAdminKey: (actor, id) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const revoked = yield* adminKeys.revoke(id, now)
        if (Option.isNone(revoked)) return yield* new AdminNotFound({ what: "admin key", id })
        const after = revoked.value
        const before = after.revokedAt === now ? { ...after, revokedAt: null } : after
        yield* record(actor, "admin_key.revoke", id, adminKeyAudit(before), adminKeyAudit(after))
        return after
      }),
    audit: (options) => audit.list(options)
  }
  return service
})

/** The AdminService over the accounts, ledger, task store, use cases, audit log, admin keys and ids in context. */
export const layer: Layer.Layer<
  AdminService,
  never,
  Accounts | AccountAdmin | Ledger | TaskStore | TaskService | AuditLog | AdminKeys | Ids
> = Layer.effect(AdminService, make)
