/**
 * `GET /playground`: a page to try a model from a browser, like the model pages of hosted
 * services. One self-contained HTML document: its style and script are inline, it loads no
 * font, script or image from anywhere, and its Content-Security-Policy lets it talk to this
 * origin only. The page needs no key to load; the key is pasted into it, kept in the tab's
 * `sessionStorage` and sent in the Authorization header, so everything it shows is that
 * key's account's.
 */
import * as InlinePage from "./InlinePage.js"
import { appScript } from "./PlaygroundScript.js"
import { formScript } from "./PlaygroundForm.js"
import { playgroundPath } from "./Paths.js"

const style = `
:root { color-scheme: light dark; --line: #8884; --accent: #2563eb; --muted: #6b7280; --error: #b91c1c; }
* { box-sizing: border-box; }
[hidden] { display: none !important; }
pre:empty { display: none; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
header { padding: 14px 24px; border-bottom: 1px solid var(--line); display: flex; gap: 16px; align-items: baseline; }
header h1 { font-size: 18px; margin: 0; }
header a { color: var(--accent); }
main { display: grid; grid-template-columns: minmax(320px, 1fr) minmax(320px, 1fr); gap: 24px; padding: 20px 24px; max-width: 1400px; }
@media (max-width: 860px) { main { grid-template-columns: 1fr; } }
section { border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; margin-bottom: 16px; }
h2 { font-size: 15px; margin: 0 0 10px; }
label { display: flex; gap: 8px; align-items: baseline; font-weight: 600; margin-bottom: 4px; }
.required { font-size: 11px; font-weight: 500; color: var(--error); text-transform: uppercase; }
.field { margin-bottom: 12px; }
input[type=text], input[type=url], input[type=number], input[type=password], select, textarea {
  width: 100%; padding: 6px 8px; font: inherit; border: 1px solid var(--line); border-radius: 6px; background: transparent; color: inherit; }
select option, select optgroup { color: initial; }
textarea { resize: vertical; }
.hint, .note { color: var(--muted); font-size: 13px; margin: 4px 0 0; }
.note.error { color: var(--error); }
.url-row { display: flex; gap: 6px; margin-bottom: 6px; flex-wrap: wrap; border-radius: 6px; }
.url-row input[type=url] { flex: 1; width: auto; min-width: 12em; }
.url-row.dropping { outline: 2px dashed var(--accent); outline-offset: 2px; }
.file-note { flex-basis: 100%; margin: 0; }
.file-note:empty { display: none; }
button { font: inherit; padding: 6px 14px; border-radius: 6px; border: 1px solid var(--line); background: transparent; color: inherit; cursor: pointer; }
button.primary { background: var(--accent); color: white; border-color: var(--accent); }
button.small { padding: 2px 8px; font-size: 13px; }
button:disabled { opacity: .5; cursor: default; }
.row { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
#key { flex: 1; width: auto; }
h2.spaced { margin-top: 14px; }
#about { margin: 6px 0 0; padding-left: 18px; color: var(--muted); font-size: 13px; }
#price-value { font-size: 22px; font-weight: 700; }
pre { white-space: pre-wrap; word-break: break-all; background: #8881; padding: 10px; border-radius: 6px; font-size: 12.5px; margin: 8px 0; }
#status { font-weight: 700; }
progress { width: 100%; height: 10px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(180px, 1fr)); gap: 10px; margin-top: 10px; }
.grid img { width: 100%; border-radius: 6px; display: block; background: #8882; }
.videos video { width: 100%; border-radius: 6px; margin-top: 10px; }
.files { font-size: 13px; padding-left: 18px; word-break: break-all; }
`

const body = `
<header><h1>mediagate playground</h1><a href="/docs">API reference</a></header>
<main>
  <div>
    <section>
      <h2>API key</h2>
      <form id="key-form" class="row" autocomplete="off">
        <input id="key" type="password" placeholder="paste the key (kept in this tab only)" aria-label="API key">
        <button type="submit" class="primary" id="use-key">Use key</button>
      </form>
      <div id="key-kept" class="row" hidden><span>Key kept for this tab (sessionStorage).</span><button type="button" class="small" id="forget">Forget it</button></div>
      <p id="key-note" class="note"></p>
    </section>
    <form id="task-form">
      <section id="form-area" hidden>
        <h2>Model</h2>
        <select id="model" aria-label="Model"></select>
        <ul id="about"></ul>
        <h2 class="spaced">Input</h2>
        <div id="fields"></div>
        <p id="form-note" class="note"></p>
        <div class="row">
          <button type="submit" class="primary" id="submit">Submit</button>
          <button type="button" id="example">Fill in the example</button>
        </div>
      </section>
    </form>
  </div>
  <div>
    <section id="price" hidden>
      <h2>Estimate</h2>
      <div id="price-value"></div>
      <ul id="adjustments" class="hint"></ul>
      <p id="price-note" class="note"></p>
    </section>
    <section id="task" hidden>
      <h2>Task <code id="task-id"></code></h2>
      <div id="status" data-status=""></div>
      <progress id="bar" max="100" hidden></progress>
      <p id="progress-note" class="note"></p>
      <pre id="logs"></pre>
      <div id="results"></div>
    </section>
    <section>
      <h2>This request as curl</h2>
      <pre id="curl"></pre>
      <div class="row"><button type="button" class="small" id="copy">Copy</button><span id="copy-note" class="note"></span></div>
    </section>
  </div>
</main>
`

/** The page's whole script: the form functions, then the page around them (`playground/app.ts`, bundled); its hash is in the policy. */
const script = `"use strict";\n${formScript}\n${appScript}`

/**
 * The page and its policy: its own inline style and script by hash, requests to this origin
 * only; result files may live on another host (a public URL, a bucket's presigned address),
 * so images and video may come from any http(s) address, and from nothing else.
 */
const playgroundPage = InlinePage.make({
  path: playgroundPath,
  title: "mediagate playground",
  style,
  body,
  script,
  policy: ["img-src 'self' http: https:", "media-src 'self' http: https:"]
})

/** The page: one HTML document with its style and script inline. */
export const page = playgroundPage.page

export const contentSecurityPolicy = playgroundPage.contentSecurityPolicy

/** `GET /playground`: the page, made once; its ETag and cache lifetime are `Compression`'s, as for every static page. */
export const route = playgroundPage.route
