/**
 * How the admin CLI shows what the AdminService answers: as JSON (`--json`, the admin API's
 * shapes where it has one: `AdminApi.Wire`) or as lines of text for people.
 */
import type { AdminService, AuditLog, Ledger } from "@mediagate/core"
import { AdminApi, Api, Credits, KeyScopes } from "@mediagate/core"
import type { ApiKeys } from "@mediagate/core"
import { Console } from "effect"

const Wire = AdminApi.Wire

/** Prints `value` as JSON with `--json`, otherwise `text`. */
export const print = (asJson: boolean, value: unknown, text: string) => Console.log(asJson ? JSON.stringify(value, null, 2) : text)

export const keyNotice = "The key is shown only now: store it; only its hash is kept."

/** An account's key as JSON: the admin API's shape. */
export const keyView = (key: ApiKeys.KeyInfo, now: number) => Wire.keyWire(key, now)

/** A key in one line (its scope on the next, when it has one). */
export const keyLine = (key: ApiKeys.KeyInfo, now: number) => {
  const view = keyView(key, now)
  const line = `  ${view.id}  ${view.hint}  ${view.state}${view.label === null ? "" : `  "${view.label}"`}${
    view.expires_at === null ? "" : `  expires ${view.expires_at}`
  }`
  return KeyScopes.isUnscoped(key.scope) ? line : `${line}\n    scope: ${KeyScopes.describe(key.scope)}`
}

/** An account as JSON: the admin API's shape. */
export const accountView = (account: AdminService.AccountOverview, now: number) => Wire.accountWire(account, now)

export const accountText = (account: AdminService.AccountOverview, now: number) =>
  [`${account.id}  ${account.name}  created ${new Date(account.createdAt).toISOString()}`, ...account.keys.map((key) => keyLine(key, now))].join("\n")

/** An admin key as JSON, and in one line. */
export const adminKeyView = Wire.adminKeyWire

export const adminKeyLine = (key: ReturnType<typeof adminKeyView>) =>
  `  ${key.id}  ${key.hint}  ${key.state}${key.label === null ? "" : `  "${key.label}"`}${key.expires_at === null ? "" : `  expires ${key.expires_at}`}`

/** What an account holds, in micro-USD. */
export const balanceView = (id: string, { balance, reserved }: Ledger.Balance) => ({
  account_id: id,
  balance_micro_usd: balance,
  reserved_micro_usd: reserved,
  available_micro_usd: balance - reserved
})

export const balanceText = (view: ReturnType<typeof balanceView>) =>
  `balance ${Credits.formatUsd(view.balance_micro_usd)}, reserved ${Credits.formatUsd(view.reserved_micro_usd)}, available ${
    Credits.formatUsd(view.available_micro_usd)
  }`

export const entryView = Api.ledgerEntryWire

/** Rows as aligned columns; the columns in `right` to the right, the last one unpadded. */
export const columns = (rows: ReadonlyArray<ReadonlyArray<string>>, right: ReadonlyArray<number> = []) => {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  return rows.map((row) =>
    row.map((cell, column) =>
      column === row.length - 1 ? cell : right.includes(column) ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!)
    ).join("  ").trimEnd()
  ).join("\n")
}

/** Ledger entries as aligned columns under a header. */
export const entriesText = (entries: ReadonlyArray<ReturnType<typeof entryView>>) =>
  columns([
    ["time", "kind", "amount", "held", "task", "note"],
    ...entries.map((entry) => [
      entry.created_at,
      entry.kind,
      Credits.formatUsd(entry.amount_micro_usd),
      Credits.formatUsd(entry.held_micro_usd),
      entry.task_id ?? "-",
      entry.note ?? ""
    ])
  ], [2, 3])

/** An audit entry as JSON: the admin API's shape. */
export const auditView = Wire.auditEntryWire

/** Audit entries as columns, the state before and after as compact JSON. */
export const auditText = (entries: ReadonlyArray<AuditLog.AuditEntry>) =>
  columns([
    ["time", "actor", "action", "target", "before -> after"],
    ...entries.map((entry) => [
      new Date(entry.at).toISOString(),
      entry.actor,
      entry.action,
      entry.target ?? "-",
      `${JSON.stringify(entry.before ?? null)} -> ${JSON.stringify(entry.after ?? null)}`
    ])
  ])
