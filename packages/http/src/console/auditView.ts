/** The audit log view: every admin action, newest first, with who, when, what and the state before and after. */
import { api, ok, query } from "./adminFetch.js"
import { $, el, fill, say, table, when } from "./elements.js"
import { paths } from "./wire.js"
import type { AuditData, AuditEntryView } from "./wire.js"

let cursor: string | null = null
let shown: Array<AuditEntryView> = []

function json(value: unknown): HTMLElement | string {
  return value === null || value === undefined ? "" : el("details", {}, [el("summary", { text: "show" }), el("pre", { text: JSON.stringify(value, null, 2) })])
}

function load(more: boolean): void {
  if (!more) {
    cursor = null
    shown = []
  }
  say("audit-note", "Loading...")
  const path = paths.audit + query({
    action: $<HTMLSelectElement>("audit-action").value,
    target: $<HTMLInputElement>("audit-target").value.trim(),
    cursor: more ? cursor : null
  })
  api<AuditData>("GET", path).then(function(answer) {
    if (!ok(answer)) return say("audit-note", answer.envelope.msg, "error")
    shown = shown.concat(answer.envelope.data.entries)
    cursor = answer.envelope.data.next_cursor
    $("audit-more").hidden = cursor === null
    say("audit-note", shown.length + (shown.length === 1 ? " entry" : " entries") + (cursor === null ? "" : " so far"))
    fill("audit-list", [table("Audit log", ["When", "Who", "Action", "Target", "Before", "After"], shown.map(function(entry) {
      return [when(entry.at), el("code", { text: entry.actor }), el("span", { "data-action": entry.action, text: entry.action }), entry.target ? el("code", { text: entry.target }) : "", json(entry.before), json(entry.after)]
    }), "No entry.")])
  })
}

/** Loads the log's first page with the form's filters. */
export function showAudit(): void {
  load(false)
}

$("audit-form").addEventListener("submit", function(event) {
  event.preventDefault()
  load(false)
})

$("audit-more").addEventListener("click", function() {
  load(true)
})
