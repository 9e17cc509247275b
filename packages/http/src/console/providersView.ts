/** The providers view: each route target's circuit state, error rate, latency and jobs running against its limit. */
import { api, ok } from "./adminFetch.js"
import { duration, el, fill, say, table, when } from "./elements.js"
import { paths } from "./wire.js"
import type { ProvidersData } from "./wire.js"

function percent(rate: number | null): string {
  return rate === null ? "no attempt" : (rate * 100).toFixed(rate < 0.1 ? 1 : 0) + "%"
}

/** Loads the providers' table. */
export function showProviders(): void {
  say("providers-note", "Loading...")
  api<ProvidersData>("GET", paths.providers).then(function(answer) {
    if (!ok(answer)) return say("providers-note", answer.envelope.msg, "error")
    const data = answer.envelope.data
    say("providers-note", "Circuits are this node's; attempts, error rate and latency are every node's, over the last " + data.window_minutes + " minutes.")
    fill("providers-list", [table("Providers", ["Target", "Provider", "Circuit", "Attempts", "Error rate", "Latency p50", "Latency p95", "Running"], data.providers.map(function(row) {
      return [
        el("code", { text: row.name }),
        row.provider || "",
        el("span", { class: "status", "data-circuit": row.circuit.state, text: row.circuit.state + (row.circuit.until ? " until " + when(row.circuit.until) : "") }),
        row.attempts + (row.transient_failures > 0 ? " (" + row.transient_failures + " calls retried)" : ""),
        percent(row.error_rate),
        duration(row.latency_p50_ms),
        duration(row.latency_p95_ms),
        row.running + (row.limit === null ? "" : " of " + row.limit)
      ]
    }), "No route target.")])
  })
}

document.getElementById("providers-refresh")!.addEventListener("click", showProviders)
