/**
 * The accounts view: every account with its balance and reserved credits, and one account's
 * keys with their scopes (revoke), credits (add, the latest ledger entries) and signing secret
 * (rotate).
 */
import { api, ok } from "./adminFetch.js"
import { $, button, el, fill, say, table, usd, when } from "./elements.js"
import { paths } from "./wire.js"
import type { AccountData, AccountList, AddCreditsData, CreditsData, KeyData, KeyView, SecretsData } from "./wire.js"

let current = ""

/** Loads the list of accounts (and the open account again, if one is). */
export function showAccounts(): void {
  say("accounts-note", "Loading...")
  api<AccountList>("GET", paths.accounts).then(function(answer) {
    if (!ok(answer)) return say("accounts-note", answer.envelope.msg, "error")
    const accounts = answer.envelope.data.accounts
    say("accounts-note", accounts.length + (accounts.length === 1 ? " account" : " accounts"))
    fill("accounts-list", [table("Accounts", ["Account", "Name", "Balance", "Reserved", "Keys", ""], accounts.map(function(account) {
      const active = account.keys.filter(function(key) {
        return key.state === "active"
      }).length
      return [
        el("code", { text: account.id }),
        account.name,
        el("span", { "data-balance": account.id, text: usd(account.balance_micro_usd) }),
        usd(account.reserved_micro_usd),
        active + " active of " + account.keys.length,
        button("Open", function() {
          openAccount(account.id)
        }, { "aria-label": "Open account " + account.name })
      ]
    }), "No account yet: create one with npm run admin -- account create.")])
    if (current !== "") openAccount(current)
  })
}

/** A rate as it was most likely written: 10/s, 30/min, 5/h. */
function rateText(perSecond: number): string {
  const whole = function(value: number) {
    return Math.abs(value - Math.round(value)) < 1e-9
  }
  if (perSecond >= 1 || whole(perSecond)) return Math.round(perSecond * 1000) / 1000 + "/s"
  if (whole(perSecond * 60)) return Math.round(perSecond * 60) + "/min"
  return Math.round(perSecond * 3600 * 100) / 100 + "/h"
}

function scopeText(key: KeyView): string {
  const scope = key.scope
  const parts: Array<string> = []
  if (scope.models !== null) parts.push("models " + scope.models.join(", "))
  if (scope.monthly_cap_micro_usd !== null) parts.push("cap " + usd(scope.monthly_cap_micro_usd) + " a month")
  if (scope.rate_limit !== null) parts.push("rate " + rateText(scope.rate_limit.per_second) + ", bursts of " + scope.rate_limit.burst)
  return parts.length === 0 ? "unscoped" : parts.join("; ")
}

function keysTable(keys: ReadonlyArray<KeyView>): HTMLElement {
  return table("Keys", ["Key", "Label", "Scope", "Created", "Expires", "State", ""], keys.map(function(key) {
    return [
      el("code", { text: key.id + " (" + key.hint + ")" }),
      key.label || "",
      scopeText(key),
      when(key.created_at),
      when(key.expires_at) || "never",
      el("span", { "data-key-state": key.id, text: key.state }),
      key.state === "revoked" ? null : button("Revoke", function() {
        revoke(key)
      }, { class: "danger", "data-revoke": key.id, "aria-label": "Revoke key " + key.id })
    ]
  }), "No key.")
}

function showBalance(balance: { readonly balance_micro_usd: number; readonly reserved_micro_usd: number; readonly available_micro_usd: number }): void {
  $("account-balance").textContent = usd(balance.balance_micro_usd)
  $("account-reserved").textContent = usd(balance.reserved_micro_usd)
  $("account-available").textContent = usd(balance.available_micro_usd)
}

/** Opens one account: its figures, keys, secret and latest ledger entries. */
function openAccount(id: string): void {
  if ($("account-id").textContent !== id) {
    // Another account: nothing of the one before stays on show while this one loads.
    ;["account-balance", "account-reserved", "account-available"].forEach(function(figure) {
      $(figure).textContent = "\u2026"
    })
    fill("account-keys", [])
    fill("account-secrets", [])
    fill("account-ledger", [])
    say("account-note", "")
  }
  current = id
  $("account").hidden = false
  $("account-id").textContent = id
  api<AccountData>("GET", paths.account(id)).then(function(answer) {
    if (!ok(answer)) return say("account-note", answer.envelope.msg, "error")
    showBalance(answer.envelope.data)
    fill("account-keys", [keysTable(answer.envelope.data.keys)])
  })
  loadLedger(id)
  api<SecretsData>("GET", paths.secrets(id)).then(function(answer) {
    if (!ok(answer)) return fill("account-secrets", [el("p", { class: "note error", text: answer.envelope.msg })])
    showSecrets(answer.envelope.data)
  })
}

function loadLedger(id: string): void {
  api<CreditsData>("GET", paths.credits(id) + "?limit=20").then(function(answer) {
    if (!ok(answer)) return fill("account-ledger", [el("p", { class: "note error", text: answer.envelope.msg })])
    fill("account-ledger", [table("Latest ledger entries", ["When", "Kind", "Amount", "Held", "Task", "Note"], answer.envelope.data.entries.map(function(entry) {
      return [when(entry.created_at), entry.kind, usd(entry.amount_micro_usd), usd(entry.held_micro_usd), entry.task_id ? el("code", { text: entry.task_id }) : "", entry.note || ""]
    }), "No entry.")])
  })
}

function showSecrets(secrets: SecretsData): void {
  fill("account-secrets", [el("p", {}, [
    "Current: ",
    el("code", { text: secrets.current || "none" }),
    secrets.previous ? "; the previous one (" + secrets.previous + ") signs too until " + when(secrets.previous_signs_until) : ""
  ])])
}

// Credits: USD as typed, sent as the API takes them (a decimal string).
$("credits-form").addEventListener("submit", function(event) {
  event.preventDefault()
  const amount = $<HTMLInputElement>("credits-amount").value.trim()
  const note = $<HTMLInputElement>("credits-note").value.trim()
  const id = current
  $<HTMLButtonElement>("credits-add").disabled = true
  api<AddCreditsData>("POST", paths.credits(id), { amount_usd: amount, note: note }).then(function(answer) {
    $<HTMLButtonElement>("credits-add").disabled = false
    if (!ok(answer)) return say("account-note", answer.envelope.msg, "error")
    showBalance(answer.envelope.data)
    say("account-note", answer.envelope.data.already_credited ? "Credited already: nothing added." : "Added " + usd(answer.envelope.data.entry.amount_micro_usd) + ".", "ok")
    $<HTMLInputElement>("credits-amount").value = ""
    $<HTMLInputElement>("credits-note").value = ""
    loadLedger(id)
    showAccounts()
  })
})

function revoke(key: KeyView): void {
  if (!confirm("Revoke key " + key.id + " (" + key.hint + ")? Requests with it are refused at once.")) return
  api<KeyData>("POST", paths.revokeKey(key.id)).then(function(answer) {
    if (!ok(answer)) return say("account-note", answer.envelope.msg, "error")
    say("account-note", "Key " + key.id + " revoked.", "ok")
    openAccount(current)
  })
}

$("secret-rotate").addEventListener("click", function() {
  const hours = Number($<HTMLInputElement>("secret-grace").value || "0")
  if (!confirm("Rotate the signing secret of " + current + "? The old one keeps signing for " + hours + " h.")) return
  api<SecretsData>("POST", paths.rotateSecret(current), { grace_seconds: Math.round(hours * 3600) }).then(function(answer) {
    if (!ok(answer)) return say("account-note", answer.envelope.msg, "error")
    showSecrets(answer.envelope.data)
    say("account-note", "Secret rotated.", "ok")
  })
})
