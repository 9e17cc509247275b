/**
 * The accounts contract (keys and the admin operations), one suite run unchanged against the
 * memory accounts, SQLite and PostgreSQL (when MEDIAGATE_TEST_PG_URL is set; CI sets it):
 * right, wrong, malformed, revoked and expired keys; several keys per account; keys held
 * only as hashes.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Accounts, ApiKeys, Ids } from "@mediagate/core"
import { MemoryAccounts } from "@mediagate/store-memory"
import { Database, SqlAccounts } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason } from "@mediagate/store-sql/testing"
import { Effect, Layer, Option, Redacted, TestClock } from "effect"
import { createHash } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

let counter = 0
const uniquePrefix = () => `a${process.pid}_${++counter}_`
const sha256 = (key: string) => createHash("sha256").update(key, "utf8").digest("hex")

type Backend = {
  readonly name: string
  readonly shared: Layer.Layer<SqlClient.SqlClient, unknown> | undefined
  readonly accounts: (prefix: string) => Layer.Layer<Accounts.Accounts | Accounts.AccountAdmin, unknown, SqlClient.SqlClient>
}

const sqliteDir = mkdtempSync(join(tmpdir(), "mediagate-accounts-"))
afterAll(() => rmSync(sqliteDir, { recursive: true, force: true }))
const pgUrl = process.env["MEDIAGATE_TEST_PG_URL"]
pgSkipReason("accounts-contract")
const sqlAccounts = (tablePrefix: string) => SqlAccounts.layerWith({ tablePrefix })

const backends: ReadonlyArray<Backend> = [
  { name: "memory", shared: undefined, accounts: () => MemoryAccounts.layer([]) },
  { name: "sqlite", shared: Database.layerSqlite(join(sqliteDir, "accounts.db")), accounts: sqlAccounts },
  ...(pgUrl === undefined ? [] : [{
    name: "postgres",
    shared: Layer.unwrapScoped(Effect.map(freshPgDatabase(pgUrl, "accounts"), (target) => Database.layerPg(Redacted.make(target)))),
    accounts: sqlAccounts
  }])
]

/** A new key for an account: the key itself (for the test to present) and what is stored. */
const newKey = (id: string, options: { readonly expiresAt?: number; readonly createdAt?: number } = {}) =>
  Effect.map(ApiKeys.generate, (key) => {
    const value = Redacted.value(key)
    const stored: Accounts.NewKey = {
      id,
      hash: sha256(value),
      hint: ApiKeys.hint(value),
      label: null,
      createdAt: options.createdAt ?? 0,
      expiresAt: options.expiresAt ?? null
    }
    return { key, stored }
  })

for (const backend of backends) {
  const suite = (it: { readonly effect: (name: string, self: () => Effect.Effect<unknown, unknown, any>) => unknown }) => {
    const withAccounts = <A, E>(
      body: (accounts: Accounts.Accounts["Type"], admin: Accounts.AccountAdmin["Type"]) => Effect.Effect<A, E, SqlClient.SqlClient | Ids.Ids>
    ) =>
      Effect.flatMap(Effect.all([Accounts.Accounts, Accounts.AccountAdmin]), ([accounts, admin]) => body(accounts, admin)).pipe(
        Effect.provide(Layer.fresh(backend.accounts(uniquePrefix()))),
        Effect.provide(Ids.layer)
      )

    const create = (admin: Accounts.AccountAdmin["Type"], id: string, name: string, createdAt = 0) =>
      Effect.gen(function*() {
        const first = yield* newKey(`key_${id}_1`, { createdAt })
        yield* admin.createAccount({ id: Ids.AccountId.make(id), name, webhookSecret: Redacted.make("whsec_dGVzdA=="), key: first.stored })
        return first.key
      })

    it.effect("the right key finds its account; a wrong, empty or mistyped one finds nothing", () =>
      withAccounts((accounts, admin) =>
        Effect.gen(function*() {
          const key = yield* create(admin, "acct_one", "one")
          expect(yield* accounts.authenticate(key)).toEqual(Option.some({ id: "acct_one", name: "one", keyId: "key_acct_one_1", scope: ApiKeys.unscoped }))
          const value = Redacted.value(key)
          const mistyped = value.slice(0, 10) + (value[10] === "x" ? "y" : "x") + value.slice(11)
          expect(ApiKeys.classify(mistyped)).toBe("malformed")
          for (const wrong of [mistyped, "", "mg_nope", `${value}x`, value.toUpperCase()]) {
            expect(yield* accounts.authenticate(Redacted.make(wrong))).toEqual(Option.none())
          }
        })
      ))

    it.effect("an account has several keys; a revoked key stops working at once, the others go on", () =>
      withAccounts((accounts, admin) =>
        Effect.gen(function*() {
          const first = yield* create(admin, "acct_two", "two")
          const second = yield* newKey("key_two_2", { createdAt: 1 })
          expect(yield* admin.createKey(Ids.AccountId.make("acct_two"), second.stored)).toBe(true)
          expect(yield* admin.createKey(Ids.AccountId.make("acct_nobody"), (yield* newKey("key_x")).stored)).toBe(false)
          expect(Option.isSome(yield* accounts.authenticate(second.key))).toBe(true)
          const revoked = yield* admin.revokeKey("key_acct_two_1", 50)
          expect(Option.map(revoked, (key) => key.revokedAt)).toEqual(Option.some(50))
          // Revoking again keeps the first time.
          expect(Option.map(yield* admin.revokeKey("key_acct_two_1", 80), (key) => key.revokedAt)).toEqual(Option.some(50))
          expect(yield* admin.revokeKey("key_unknown", 80)).toEqual(Option.none())
          expect(yield* accounts.authenticate(first)).toEqual(Option.none())
          expect(yield* accounts.authenticate(second.key)).toEqual(Option.some({ id: "acct_two", name: "two", keyId: "key_two_2", scope: ApiKeys.unscoped }))
        })
      ))

    it.effect("a key keeps its scope: authenticate answers it with the key's id; admin views, revoke and the first key show it", () =>
      withAccounts((accounts, admin) =>
        Effect.gen(function*() {
          const scope: ApiKeys.KeyScope = { models: ["alpha-*", "clip3"], monthlyCapMicroUsd: 50_000_000, rateLimit: { perSecond: 1.5, burst: 2 } }
          const only: ApiKeys.KeyScope = { ...ApiKeys.unscoped, monthlyCapMicroUsd: 7 }
          const first = yield* newKey("key_seven_1")
          yield* admin.createAccount({
            id: Ids.AccountId.make("acct_seven"),
            name: "seven",
            webhookSecret: Redacted.make("whsec_dGVzdA=="),
            key: { ...first.stored, scope: only }
          })
          const scoped = yield* newKey("key_seven_2", { createdAt: 1 })
          yield* admin.createKey(Ids.AccountId.make("acct_seven"), { ...scoped.stored, scope })
          const plain = yield* newKey("key_seven_3", { createdAt: 2 })
          yield* admin.createKey(Ids.AccountId.make("acct_seven"), plain.stored)
          expect(yield* accounts.authenticate(scoped.key)).toEqual(Option.some({ id: "acct_seven", name: "seven", keyId: "key_seven_2", scope }))
          expect(yield* accounts.authenticate(first.key)).toEqual(Option.some({ id: "acct_seven", name: "seven", keyId: "key_seven_1", scope: only }))
          expect(Option.map(yield* accounts.authenticate(plain.key), (account) => account.scope)).toEqual(Option.some(ApiKeys.unscoped))
          const shown = Option.getOrThrow(yield* admin.getAccount(Ids.AccountId.make("acct_seven")))
          expect(shown.keys.map((key) => key.scope)).toEqual([only, scope, ApiKeys.unscoped])
          expect((yield* admin.listAccounts).flatMap((account) => account.keys.map((key) => key.scope))).toEqual([only, scope, ApiKeys.unscoped])
          expect(Option.map(yield* admin.revokeKey("key_seven_2", 5), (key) => key.scope)).toEqual(Option.some(scope))
        })
      ))

    it.effect("a key with an expiry works until it, not at it", () =>
      withAccounts((accounts, admin) =>
        Effect.gen(function*() {
          yield* create(admin, "acct_three", "three")
          const expiring = yield* newKey("key_three_2", { expiresAt: 10_000 })
          yield* admin.createKey(Ids.AccountId.make("acct_three"), expiring.stored)
          yield* TestClock.setTime(9_999)
          expect(Option.isSome(yield* accounts.authenticate(expiring.key))).toBe(true)
          yield* TestClock.setTime(10_000)
          expect(yield* accounts.authenticate(expiring.key)).toEqual(Option.none())
        })
      ))

    it.effect("a rotated secret signs at once; the previous one signs beside it until its grace ends", () =>
      withAccounts((accounts, admin) =>
        Effect.gen(function*() {
          yield* create(admin, "acct_six", "six")
          const id = Ids.AccountId.make("acct_six")
          const values = (secrets: ReadonlyArray<Redacted.Redacted<string>>) => secrets.map(Redacted.value)
          expect(values(yield* accounts.signingSecrets!(id))).toEqual(["whsec_dGVzdA=="])
          yield* TestClock.setTime(1_000)
          expect(yield* admin.rotateSecret(id, Redacted.make("whsec_bmV3"), 5_000)).toBe(true)
          expect(yield* admin.rotateSecret(Ids.AccountId.make("acct_none"), Redacted.make("whsec_bmV3"), 5_000)).toBe(false)
          expect(values(yield* accounts.signingSecrets!(id))).toEqual(["whsec_bmV3", "whsec_dGVzdA=="])
          expect(Option.map(yield* accounts.webhookSecret(id), Redacted.value)).toEqual(Option.some("whsec_bmV3"))
          const shown = Option.getOrThrow(yield* admin.secrets(id))
          expect([shown.current, shown.previous].map((secret) => secret === null ? null : Redacted.value(secret))).toEqual(["whsec_bmV3", "whsec_dGVzdA=="])
          expect(shown.previousUntil).toBe(5_000)
          yield* TestClock.setTime(5_000)
          expect(values(yield* accounts.signingSecrets!(id))).toEqual(["whsec_bmV3"])
          expect(values(yield* accounts.signingSecrets!(Ids.AccountId.make("acct_none")))).toEqual([])
        })
      ))

    it.effect("admin views list accounts and keys with hints and states, never keys or hashes", () =>
      withAccounts((accounts, admin) =>
        Effect.gen(function*() {
          const key = yield* create(admin, "acct_four", "four", 1)
          yield* create(admin, "acct_five", "five", 2)
          const four = Option.getOrThrow(yield* admin.getAccount(Ids.AccountId.make("acct_four")))
          expect(four).toMatchObject({ id: "acct_four", name: "four", keys: [{ id: "key_acct_four_1", hint: ApiKeys.hint(Redacted.value(key)), revokedAt: null, expiresAt: null }] })
          const shown = JSON.stringify(yield* admin.listAccounts)
          expect(shown).not.toContain(Redacted.value(key))
          expect(shown).not.toContain(sha256(Redacted.value(key)))
          // Oldest first.
          expect((yield* admin.listAccounts).map((account) => account.id)).toEqual(["acct_four", "acct_five"])
          expect(yield* admin.getAccount(Ids.AccountId.make("acct_none"))).toEqual(Option.none())
          expect(Option.isSome(yield* accounts.webhookSecret(Ids.AccountId.make("acct_four")))).toBe(true)
        })
      ))
  }

  if (backend.shared === undefined) {
    describe(`Accounts contract: ${backend.name}`, () => suite(it))
  } else {
    describe(`Accounts contract: ${backend.name}`, () => {
      it.layer(backend.shared as Layer.Layer<SqlClient.SqlClient>, { timeout: 60_000 })((it) => suite(it))
    })
  }
}
