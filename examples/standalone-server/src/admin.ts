/**
 * `npm run admin -- <command>`: accounts, keys, signing secrets, credits, admin keys and the
 * audit log in the standalone server's database (MEDIAGATE_DATABASE_URL, the server's default
 * `sqlite:./data/mediagate.db` when unset), built with @effect/cli. Every command calls the
 * AdminService, the one the admin API and the console call, and every action is in the audit
 * log as `cli:<OS user name>`. Safe beside a running server: SQLite and PostgreSQL order the
 * writes, and a server's cache of keys holds an account for at most 5 s, so a revoked key
 * stops working within 5 s there.
 *
 *   account create --name <name>         a new account and its first key (shown once)
 *   account show <account-id>            the account and its keys (hints, states, scopes)
 *   account list                         every account
 *   key create <account-id> [--label <text>] [--expires-in <30d|12h|90m>]
 *              [--models 'alpha-*,clip3'] [--monthly-cap <50>] [--rate-limit <10/s>]
 *   key create --admin [--label <text>] [--expires-in <30d>]   an admin key (shown once)
 *   key revoke <key-id>                  an account's key (key_...) or an admin key (adk_...)
 *   admin-key list | revoke <adk_...>    the admin keys
 *   secret show <account-id>            the callback signing secret (and the previous one while it signs)
 *   secret rotate <account-id> [--grace <24h>]
 *   credits add <account-id> <amount> [--note <text>] [--id <entry-id>]   US dollars; once per --id (a replay says so)
 *   credits show <account-id> [--limit <20>]   balance, reserved, available, latest entries
 *   audit list [--limit <20>] [--target <id>]   the latest admin actions, with the state before and after
 *
 * `--json` on each prints one JSON document for scripts. Failures print one line to
 * stderr and exit 1.
 */
import { Command, ValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import { accountCommands, adminKeyCommands, keyCommands, secretCommands } from "./AccountCommands.js"
import { commandMistake, plainText } from "./AdminCommandLine.js"
import { AdminError } from "./AdminEnvironment.js"
import { auditCommands, creditCommands } from "./CreditCommands.js"

/** The groups of commands, each with its description and its commands. */
const groups = {
  account: accountCommands,
  key: keyCommands,
  "admin-key": adminKeyCommands,
  secret: secretCommands,
  credits: creditCommands,
  audit: auditCommands
} as const

const group = (name: keyof typeof groups) =>
  Command.make(name).pipe(Command.withDescription(groups[name][0]), Command.withSubcommands(groups[name][1]))

const command = Command.make("admin").pipe(
  Command.withDescription("Accounts, keys, credits, admin keys and the audit log of a mediagate database (MEDIAGATE_DATABASE_URL)"),
  Command.withSubcommands([group("account"), group("key"), group("admin-key"), group("secret"), group("credits"), group("audit")])
)

const cli = Command.run(command, { name: "mediagate admin", version: "0.1.0" })

const mistake = commandMistake(groups, process.argv.slice(2))

;(mistake !== undefined ? Effect.fail(new AdminError({ message: mistake })) : plainText(cli(process.argv))).pipe(
  Effect.provide(NodeContext.layer),
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
