/**
 * The admin CLI's accounts, keys (scoped keys and admin keys among them) and callback signing
 * secrets: each command reads its arguments and calls the AdminService, which holds the rules
 * and writes the audit log.
 */
import { Args, Command, Options } from "@effect/cli"
import { AdminApi, ApiKeys, Ids, KeyScopes } from "@mediagate/core"
import { Clock, Duration, Effect, Option, Redacted } from "effect"
import { durationOf, json, parsedBy } from "./AdminCommandLine.js"
import { actor, AdminError, onDatabase, service } from "./AdminEnvironment.js"
import { accountText, accountView, adminKeyLine, adminKeyView, keyLine, keyNotice, keyView, print } from "./AdminViews.js"

const accountCreate = Command.make(
  "create",
  { name: Options.text("name").pipe(Options.withDescription("The account's name")), json },
  ({ json: asJson, name }) =>
    onDatabase(Effect.gen(function*() {
      const made = yield* (yield* service).createAccount(actor, { name })
      const now = yield* Clock.currentTimeMillis
      const key = Redacted.value(made.key)
      const secret = Redacted.value(made.webhookSecret)
      yield* print(asJson, { account: accountView(made.account, now), key, webhook_secret: secret }, [
        accountText(made.account, now),
        `API key: ${key}`,
        `Callback signing secret: ${secret}`,
        keyNotice
      ].join("\n"))
    }))
).pipe(Command.withDescription("Create an account with its first key"))

const accountId = Args.text({ name: "account-id" }).pipe(Args.withDescription("The account's id (acct_...)"))

const accountShow = Command.make("show", { accountId, json }, ({ accountId: id, json: asJson }) =>
  onDatabase(Effect.gen(function*() {
    const account = yield* (yield* service).getAccount(Ids.AccountId.make(id))
    const now = yield* Clock.currentTimeMillis
    yield* print(asJson, accountView(account, now), accountText(account, now))
  }))).pipe(Command.withDescription("Show an account and its keys (hints, states and scopes, never the keys)"))

const accountList = Command.make("list", { json }, ({ json: asJson }) =>
  onDatabase(Effect.gen(function*() {
    const accounts = yield* (yield* service).listAccounts
    const now = yield* Clock.currentTimeMillis
    yield* print(
      asJson,
      accounts.map((account) => accountView(account, now)),
      accounts.length === 0 ? "no accounts" : accounts.map((account) => accountText(account, now)).join("\n")
    )
  }))).pipe(Command.withDescription("List every account, oldest first"))

const expiresIn = Options.text("expires-in").pipe(
  Options.withDescription("The key expires this long from now: 90m, 12h, 30d"),
  Options.mapEffect(durationOf("expires-in")),
  Options.optional
)

const scopeOptions = {
  models: Options.text("models").pipe(
    Options.withDescription("The models the key may use, comma-separated glob patterns: 'alpha-*,clip3' (default: every model)"),
    Options.mapEffect(parsedBy(KeyScopes.parseModels)),
    Options.optional
  ),
  monthlyCap: Options.text("monthly-cap").pipe(
    Options.withDescription("The most the key may spend in a UTC calendar month, in US dollars: 50, 12.50 (default: no cap)"),
    Options.mapEffect(parsedBy(KeyScopes.parseMonthlyCap)),
    Options.optional
  ),
  rateLimit: Options.text("rate-limit").pipe(
    Options.withDescription("The key's own rate limit: 10/s, 600/min, 36000/h (default: the server's)"),
    Options.mapEffect(parsedBy(KeyScopes.parseRateLimit)),
    Options.optional
  )
}

const keyCreate = Command.make(
  "create",
  {
    accountId: accountId.pipe(Args.optional),
    admin: Options.boolean("admin").pipe(Options.withDescription("An admin key (for the admin API and the console) instead of an account's key")),
    label: Options.text("label").pipe(Options.withDescription("What the key is for"), Options.optional),
    expiresIn,
    ...scopeOptions,
    json
  },
  ({ accountId: id, admin, expiresIn: expiry, json: asJson, label, models, monthlyCap, rateLimit }) =>
    Effect.gen(function*() {
      const scoped = Option.isSome(models) || Option.isSome(monthlyCap) || Option.isSome(rateLimit)
      if (admin && Option.isSome(id)) return yield* new AdminError({ message: "key create --admin takes no account: an admin key is nobody's" })
      if (admin && scoped) return yield* new AdminError({ message: "--models, --monthly-cap and --rate-limit are for account keys, not admin keys" })
      if (!admin && Option.isNone(id)) {
        return yield* new AdminError({ message: "key create needs an <account-id>, or --admin for an admin key" })
      }
      return yield* onDatabase(Effect.gen(function*() {
        const admins = yield* service
        const now = yield* Clock.currentTimeMillis
        const terms = {
          label: Option.getOrNull(label),
          expiresAt: Option.match(expiry, { onNone: () => null, onSome: (after) => now + Duration.toMillis(after) })
        }
        if (admin) {
          const made = yield* admins.createAdminKey(actor, terms)
          const view = adminKeyView(made.info, now)
          const key = Redacted.value(made.key)
          return yield* print(asJson, { key, ...view }, [adminKeyLine(view), `Admin key: ${key}`, keyNotice].join("\n"))
        }
        const account = Ids.AccountId.make(Option.getOrThrow(id))
        const scope: ApiKeys.KeyScope = {
          models: Option.getOrNull(models),
          monthlyCapMicroUsd: Option.getOrNull(monthlyCap),
          rateLimit: Option.getOrNull(rateLimit)
        }
        const made = yield* admins.createKey(actor, account, { ...terms, scope })
        const key = Redacted.value(made.key)
        yield* print(asJson, { key, ...keyView(made.info, now) }, [account, keyLine(made.info, now), `API key: ${key}`, keyNotice].join("\n"))
      }))
    })
).pipe(Command.withDescription("Create another key for an account, with a scope if given; or, with --admin, an admin key"))

/** Admin keys' ids start so; an account key's with key_. */
const isAdminKeyId = (id: string) => id.startsWith("adk_")

const revokeAdminKey = (id: string, asJson: boolean) =>
  Effect.gen(function*() {
    const revoked = yield* (yield* service).revokeAdminKey(actor, id)
    const view = adminKeyView(revoked, yield* Clock.currentTimeMillis)
    yield* print(asJson, view, adminKeyLine(view))
  })

const keyRevoke = Command.make(
  "revoke",
  { keyId: Args.text({ name: "key-id" }).pipe(Args.withDescription("The key's id: an account's (key_...) or an admin key's (adk_...)")), json },
  ({ json: asJson, keyId }) =>
    onDatabase(Effect.gen(function*() {
      if (isAdminKeyId(keyId)) return yield* revokeAdminKey(keyId, asJson)
      const revoked = yield* (yield* service).revokeKey(actor, keyId)
      const now = yield* Clock.currentTimeMillis
      yield* print(asJson, keyView(revoked, now), `${revoked.accountId}\n${keyLine(revoked, now)}`)
    }))
).pipe(Command.withDescription("Revoke a key, an account's or an admin key: it stops working at once (within 5 s on a running server)"))

const adminKeyList = Command.make("list", { json }, ({ json: asJson }) =>
  onDatabase(Effect.gen(function*() {
    const keys = yield* (yield* service).listAdminKeys
    const now = yield* Clock.currentTimeMillis
    const views = keys.map((key) => adminKeyView(key, now))
    yield* print(asJson, views, views.length === 0 ? "no admin keys" : views.map(adminKeyLine).join("\n"))
  }))).pipe(Command.withDescription("List the admin keys (hints and states, never the keys), oldest first"))

const adminKeyRevoke = Command.make(
  "revoke",
  { id: Args.text({ name: "admin-key-id" }).pipe(Args.withDescription("The admin key's id (adk_...)")), json },
  ({ id, json: asJson }) => onDatabase(revokeAdminKey(id, asJson))
).pipe(Command.withDescription("Revoke an admin key: it stops opening the admin API and the console at once"))

const secretsText = (view: ReturnType<typeof AdminApi.Wire.secretsWire>) =>
  [
    `Callback signing secret: ${view.current ?? "none"}`,
    ...(view.previous === null ? [] : [`Previous secret, also signing until ${view.previous_signs_until}: ${view.previous}`])
  ].join("\n")

const secretShow = Command.make("show", { accountId, json }, ({ accountId: id, json: asJson }) =>
  onDatabase(Effect.gen(function*() {
    const secrets = yield* (yield* service).secrets(Ids.AccountId.make(id))
    const view = AdminApi.Wire.secretsWire(id, secrets, yield* Clock.currentTimeMillis)
    yield* print(asJson, view, secretsText(view))
  }))).pipe(Command.withDescription("Show the account's callback signing secret (and the previous one while it still signs)"))

const grace = Options.text("grace").pipe(
  Options.withDescription("How long the old secret keeps signing beside the new one: 90m, 12h, 7d (default 24h)"),
  Options.withDefault("24h"),
  Options.mapEffect(durationOf("grace"))
)

const secretRotate = Command.make("rotate", { accountId, grace, json }, ({ accountId: id, grace: after, json: asJson }) =>
  onDatabase(Effect.gen(function*() {
    const secrets = yield* (yield* service).rotateSecret(actor, Ids.AccountId.make(id), Duration.toMillis(after))
    const view = AdminApi.Wire.secretsWire(id, secrets, yield* Clock.currentTimeMillis)
    yield* print(asJson, view, `${secretsText(view)}\nCallbacks carry a signature for each secret until then (Standard Webhooks).`)
  }))).pipe(Command.withDescription("Replace the account's callback signing secret; the old one keeps signing for the grace period"))

export const accountCommands = ["Accounts", [accountCreate, accountShow, accountList]] as const
export const keyCommands = ["API keys and admin keys", [keyCreate, keyRevoke]] as const
export const adminKeyCommands = ["Admin keys (for the admin API and the console)", [adminKeyList, adminKeyRevoke]] as const
export const secretCommands = ["Callback signing secrets", [secretShow, secretRotate]] as const
