/**
 * `npm run admin -- <command>`: accounts, keys and signing secrets in the standalone server's database
 * (MEDIAGATE_DATABASE_URL, the server's default `sqlite:./data/mediagate.db` when unset),
 * built with @effect/cli. Safe beside a running server: SQLite and PostgreSQL order the
 * writes, and a server's cache of keys holds an account for at most 5 s, so a revoked key
 * stops working within 5 s there.
 *
 *   account create --name <name>         a new account and its first key (shown once)
 *   account show <account-id>            the account and its keys (hints, states)
 *   account list                         every account
 *   key create <account-id> [--label <text>] [--expires-in <30d|12h|90m>]
 *   key revoke <key-id>
 *   secret show <account-id>            the callback signing secret (and the previous one while it signs)
 *   secret rotate <account-id> [--grace <24h>]
 *   credits add <account-id> <amount> [--note <text>] [--id <entry-id>]   US dollars; once per --id (a replay says so)
 *   credits show <account-id> [--limit <20>]   balance, reserved, available, latest entries
 *
 * `--json` on each prints one JSON document for scripts. Failures print one line to
 * stderr and exit 1.
 */
import { Args, Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import type { Accounts as AccountsNs } from "@mediagate/core"
import { Accounts, Api, ApiKeys, Credits, Ids, Ledger } from "@mediagate/core"
import { Webhooks } from "@mediagate/scheduler"
import { Database, SqlAccounts, SqlLedger } from "@mediagate/store-sql"
import { Clock, Console, Data, Duration, Effect, Either, Layer, Option, Redacted } from "effect"
import { commandMistake, plainText } from "./AdminCommandLine.js"
import { defaultDatabaseUrl, parseDuration } from "./Config.js"

/** A failure the operator can act on: printed as one line, exit 1. */
class AdminError extends Data.TaggedError("AdminError")<{ readonly message: string }> {}

const json = Options.boolean("json").pipe(Options.withDescription("Print one JSON document instead of text"))

const iso = (millis: number | null) => (millis === null ? null : new Date(millis).toISOString())

const keyView = (key: ApiKeys.KeyInfo, now: number) => ({
  id: key.id,
  hint: key.hint,
  label: key.label,
  state: ApiKeys.stateOf(key, now),
  created_at: iso(key.createdAt),
  expires_at: iso(key.expiresAt),
  revoked_at: iso(key.revokedAt)
})

const accountView = (account: AccountsNs.AccountInfo, now: number) => ({
  id: account.id,
  name: account.name,
  created_at: iso(account.createdAt),
  keys: account.keys.map((key) => keyView(key, now))
})

const keyLine = (key: ReturnType<typeof keyView>) =>
  `  ${key.id}  ${key.hint}  ${key.state}${key.label === null ? "" : `  "${key.label}"`}${key.expires_at === null ? "" : `  expires ${key.expires_at}`}`

const accountText = (account: ReturnType<typeof accountView>) =>
  [`${account.id}  ${account.name}  created ${account.created_at}`, ...account.keys.map(keyLine)].join("\n")

/** Runs a command's work on the database, opened only then (so `--help` needs none). */
const onDatabase = <A, E>(effect: Effect.Effect<A, E, Accounts.AccountAdmin | Ledger.Ledger | Ids.Ids>) =>
  Effect.provide(effect, database)

/** Prints `value` as JSON with `--json`, otherwise `text`. */
const print = (asJson: boolean, value: unknown, text: string) => Console.log(asJson ? JSON.stringify(value, null, 2) : text)

/** A new key's stored form, with the key itself to show once. */
const newKey = (label: string | null, now: number, expiresAt: number | null) =>
  Effect.gen(function*() {
    const key = Redacted.value(yield* ApiKeys.generate)
    const id = `key_${yield* (yield* Ids.Ids).token(8)}`
    const stored: AccountsNs.NewKey = { id, hash: SqlAccounts.hashKey(key), hint: ApiKeys.hint(key), label, createdAt: now, expiresAt }
    return { key, stored }
  })

const keyNotice = "The key is shown only now: store it; only its hash is kept."

const accountCreate = Command.make(
  "create",
  { name: Options.text("name").pipe(Options.withDescription("The account's name")), json },
  ({ json: asJson, name }) =>
    onDatabase(Effect.gen(function*() {
      const admin = yield* Accounts.AccountAdmin
      const ids = yield* Ids.Ids
      const now = yield* Clock.currentTimeMillis
      const id = Ids.AccountId.make(`acct_${yield* ids.token(12)}`)
      const secret = Webhooks.secretFromHex(yield* ids.token(24))
      const { key, stored } = yield* newKey("first key", now, null)
      yield* admin.createAccount({ id, name, webhookSecret: Redacted.make(secret), key: stored })
      const account = accountView(Option.getOrThrow(yield* admin.getAccount(id)), now)
      yield* print(asJson, { account, key, webhook_secret: secret }, [
        accountText(account),
        `API key: ${key}`,
        `Callback signing secret: ${secret}`,
        keyNotice
      ].join("\n"))
    }))
).pipe(Command.withDescription("Create an account with its first key"))

const accountId = Args.text({ name: "account-id" }).pipe(Args.withDescription("The account's id (acct_...)"))

/** The account, or a failure naming the id. */
const findAccount = (id: string) =>
  Effect.flatMap(Accounts.AccountAdmin, (admin) => admin.getAccount(Ids.AccountId.make(id))).pipe(
    Effect.flatMap(Option.match({
      onNone: () => Effect.fail(new AdminError({ message: `no account ${id}` })),
      onSome: Effect.succeed
    }))
  )

const accountShow = Command.make("show", { accountId, json }, ({ accountId: id, json: asJson }) =>
  onDatabase(Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const account = accountView(yield* findAccount(id), now)
    yield* print(asJson, account, accountText(account))
  }))).pipe(Command.withDescription("Show an account and its keys (hints and states, never the keys)"))

const accountList = Command.make("list", { json }, ({ json: asJson }) =>
  onDatabase(Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const accounts = (yield* (yield* Accounts.AccountAdmin).listAccounts).map((account) => accountView(account, now))
    yield* print(asJson, accounts, accounts.length === 0 ? "no accounts" : accounts.map(accountText).join("\n"))
  }))).pipe(Command.withDescription("List every account, oldest first"))

/** A `--<name>` length of time written as a number and a unit: 90m, 12h, 30d. */
const durationOf = (name: string) => (raw: string) => {
  const value = parseDuration(raw)
  return value === undefined
    ? Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${name} must be a number and a unit, such as 90m, 12h or 30d (got ${JSON.stringify(raw)})`)))
    : Effect.succeed(value)
}

const expiresIn = Options.text("expires-in").pipe(
  Options.withDescription("The key expires this long from now: 90m, 12h, 30d"),
  Options.mapEffect(durationOf("expires-in")),
  Options.optional
)

const keyCreate = Command.make(
  "create",
  { accountId, label: Options.text("label").pipe(Options.withDescription("What the key is for"), Options.optional), expiresIn, json },
  ({ accountId: id, expiresIn: expiry, json: asJson, label }) =>
    onDatabase(Effect.gen(function*() {
      yield* findAccount(id)
      const now = yield* Clock.currentTimeMillis
      const expiresAt = Option.match(expiry, { onNone: () => null, onSome: (after) => now + Duration.toMillis(after) })
      const { key, stored } = yield* newKey(Option.getOrNull(label), now, expiresAt)
      yield* (yield* Accounts.AccountAdmin).createKey(Ids.AccountId.make(id), stored)
      const view = keyView({ ...stored, accountId: id, revokedAt: null }, now)
      yield* print(asJson, { account_id: id, key, ...view }, [`${id}`, keyLine(view), `API key: ${key}`, keyNotice].join("\n"))
    }))
).pipe(Command.withDescription("Create another key for an account"))

const keyRevoke = Command.make(
  "revoke",
  { keyId: Args.text({ name: "key-id" }).pipe(Args.withDescription("The key's id (key_...)")), json },
  ({ json: asJson, keyId }) =>
    onDatabase(Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const revoked = yield* (yield* Accounts.AccountAdmin).revokeKey(keyId, now)
      if (Option.isNone(revoked)) return yield* new AdminError({ message: `no key ${keyId}` })
      const view = keyView(revoked.value, now)
      yield* print(asJson, { account_id: revoked.value.accountId, ...view }, `${revoked.value.accountId}\n${keyLine(view)}`)
    }))
).pipe(Command.withDescription("Revoke a key: it stops working at once (within 5 s on a running server)"))

/** The account's signing secrets, or a failure naming the id. */
const findSecrets = (id: string) =>
  Effect.flatMap(Accounts.AccountAdmin, (admin) => admin.secrets(Ids.AccountId.make(id))).pipe(
    Effect.flatMap(Option.match({
      onNone: () => Effect.fail(new AdminError({ message: `no account ${id}` })),
      onSome: Effect.succeed
    }))
  )

const secretsView = (secrets: AccountsNs.SecretsInfo, now: number) => {
  const signing = secrets.previous !== null && (secrets.previousUntil ?? 0) > now
  return {
    current: secrets.current === null ? null : Redacted.value(secrets.current),
    previous: signing ? Redacted.value(secrets.previous!) : null,
    previous_signs_until: signing ? iso(secrets.previousUntil) : null
  }
}

const secretsText = (view: ReturnType<typeof secretsView>) =>
  [
    `Callback signing secret: ${view.current ?? "none"}`,
    ...(view.previous === null ? [] : [`Previous secret, also signing until ${view.previous_signs_until}: ${view.previous}`])
  ].join("\n")

const secretShow = Command.make("show", { accountId, json }, ({ accountId: id, json: asJson }) =>
  onDatabase(Effect.gen(function*() {
    const view = secretsView(yield* findSecrets(id), yield* Clock.currentTimeMillis)
    yield* print(asJson, { account_id: id, ...view }, secretsText(view))
  }))).pipe(Command.withDescription("Show the account's callback signing secret (and the previous one while it still signs)"))

const grace = Options.text("grace").pipe(
  Options.withDescription("How long the old secret keeps signing beside the new one: 90m, 12h, 7d (default 24h)"),
  Options.withDefault("24h"),
  Options.mapEffect(durationOf("grace"))
)

const secretRotate = Command.make("rotate", { accountId, grace, json }, ({ accountId: id, grace: after, json: asJson }) =>
  onDatabase(Effect.gen(function*() {
    yield* findSecrets(id)
    const now = yield* Clock.currentTimeMillis
    const secret = Webhooks.secretFromHex(yield* (yield* Ids.Ids).token(24))
    yield* (yield* Accounts.AccountAdmin).rotateSecret(Ids.AccountId.make(id), Redacted.make(secret), now + Duration.toMillis(after))
    const view = secretsView(yield* findSecrets(id), now)
    yield* print(asJson, { account_id: id, ...view }, `${secretsText(view)}\nCallbacks carry a signature for each secret until then (Standard Webhooks).`)
  }))).pipe(Command.withDescription("Replace the account's callback signing secret; the old one keeps signing for the grace period"))

/** `<amount>` in dollars as micro-USD, or a failure naming the rule. */
const amountOf = (raw: string) =>
  Either.match(Credits.parseUsd(raw), {
    onLeft: (rule) => Effect.fail(new AdminError({ message: `<amount> ${rule}` })),
    onRight: Effect.succeed
  })

/** What an account holds, in micro-USD. */
const balanceView = (id: string, { balance, reserved }: Ledger.Balance) => ({
  account_id: id,
  balance_micro_usd: balance,
  reserved_micro_usd: reserved,
  available_micro_usd: balance - reserved
})

const balanceText = (view: ReturnType<typeof balanceView>) =>
  `balance ${Credits.formatUsd(view.balance_micro_usd)}, reserved ${Credits.formatUsd(view.reserved_micro_usd)}, available ${
    Credits.formatUsd(view.available_micro_usd)
  }`

const creditsAdd = Command.make(
  "add",
  {
    accountId,
    amount: Args.text({ name: "amount" }).pipe(Args.withDescription("US dollars to add: 10, 0.25, $5 (at most six decimals)")),
    note: Options.text("note").pipe(Options.withDescription("Why, kept with the entry (default: added by admin)"), Options.withDefault("added by admin")),
    entryId: Options.text("id").pipe(
      Options.withDescription("The entry's id, for a retry-safe top-up: the same id credits once however often it is run"),
      Options.optional
    ),
    json
  },
  ({ accountId: id, amount: raw, entryId, json: asJson, note }) =>
    onDatabase(Effect.gen(function*() {
      const amount = yield* amountOf(raw)
      yield* findAccount(id)
      const ledger = yield* Ledger.Ledger
      const now = yield* Clock.currentTimeMillis
      const { entry, written } = yield* ledger.credit({
        id: Option.isSome(entryId) ? entryId.value : yield* Credits.entryId(yield* Ids.Ids),
        accountId: Ids.AccountId.make(id),
        amount,
        at: now,
        note
      })
      // The id was taken: by this same credit (a replay, fine), or by another entry (a mistake).
      if (!written && (entry.kind !== "credit" || entry.accountId !== id || entry.amount !== amount)) {
        const of = Credits.formatUsd(entry.kind === "credit" ? entry.amount : Math.abs(entry.held))
        return yield* new AdminError({ message: `entry ${entry.id} is already a ${entry.kind} of ${of} for ${entry.accountId}: nothing credited` })
      }
      const view = balanceView(id, yield* ledger.balance(Ids.AccountId.make(id)))
      yield* print(
        asJson,
        {
          account_id: id,
          entry_id: entry.id,
          amount_micro_usd: amount,
          already_credited: !written,
          balance_micro_usd: view.balance_micro_usd,
          reserved_micro_usd: view.reserved_micro_usd,
          available_micro_usd: view.available_micro_usd
        },
        written
          ? `credited ${Credits.formatUsd(amount)} to ${id}; ${balanceText(view)}`
          : `already credited ${Credits.formatUsd(amount)} to ${id} (${entry.id}): nothing changed; ${balanceText(view)}`
      )
    }))
).pipe(Command.withDescription("Add US dollars to an account's credits (once per --id)"))

const limit = Options.integer("limit").pipe(
  Options.withDescription("How many of the latest entries to show, 1 to 1000"),
  Options.withDefault(20),
  Options.mapEffect((value) =>
    value >= 1 && value <= 1000
      ? Effect.succeed(value)
      : Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--limit must be a whole number from 1 to 1000 (got ${value})`)))
  )
)

const entryView = Api.ledgerEntryWire

/** The entries as aligned columns under a header. */
const entriesText = (entries: ReadonlyArray<ReturnType<typeof entryView>>) => {
  const rows = [
    ["time", "kind", "amount", "held", "task", "note"],
    ...entries.map((entry) => [
      entry.created_at,
      entry.kind,
      Credits.formatUsd(entry.amount_micro_usd),
      Credits.formatUsd(entry.held_micro_usd),
      entry.task_id ?? "-",
      entry.note ?? ""
    ])
  ]
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  // Amounts to the right, the rest to the left; the last column unpadded.
  return rows.map((row) =>
    row.map((cell, column) =>
      column === row.length - 1 ? cell : column === 2 || column === 3 ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!)
    ).join("  ").trimEnd()
  ).join("\n")
}

const creditsShow = Command.make("show", { accountId, limit, json }, ({ accountId: id, json: asJson, limit: count }) =>
  onDatabase(Effect.gen(function*() {
    yield* findAccount(id)
    const ledger = yield* Ledger.Ledger
    const [balance, entries] = yield* Effect.all([ledger.balance(Ids.AccountId.make(id)), ledger.entries(Ids.AccountId.make(id), count)])
    const view = { ...balanceView(id, balance), entries: entries.map(entryView) }
    yield* print(asJson, view, [`${id}  ${balanceText(view)}`, view.entries.length === 0 ? "no entries" : entriesText(view.entries)].join("\n"))
  }))).pipe(Command.withDescription("Show an account's balance, what is reserved for running tasks, what is available, and the latest entries, newest first"))

/** The groups of commands, each with its description and its commands. */
const groups = {
  account: ["Accounts", [accountCreate, accountShow, accountList]],
  key: ["API keys", [keyCreate, keyRevoke]],
  secret: ["Callback signing secrets", [secretShow, secretRotate]],
  credits: ["Credits (US dollars)", [creditsAdd, creditsShow]]
} as const

const command = Command.make("admin").pipe(
  Command.withDescription("Accounts, keys and credits of a mediagate database (MEDIAGATE_DATABASE_URL)"),
  Command.withSubcommands([
    Command.make("account").pipe(Command.withDescription(groups.account[0]), Command.withSubcommands(groups.account[1])),
    Command.make("key").pipe(Command.withDescription(groups.key[0]), Command.withSubcommands(groups.key[1])),
    Command.make("secret").pipe(Command.withDescription(groups.secret[0]), Command.withSubcommands(groups.secret[1])),
    Command.make("credits").pipe(Command.withDescription(groups.credits[0]), Command.withSubcommands(groups.credits[1]))
  ])
)

const cli = Command.run(command, { name: "mediagate admin", version: "0.1.0" })

const databaseUrl = process.env["MEDIAGATE_DATABASE_URL"] ?? defaultDatabaseUrl

/** The accounts and the credits ledger of the database, on one client. */
const database = Layer.unwrapEffect(Effect.suspend(() =>
  databaseUrl === "memory"
    ? Effect.fail(new AdminError({ message: "MEDIAGATE_DATABASE_URL is memory: there is no database to administer" }))
    : Effect.succeed(Layer.mergeAll(SqlAccounts.layer, SqlLedger.layer).pipe(Layer.provide(Database.layerFromUrl(databaseUrl))))
))

const mistake = commandMistake(groups, process.argv.slice(2))

;(mistake !== undefined ? Effect.fail(new AdminError({ message: mistake })) : plainText(cli(process.argv))).pipe(
  Effect.provide(Layer.mergeAll(NodeContext.layer, Ids.layer)),
  Effect.catchAll((error) =>
    ValidationError.isValidationError(error)
      // The CLI printed what was wrong with the command line.
      ? Effect.sync(() => process.exit(1))
      : Console.error(`mediagate admin: ${(error as { message?: string }).message ?? String(error)}`).pipe(
        Effect.zipRight(Effect.sync(() => process.exit(1)))
      )
  ),
  NodeRuntime.runMain({ disablePrettyLogger: true })
)
