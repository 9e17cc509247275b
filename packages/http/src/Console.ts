/**
 * `GET /console`: the operator's console, one page on the admin API (`/api/v1/admin/...`) and
 * nothing else: overview charts, accounts, tasks, providers and the audit log. One
 * self-contained HTML document: its style, its script and the chart library (uPlot, bundled
 * into `ConsoleScript.ts`) are inline, it loads no font, script or image from anywhere, and its
 * Content-Security-Policy lets it talk to this origin only. The page needs no key to load; the
 * admin key is typed into it and kept in the script's memory only (no cookie, no storage), so
 * there is no session for another site to ride on.
 */
import { chartStyle, consoleScript } from "./ConsoleScript.js"
import * as InlinePage from "./InlinePage.js"
import { consolePath } from "./Paths.js"

const ownStyle = `
:root { color-scheme: light dark; --line: #8884; --accent: #2563eb; --muted: #6b7280; --error: #b91c1c; --ok: #15803d; }
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
header { padding: 12px 24px; border-bottom: 1px solid var(--line); display: flex; gap: 16px; align-items: center; flex-wrap: wrap; }
header h1 { font-size: 18px; margin: 0; }
nav { display: flex; gap: 4px; flex-wrap: wrap; }
nav button[aria-current=page] { background: var(--accent); color: white; border-color: var(--accent); }
#signed-in { margin-left: auto; display: flex; gap: 8px; align-items: center; color: var(--muted); font-size: 13px; }
main { padding: 16px 24px; max-width: 1400px; }
section { border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; margin-bottom: 16px; }
h2 { font-size: 16px; margin: 0 0 10px; }
h3 { font-size: 14px; margin: 14px 0 6px; }
label { font-weight: 600; font-size: 13px; display: block; margin-bottom: 2px; }
input, select { padding: 5px 8px; font: inherit; border: 1px solid var(--line); border-radius: 6px; background: transparent; color: inherit; }
select option { color: initial; }
button { font: inherit; padding: 5px 12px; border-radius: 6px; border: 1px solid var(--line); background: transparent; color: inherit; cursor: pointer; }
button.primary { background: var(--accent); color: white; border-color: var(--accent); }
button.danger { color: var(--error); border-color: var(--error); }
button:disabled { opacity: .5; cursor: default; }
.row { display: flex; gap: 10px; align-items: flex-end; flex-wrap: wrap; margin-bottom: 10px; }
.note { color: var(--muted); font-size: 13px; margin: 6px 0; min-height: 1em; }
.note.error { color: var(--error); font-weight: 600; }
.note.ok { color: var(--ok); }
table { border-collapse: collapse; width: 100%; font-size: 13.5px; margin: 6px 0; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); }
td.empty { color: var(--muted); font-style: italic; }
td code, dd code { word-break: break-all; }
.figures { display: flex; gap: 28px; flex-wrap: wrap; margin: 4px 0 10px; }
.figures dt { color: var(--muted); font-size: 12px; }
.figures dd { margin: 0; font-size: 20px; font-weight: 700; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 16px; }
.charts section { margin: 0; }
.chart { min-height: 240px; }
details { margin-top: 6px; font-size: 13px; }
pre { white-space: pre-wrap; word-break: break-all; background: #8881; padding: 8px; border-radius: 6px; font-size: 12.5px; margin: 4px 0; max-height: 240px; overflow: auto; }
ol.timeline { padding-left: 20px; margin: 4px 0; }
ol.timeline li { margin-bottom: 4px; }
.status { font-weight: 700; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
`

/** The page's style: its own, then uPlot's (bundled with the script). */
const style = `${ownStyle}\n${chartStyle}`

const body = `
<header>
  <h1>mediagate console</h1>
  <nav id="nav" aria-label="Views" hidden>
    <button type="button" data-view="overview">Overview</button>
    <button type="button" data-view="accounts">Accounts</button>
    <button type="button" data-view="tasks">Tasks</button>
    <button type="button" data-view="providers">Providers</button>
    <button type="button" data-view="audit">Audit log</button>
  </nav>
  <div id="signed-in" hidden><span id="signed-in-as"></span><button type="button" id="sign-out">Sign out</button></div>
</header>
<main>
  <section id="sign-in">
    <h2>Sign in</h2>
    <form id="sign-in-form" class="row" autocomplete="off">
      <div><label for="admin-key">Admin key</label><input id="admin-key" type="password" size="48" required></div>
      <button type="submit" class="primary" id="sign-in-button">Sign in</button>
    </form>
    <p class="note">An admin key: <code>npm run admin -- key create --admin</code>, or the server's <code>MEDIAGATE_ADMIN_KEY</code>.
    It stays in this page's memory only: reloading or closing the tab signs out.</p>
    <p id="sign-in-note" class="note"></p>
  </section>

  <div id="view-overview" data-view hidden>
    <div class="row"><button type="button" id="overview-refresh">Refresh</button><p id="overview-note" class="note"></p></div>
    <div class="charts">
      <section><h2 id="chart-tasks-title">Tasks per minute by status</h2><div id="chart-tasks" class="chart" role="img" aria-labelledby="chart-tasks-title"></div><details><summary>The figures</summary><div id="chart-tasks-table"></div></details></section>
      <section><h2 id="chart-latency-title">Time to result by model, p50 and p95</h2><div id="chart-latency" class="chart" role="img" aria-labelledby="chart-latency-title"></div><details><summary>The figures</summary><div id="chart-latency-table"></div></details></section>
      <section><h2 id="chart-failures-title">Failures by class and provider</h2><div id="chart-failures" class="chart" role="img" aria-labelledby="chart-failures-title"></div><details><summary>The figures</summary><div id="chart-failures-table"></div></details></section>
      <section><h2 id="chart-spend-title">Spend per day</h2><div id="chart-spend" class="chart" role="img" aria-labelledby="chart-spend-title"></div><details><summary>The figures</summary><div id="chart-spend-table"></div></details></section>
    </div>
  </div>

  <div id="view-accounts" data-view hidden>
    <section><h2>Accounts</h2><p id="accounts-note" class="note"></p><div id="accounts-list"></div></section>
    <section id="account" hidden>
      <h2>Account <code id="account-id"></code></h2>
      <dl class="figures">
        <div><dt>Balance</dt><dd id="account-balance"></dd></div>
        <div><dt>Reserved</dt><dd id="account-reserved"></dd></div>
        <div><dt>Available</dt><dd id="account-available"></dd></div>
      </dl>
      <form id="credits-form" class="row">
        <div><label for="credits-amount">Add credits (USD)</label><input id="credits-amount" type="number" step="0.000001" min="0.000001" required></div>
        <div><label for="credits-note">Note</label><input id="credits-note" type="text" size="30" required></div>
        <button type="submit" class="primary" id="credits-add">Add credits</button>
      </form>
      <p id="account-note" class="note"></p>
      <h3>Keys</h3>
      <div id="account-keys"></div>
      <h3>Callback signing secret</h3>
      <div class="row">
        <div><label for="secret-grace">Old secret keeps signing for (hours)</label><input id="secret-grace" type="number" min="0" step="1" value="24"></div>
        <button type="button" id="secret-rotate">Rotate the secret</button>
      </div>
      <div id="account-secrets"></div>
      <h3>Latest ledger entries</h3>
      <div id="account-ledger"></div>
    </section>
  </div>

  <div id="view-tasks" data-view hidden>
    <section>
      <h2>Tasks</h2>
      <form id="tasks-form" class="row">
        <div><label for="tasks-id">Task id</label><input id="tasks-id" type="text" size="28"></div>
        <div><label for="tasks-account">Account</label><input id="tasks-account" type="text" size="16"></div>
        <div><label for="tasks-model">Model</label><input id="tasks-model" type="text" size="24"></div>
        <div><label for="tasks-status">Status</label><select id="tasks-status">
          <option value="">any</option><option>PENDING</option><option>SUBMITTED</option><option>PROCESSING</option>
          <option>SUCCESS</option><option>FAILURE</option><option>CANCELLED</option><option>TIMEOUT</option></select></div>
        <button type="submit" class="primary" id="tasks-search">Search</button>
      </form>
      <p id="tasks-note" class="note"></p>
      <div id="tasks-list"></div>
      <button type="button" id="tasks-more" hidden>More</button>
    </section>
    <section id="task" hidden>
      <h2>Task <code id="task-id"></code></h2>
      <div class="row"><button type="button" id="task-redeliver">Redeliver the callback</button><button type="button" id="task-cancel" class="danger">Cancel the task</button></div>
      <p id="task-note" class="note"></p>
      <div id="task-summary"></div>
      <h3>Attempts</h3>
      <div id="task-attempts"></div>
      <h3>Progress</h3>
      <div id="task-progress"></div>
      <h3>Callbacks</h3>
      <div id="task-callbacks"></div>
      <h3>Ledger</h3>
      <div id="task-ledger"></div>
    </section>
  </div>

  <div id="view-providers" data-view hidden>
    <section><h2>Providers</h2><div class="row"><button type="button" id="providers-refresh">Refresh</button><p id="providers-note" class="note"></p></div><div id="providers-list"></div></section>
  </div>

  <div id="view-audit" data-view hidden>
    <section>
      <h2>Audit log</h2>
      <form id="audit-form" class="row">
        <div><label for="audit-action">Action</label><select id="audit-action"><option value="">any</option>
          <option>account.create</option><option>key.create</option><option>key.revoke</option><option>secret.rotate</option>
          <option>credits.add</option><option>task.cancel</option><option>task.redeliver</option>
          <option>admin_key.create</option><option>admin_key.revoke</option></select></div>
        <div><label for="audit-target">Target</label><input id="audit-target" type="text" size="28"></div>
        <button type="submit" class="primary" id="audit-search">Show</button>
      </form>
      <p id="audit-note" class="note"></p>
      <div id="audit-list"></div>
      <button type="button" id="audit-more" hidden>More</button>
    </section>
  </div>
</main>
`

/**
 * The page and its policy: its own inline style and script by hash, requests to this origin
 * only, nothing else: no image, font or frame (the charts draw on canvases; uPlot sets sizes
 * and colours through the DOM, which a style policy does not govern).
 */
const consolePage = InlinePage.make({ path: consolePath, title: "mediagate console", style, body, script: consoleScript })

/** The page: one HTML document with its style and script inline. */
export const page = consolePage.page

export const contentSecurityPolicy = consolePage.contentSecurityPolicy

/** `GET /console`: the page, made once. */
export const route = consolePage.route
