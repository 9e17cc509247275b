/**
 * The admin CLI's credits and audit log: each command reads its arguments and calls the
 * AdminService, which holds the rules (a credit once per entry id) and writes the audit log.
 */
import { Args, Command, Options } from "@effect/cli"
import { Credits, Ids } from "@mediagate/core"
import { Effect, Either } from "effect"
import { json, limit } from "./AdminCommandLine.js"
import { actor, AdminError, onDatabase, service } from "./AdminEnvironment.js"
import { auditText, auditView, balanceText, balanceView, entriesText, entryView, print } from "./AdminViews.js"

const accountId = Args.text({ name: "account-id" }).pipe(Args.withDescription("The account's id (acct_...)"))

/** `<amount>` in dollars as micro-USD, or a failure naming the rule. */
const amountOf = (raw: string) =>
  Either.match(Credits.parseUsd(raw), {
    onLeft: (rule) => Effect.fail(new AdminError({ message: `<amount> ${rule}` })),
    onRight: Effect.succeed
  })

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
    Effect.gen(function*() {
      const amount = yield* amountOf(raw)
      return yield* onDatabase(Effect.gen(function*() {
        const { balance, entry, written } = yield* (yield* service).addCredits(actor, {
          accountId: Ids.AccountId.make(id),
          amountMicroUsd: amount,
          note,
          entryId: entryId._tag === "Some" ? entryId.value : undefined
        })
        const view = balanceView(id, balance)
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
    })
).pipe(Command.withDescription("Add US dollars to an account's credits (once per --id)"))

const creditsShow = Command.make("show", { accountId, limit: limit("entries"), json }, ({ accountId: id, json: asJson, limit: count }) =>
  onDatabase(Effect.gen(function*() {
    const { balance, entries } = yield* (yield* service).credits(Ids.AccountId.make(id), count)
    const view = { ...balanceView(id, balance), entries: entries.map(entryView) }
    yield* print(asJson, view, [`${id}  ${balanceText(view)}`, view.entries.length === 0 ? "no entries" : entriesText(view.entries)].join("\n"))
  }))).pipe(Command.withDescription("Show an account's balance, what is reserved for running tasks, what is available, and the latest entries, newest first"))

const auditList = Command.make(
  "list",
  {
    limit: limit("entries"),
    target: Options.text("target").pipe(Options.withDescription("Only what was done to this id (account, key, admin key, task)"), Options.optional),
    json
  },
  ({ json: asJson, limit: count, target }) =>
    onDatabase(Effect.gen(function*() {
      const page = yield* (yield* service).audit({ limit: count, target: target._tag === "Some" ? target.value : undefined })
      yield* print(asJson, page.entries.map(auditView), page.entries.length === 0 ? "no entries" : auditText(page.entries))
    }))
).pipe(Command.withDescription("Show the latest admin actions, newest first: who, when, what, and the state before and after"))

export const creditCommands = ["Credits (US dollars)", [creditsAdd, creditsShow]] as const
export const auditCommands = ["The audit log of admin actions", [auditList]] as const
