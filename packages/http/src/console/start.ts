/**
 * The console's page script (browser code, bundled with uPlot by `npm run build:console` into
 * `../ConsoleScript.ts`, which the page embeds): sign-in with an admin key, kept in memory only
 * (`adminFetch.ts`), and the views, each on the admin API alone: overview charts, accounts,
 * tasks, providers, the audit log. Every request goes to the page's own origin with the key in
 * the Authorization header; an answer that is not a success is shown as its `msg`.
 */
import "./safeLocale.js"
import { api, ok, setKey, signedIn } from "./adminFetch.js"
import { showAccounts } from "./accountsView.js"
import { showAudit } from "./auditView.js"
import { $, say } from "./elements.js"
import { showOverview } from "./overviewView.js"
import { showProviders } from "./providersView.js"
import { showTasks } from "./tasksView.js"
import { paths, type AccountList } from "./wire.js"

const views: Record<string, () => void> = {
  overview: showOverview,
  accounts: showAccounts,
  tasks: showTasks,
  providers: showProviders,
  audit: showAudit
}

/** Shows one view and marks its button as the current page. */
function open(name: string): void {
  document.querySelectorAll<HTMLElement>("[data-view]").forEach(function(node) {
    if (node.tagName === "BUTTON") {
      if (node.getAttribute("data-view") === name) node.setAttribute("aria-current", "page")
      else node.removeAttribute("aria-current")
    } else node.hidden = node.id !== "view-" + name
  })
  views[name]!()
}

$("nav").addEventListener("click", function(event) {
  const target = event.target as HTMLElement
  const name = target.getAttribute("data-view")
  if (target.tagName === "BUTTON" && name && signedIn()) open(name)
})

// Sign-in: the key is tried on the admin API (the accounts' list); what the API answers
// otherwise (a customer key's 403, an unknown key's 401, too many failures' 429) is shown.
$("sign-in-form").addEventListener("submit", function(event) {
  event.preventDefault()
  const input = $<HTMLInputElement>("admin-key")
  const value = input.value.trim()
  if (value === "") return
  $<HTMLButtonElement>("sign-in-button").disabled = true
  say("sign-in-note", "Signing in...")
  setKey(value)
  api<AccountList>("GET", paths.accounts).then(function(answer) {
    $<HTMLButtonElement>("sign-in-button").disabled = false
    if (!ok(answer)) {
      setKey("")
      say("sign-in-note", "Sign-in refused: " + answer.envelope.msg, "error")
      return
    }
    input.value = ""
    say("sign-in-note", "")
    $("sign-in").hidden = true
    $("nav").hidden = false
    $("signed-in").hidden = false
    $("signed-in-as").textContent = "Signed in (the key is kept in this page's memory only)"
    open("overview")
  })
})

$("sign-out").addEventListener("click", function() {
  setKey("")
  location.reload()
})
