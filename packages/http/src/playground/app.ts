/**
 * The playground's page script (browser code, no library), type-checked against core's wire
 * types and bundled by `npm run build:playground` into `../PlaygroundScript.ts`, which the page
 * embeds: the key kept in `sessionStorage`, the models from `GET /api/v1/models`, the form, the
 * estimate, submitting, following the task, and its results. Every request goes to the page's
 * own origin with the key in the Authorization header, never in a URL: the events are read
 * from a `fetch` body because `EventSource` cannot send that header.
 *
 * It runs after `PlaygroundForm.formScript`, whose functions `formScript.d.ts` declares.
 */
import type { Api } from "@mediagate/core"
import { fillIn, renderField, valuesOf } from "./controls.js"
import { follow, setStatus, showProgress } from "./following.js"
import { $, api, el, key, keyName, say } from "./page.js"

type Model = (typeof Api.ModelsResponse.Type)["data"]["models"][number]
type Estimate = (typeof Api.EstimateResponse.Type)["data"]
type TaskRequest = { readonly model: string; readonly input: Record<string, unknown> }

const state = {
  models: [] as ReadonlyArray<Model>,
  model: null as Model | null,
  fields: [] as ReadonlyArray<Field>,
  estimate: "unknown" as "unknown" | "present" | "missing",
  estimateTimer: 0 as ReturnType<typeof setTimeout> | 0,
  run: 0
}

// The key: pasted once, kept for this tab only.
function showKey(): void {
  const kept = key() !== ""
  $("key-form").hidden = kept
  $("key-kept").hidden = !kept
  if (kept) loadModels()
}

$("key-form").addEventListener("submit", function(event) {
  event.preventDefault()
  const value = $<HTMLInputElement>("key").value.trim()
  if (value === "") return
  sessionStorage.setItem(keyName, value)
  $<HTMLInputElement>("key").value = ""
  showKey()
})

$("forget").addEventListener("click", function() {
  sessionStorage.removeItem(keyName)
  $("model").textContent = ""
  $("form-area").hidden = true
  showKey()
})

function loadModels(): void {
  say("key-note", "Loading models...")
  api<(typeof Api.ModelsResponse.Type)["data"]>("GET", "/api/v1/models").then(function(answer) {
    if (answer.envelope.code !== 0 || !answer.envelope.data) {
      say("key-note", "The models did not load: " + answer.envelope.msg, "error")
      return
    }
    say("key-note", "")
    state.models = answer.envelope.data.models
    const select = $<HTMLSelectElement>("model")
    select.textContent = ""
    const groups: Record<string, HTMLElement> = {}
    state.models.forEach(function(model) {
      const group = groups[model.output] || (groups[model.output] = select.appendChild(el("optgroup", { label: model.output })))
      group.appendChild(el("option", { value: model.id, text: model.id }))
    })
    $("form-area").hidden = false
    pickModel(select.value)
  }, function(error: Error) {
    say("key-note", "The models did not load: " + error.message, "error")
  })
}

$("model").addEventListener("change", function() {
  pickModel($<HTMLSelectElement>("model").value)
})

function pickModel(id: string): void {
  state.model = state.models.filter(function(model) {
    return model.id === id
  })[0] || null
  if (!state.model) return
  state.fields = fieldsOf(state.model.inputSchema, state.model.defaults)
  const about = [state.model.output + ", " + state.model.modes.join(", "), state.model.priceRule]
    .concat(state.model.limits || [])
  const list = $("about")
  list.textContent = ""
  about.forEach(function(line) {
    list.appendChild(el("li", { text: line }))
  })
  const form = $("fields")
  form.textContent = ""
  state.fields.forEach(function(field) {
    form.appendChild(renderField(field, changed))
  })
  $("example").hidden = !(state.model.examples && state.model.examples.length > 0)
  changed()
}

$("example").addEventListener("click", function() {
  fillIn(state.fields, state.model!.examples[0]!.input, changed)
  changed()
})

function body(): { body: TaskRequest; errors: ReadonlyArray<string> } {
  const built = inputOf(state.fields, valuesOf(state.fields))
  return { body: { model: state.model!.id, input: built.input }, errors: built.errors }
}

// Every change: the curl text at once, the estimate after a pause in typing.
function changed(): void {
  if (!state.model) return
  const built = body()
  $("curl").textContent = curlOf(location.origin, built.body)
  say("form-note", built.errors.join("; "), built.errors.length ? "error" : "")
  clearTimeout(state.estimateTimer)
  if (state.estimate !== "missing" && built.errors.length === 0) {
    state.estimateTimer = setTimeout(function() {
      estimate(built.body)
    }, 350)
  }
}

// The estimate; a server without POST /api/v1/task/estimate (404, or 405 from the task path) hides the box.
function estimate(request: TaskRequest): void {
  api<Estimate>("POST", "/api/v1/task/estimate", request).then(function(answer) {
    if (answer.status === 404 || answer.status === 405) {
      state.estimate = "missing"
      $("price").hidden = true
      return
    }
    state.estimate = "present"
    $("price").hidden = false
    const adjustments = $("adjustments")
    adjustments.textContent = ""
    if (answer.envelope.code !== 0 || !answer.envelope.data) {
      $("price-value").textContent = ""
      $("price-value").title = ""
      say("price-note", answer.envelope.msg, "error")
      return
    }
    const data = answer.envelope.data
    $("price-value").textContent = priceText(data.priceUsd)
    $("price-value").title = data.priceUsd + " USD, " + data.priceMicroUsd + " micro-USD"
    say("price-note", "")
    ;(data.adjustments || []).forEach(function(a) {
      adjustments.appendChild(
        el("li", { text: a.field + ": " + JSON.stringify(a.requested) + " \u2192 " + JSON.stringify(a.applied) + (a.reason ? " (" + a.reason + ")" : "") })
      )
    })
  }, function() {})
}

$("copy").addEventListener("click", function() {
  const text = $("curl").textContent || ""
  const done = function() {
    say("copy-note", "Copied.")
  }
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, fallbackCopy)
  else fallbackCopy()
  function fallbackCopy(): void {
    const range = document.createRange()
    range.selectNodeContents($("curl"))
    const selection = window.getSelection()!
    selection.removeAllRanges()
    selection.addRange(range)
    if (document.execCommand("copy")) done()
    else say("copy-note", "Selected: copy it with Ctrl+C.")
  }
})

$("task-form").addEventListener("submit", function(event) {
  event.preventDefault()
  const built = body()
  if (built.errors.length > 0) return
  const run = ++state.run
  $<HTMLButtonElement>("submit").disabled = true
  $("results").textContent = ""
  $("task").hidden = false
  showProgress(null)
  $("logs").textContent = ""
  $("task-id").textContent = ""
  setStatus("SUBMITTING")
  api<(typeof Api.SubmitResponse.Type)["data"]>("POST", "/api/v1/task/submit", built.body).then(function(answer) {
    $<HTMLButtonElement>("submit").disabled = false
    if (answer.envelope.code !== 0 || !answer.envelope.data) {
      setStatus("REFUSED", answer.envelope.msg)
      return
    }
    const taskId = answer.envelope.data.taskId
    $("task-id").textContent = taskId
    follow(run, function() {
      return state.run
    }, taskId, 0)
  }, function(error: Error) {
    $<HTMLButtonElement>("submit").disabled = false
    setStatus("ERROR", error.message)
  })
})

showKey()
