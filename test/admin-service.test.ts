/**
 * The operator's service (`AdminOperations.layer`) over the memory backends and the real use
 * cases: every action writes one audit entry with the state before and after and never a key
 * or a secret; a revoked key stops authenticating at once through the account cache; credits
 * are added once per entry id; a task is cancelled and redelivered by its owner's rules;
 * admin keys have a format of their own.
 */
import { describe, expect, it } from "@effect/vitest"
import {
  Accounts,
  AdminKeyFormat,
  AdminKeys,
  AdminOperations,
  AdminService,
  ApiKeys,
  Ids,
  ModelCatalog,
  Moderation,
  TaskServiceAlone,
  TaskStore
} from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryAccounts, MemoryAdminKeys, MemoryAuditLog, MemoryLedger, MemoryTaskStore } from "@mediagate/store-memory"
import { Effect, Exit, Layer, Option, Redacted, TestClock } from "effect"

const cli = { kind: "cli", id: "ops" } as const
const apiActor = { kind: "admin_key", id: "adk_1" } as const

const backends = Layer.mergeAll(
  MemoryAccounts.layer([]),
  MemoryLedger.layer,
  MemoryTaskStore.layer,
  MemoryAuditLog.layer,
  MemoryAdminKeys.layer,
  Ids.layerTest
)
/** The service as a server builds it: the accounts behind their cache, the use cases on the same store. */
const services = AdminOperations.layer.pipe(
  Layer.provideMerge(TaskServiceAlone.layer.pipe(Layer.provide([ModelCatalog.layer, Moderation.layerAllowAll, TaskServiceAlone.noUpstream]))),
  Layer.provideMerge(Accounts.layerCached()),
  Layer.provideMerge(backends)
)
const withService = <A, E, R>(body: (admin: AdminService.AdminService["Type"]) => Effect.Effect<A, E, R>) =>
  Effect.flatMap(AdminService.AdminService, body).pipe(Effect.provide(Layer.fresh(services)))

/** The whole audit log, newest first. */
const auditLog = (admin: AdminService.AdminService["Type"]) => Effect.map(admin.audit({ limit: 100 }), (page) => page.entries)

describe("AdminOperations", () => {
  it.effect("an account made with its first key and secret, logged without either", () =>
    withService((admin) =>
      Effect.gen(function*() {
        yield* TestClock.setTime(1_800_000_000_000)
        const made = yield* admin.createAccount(cli, { name: "Acme" })
        expect(made.account.name).toBe("Acme")
        expect(made.account.balance).toEqual({ balance: 0, reserved: 0 })
        expect(ApiKeys.classify(Redacted.value(made.key))).toBe("generated")
        expect(Redacted.value(made.webhookSecret)).toMatch(/^whsec_/)
        const accounts = yield* Accounts.Accounts
        const found = yield* accounts.authenticate(made.key)
        expect(Option.map(found, (account) => account.id)).toEqual(Option.some(made.account.id))
        const [entry, ...rest] = yield* auditLog(admin)
        expect(rest).toEqual([])
        expect(entry).toMatchObject({ actor: "cli:ops", action: "account.create", target: made.account.id, at: 1_800_000_000_000, before: null })
        const written = JSON.stringify(entry)
        expect(written).not.toContain(Redacted.value(made.key))
        expect(written).not.toContain(Redacted.value(made.webhookSecret))
        expect(written).toContain(made.account.keys[0]!.hint)
      })))

  it.effect("a revoked key stops working at once, through the cache; the log has its state before and after", () =>
    withService((admin) =>
      Effect.gen(function*() {
        const accounts = yield* Accounts.Accounts
        const { account } = yield* admin.createAccount(cli, { name: "Acme" })
        const scope = { models: ["alpha-*"], monthlyCapMicroUsd: 50_000_000, rateLimit: { perSecond: 10, burst: 10 } }
        const { info, key } = yield* admin.createKey(apiActor, account.id, { label: "ci", expiresAt: null, scope })
        expect(info).toMatchObject({ accountId: account.id, label: "ci", revokedAt: null, scope })
        expect(Option.isSome(yield* accounts.authenticate(key))).toBe(true) // cached now
        yield* TestClock.adjust(1000)
        const revoked = yield* admin.revokeKey(apiActor, info.id)
        expect(revoked.revokedAt).toBe(1000)
        expect(yield* accounts.authenticate(key)).toEqual(Option.none())
        const [revoke, create] = yield* auditLog(admin)
        expect(revoke).toMatchObject({ action: "key.revoke", actor: "admin_key:adk_1", target: info.id })
        expect(revoke!.before).toMatchObject({ revoked_at: null, hint: info.hint })
        expect(revoke!.after).toMatchObject({ revoked_at: new Date(1000).toISOString() })
        expect(create).toMatchObject({ action: "key.create", before: null, after: { id: info.id, scope } })
        const missing = yield* Effect.exit(admin.revokeKey(apiActor, "key_nope"))
        expect(missing).toEqual(Exit.fail(new AdminService.AdminNotFound({ what: "key", id: "key_nope" })))
      })))

  it.effect("credits once per entry id, the balance before and after in the log; an id of another entry refused", () =>
    withService((admin) =>
      Effect.gen(function*() {
        const { account } = yield* admin.createAccount(cli, { name: "Acme" })
        const first = yield* admin.addCredits(cli, { accountId: account.id, amountMicroUsd: 5_000_000, note: "top-up", entryId: "le_once" })
        expect(first.written).toBe(true)
        const again = yield* admin.addCredits(cli, { accountId: account.id, amountMicroUsd: 5_000_000, note: "top-up", entryId: "le_once" })
        expect(again.written).toBe(false)
        expect(again.balance.balance).toBe(5_000_000)
        const other = yield* Effect.exit(admin.addCredits(cli, { accountId: account.id, amountMicroUsd: 7_000_000, note: "x", entryId: "le_once" }))
        expect(other).toEqual(Exit.fail(new AdminService.AdminRefused({ message: `entry le_once is already a credit of $5.00 for ${account.id}: nothing credited` })))
        const zero = yield* Effect.exit(admin.addCredits(cli, { accountId: account.id, amountMicroUsd: 0, note: "x" }))
        expect(Exit.isFailure(zero)).toBe(true)
        const nobody = yield* Effect.exit(admin.addCredits(cli, { accountId: Ids.AccountId.make("acct_none"), amountMicroUsd: 1, note: "x" }))
        expect(nobody).toEqual(Exit.fail(new AdminService.AdminNotFound({ what: "account", id: "acct_none" })))
        const credits = (yield* auditLog(admin)).filter((entry) => entry.action === "credits.add")
        expect(credits.map((entry) => [entry.before, entry.after])).toEqual([
          [{ balance_micro_usd: 5_000_000, reserved_micro_usd: 0 }, {
            balance_micro_usd: 5_000_000,
            reserved_micro_usd: 0,
            entry_id: "le_once",
            amount_micro_usd: 5_000_000,
            already_credited: true
          }],
          [{ balance_micro_usd: 0, reserved_micro_usd: 0 }, {
            balance_micro_usd: 5_000_000,
            reserved_micro_usd: 0,
            entry_id: "le_once",
            amount_micro_usd: 5_000_000,
            already_credited: false
          }]
        ])
        expect((yield* admin.credits(account.id, 10)).entries.map((entry) => entry.id)).toEqual(["le_once"])
      })))

  it.effect("a secret rotated: the log shows hints of the old and new secrets, never the secrets", () =>
    withService((admin) =>
      Effect.gen(function*() {
        const { account, webhookSecret } = yield* admin.createAccount(cli, { name: "Acme" })
        const after = yield* admin.rotateSecret(cli, account.id, 60_000)
        expect(after.previous).toEqual(webhookSecret)
        expect(after.previousUntil).toBe(60_000)
        const [entry] = yield* auditLog(admin)
        expect(entry).toMatchObject({ action: "secret.rotate", before: { current: `${Redacted.value(webhookSecret).slice(0, 10)}...` } })
        expect(JSON.stringify(entry)).not.toContain(Redacted.value(after.current!))
        expect(JSON.stringify(entry)).not.toContain(Redacted.value(webhookSecret))
      })))

  it.effect("tasks of every owner listed and filtered; cancel by the owner's rules, once", () =>
    withService((admin) =>
      Effect.gen(function*() {
        const store = yield* TaskStore.TaskStore
        const { account } = yield* admin.createAccount(cli, { name: "Acme" })
        const id = (n: number) => Ids.uuidV7(n, [n, 0, 0, 0, 0, 0, 0, 0, 0, 0])
        yield* store.create(Testing.record({ id: id(1), ownerId: account.id, createdAt: 1, provider: "fal" }))
        yield* store.create(Testing.record({ id: id(2), ownerId: "acct_other", createdAt: 2, status: "SUCCESS" }))
        yield* store.create(Testing.record({ id: id(3), ownerId: account.id, createdAt: 3, input: { model: "clip3", prompt: "p" } }))
        const all = yield* admin.listTasks({ limit: 2 })
        expect(all.tasks.map((task) => task.id)).toEqual([id(3), id(2)])
        const next = yield* admin.listTasks({ limit: 2, cursor: all.nextCursor! })
        expect(next).toEqual({ tasks: [expect.objectContaining({ id: id(1) })], nextCursor: null })
        const owned = yield* admin.listTasks({ limit: 10, filter: { ownerId: account.id, provider: "fal" } })
        expect(owned.tasks.map((task) => task.id)).toEqual([id(1)])
        const cancelled = yield* admin.cancelTask(cli, Ids.TaskId.make(id(1)))
        expect(cancelled.status).toBe("CANCELLED")
        const again = yield* Effect.exit(admin.cancelTask(cli, Ids.TaskId.make(id(1))))
        expect(Exit.isFailure(again) && JSON.stringify(again)).toContain("CANCELLED")
        const [entry] = yield* auditLog(admin)
        expect(entry).toMatchObject({ action: "task.cancel", target: id(1), before: { status: "PENDING" }, after: { status: "CANCELLED" } })
        // A task with no callBackUrl has nothing to redeliver: refused with why, nothing logged.
        const redelivered = yield* Effect.exit(admin.redeliver(cli, Ids.TaskId.make(id(1))))
        expect(redelivered).toEqual(Exit.fail(new AdminService.AdminRefused({ message: "task has no callBackUrl, so there is no callback to redeliver" })))
        expect((yield* admin.task(Ids.TaskId.make(id(2)))).task.ownerId).toBe("acct_other")
        expect(yield* Effect.exit(admin.task(Ids.TaskId.make(id(9))))).toEqual(Exit.fail(new AdminService.AdminNotFound({ what: "task", id: id(9) })))
        expect((yield* auditLog(admin)).length).toBe(2)
      })))

  it.effect("admin keys: their own format, authenticated while active, revoked once, listed without the key", () =>
    withService((admin) =>
      Effect.gen(function*() {
        const keys = yield* AdminKeys.AdminKeys
        const accounts = yield* Accounts.Accounts
        const { info, key } = yield* admin.createAdminKey(cli, { label: "console", expiresAt: 10_000 })
        const plain = Redacted.value(key)
        expect(plain).toMatch(AdminKeyFormat.pattern)
        expect(AdminKeyFormat.isAdminKey(plain)).toBe(true)
        expect(ApiKeys.classify(plain)).toBe("given") // not a customer key's shape
        expect(info.hint).toBe(`${plain.slice(0, 8)}...`)
        expect(yield* accounts.authenticate(key)).toEqual(Option.none())
        expect(yield* keys.authenticate(key, 0)).toEqual(Option.some(info))
        expect(yield* keys.authenticate(key, 10_000)).toEqual(Option.none()) // expired
        expect(yield* admin.listAdminKeys).toEqual([info])
        yield* TestClock.adjust(500)
        const revoked = yield* admin.revokeAdminKey(cli, info.id)
        expect(revoked.revokedAt).toBe(500)
        expect(yield* keys.authenticate(key, 600)).toEqual(Option.none())
        const page = yield* admin.audit({ limit: 1, action: "admin_key.create" })
        expect(page.entries.map((entry) => entry.target)).toEqual([info.id])
        expect(JSON.stringify(yield* auditLog(admin))).not.toContain(plain)
      })))
})
