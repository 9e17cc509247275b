/**
 * The tasks view: every account's tasks, searched by id, account, model and status, newest
 * first, a page at a time; one task's detail with its attempts as a timeline, its progress,
 * its callbacks with each delivery attempt and the receiver's answer, its ledger entries,
 * and the redeliver and cancel buttons.
 */
import { api, ok, query } from "./adminFetch.js"
import { $, button, duration, el, fill, say, table, usd, when } from "./elements.js"
import { paths } from "./wire.js"
import type { CallbackView, RedeliverData, TaskDetailData, TaskList, TaskSummary } from "./wire.js"

const terminal = ["SUCCESS", "FAILURE", "CANCELLED", "TIMEOUT"]
let cursor: string | null = null
let shown: Array<TaskSummary> = []
let open = ""

/** Shows the view: the latest tasks, or those of the search in the form. */
export function showTasks(): void {
  search(false)
}

function search(more: boolean): void {
  const id = $<HTMLInputElement>("tasks-id").value.trim()
  if (id !== "" && !more) return openTask(id)
  if (!more) {
    cursor = null
    shown = []
  }
  say("tasks-note", "Searching...")
  const path = paths.tasks + query({
    account: $<HTMLInputElement>("tasks-account").value.trim(),
    model: $<HTMLInputElement>("tasks-model").value.trim(),
    status: $<HTMLSelectElement>("tasks-status").value,
    cursor: more ? cursor : null,
    limit: 50
  })
  api<TaskList>("GET", path).then(function(answer) {
    if (!ok(answer)) return say("tasks-note", answer.envelope.msg, "error")
    shown = shown.concat(answer.envelope.data.tasks)
    cursor = answer.envelope.data.next_cursor
    $("tasks-more").hidden = cursor === null
    say("tasks-note", shown.length + (shown.length === 1 ? " task" : " tasks") + (cursor === null ? "" : " so far"))
    fill("tasks-list", [table("Tasks", ["Task", "Account", "Model", "Status", "Provider", "Created", ""], shown.map(function(task) {
      return [
        el("code", { text: task.taskId }),
        el("code", { text: task.account_id }),
        modelOf(task),
        el("span", { class: "status", "data-status": task.status, text: task.status + (reasonOf(task) ? ": " + reasonOf(task) : "") }),
        task.provider || "",
        when(task.created_at),
        button("Details", function() {
          openTask(task.taskId)
        }, { "data-open-task": task.taskId, "aria-label": "Details of task " + task.taskId })
      ]
    }), "No task matches.")])
  })
}

$("tasks-form").addEventListener("submit", function(event) {
  event.preventDefault()
  search(false)
})

$("tasks-more").addEventListener("click", function() {
  search(true)
})

function modelOf(task: TaskSummary): string {
  return typeof task.input["model"] === "string" ? task.input["model"] : ""
}

function reasonOf(task: TaskSummary): string {
  return task.error || task.failure_reason || ""
}

function callbacksTable(callbacks: ReadonlyArray<CallbackView>): ReadonlyArray<HTMLElement> {
  if (callbacks.length === 0) return [el("p", { class: "note", text: "No callback: the task was submitted without a callback URL." })]
  return callbacks.map(function(callback) {
    return el("div", { "data-callback": callback.id }, [
      el("p", {}, [
        el("code", { text: callback.url }),
        " (" + (callback.event || "completed") + "): ",
        el("span", { class: "status", "data-callback-status": callback.status, text: callback.status })
      ]),
      callback.next_attempt_at ? el("p", { class: "note", text: "Next attempt at " + when(callback.next_attempt_at) }) : null,
      table("Delivery attempts of callback " + callback.id, ["Attempt", "When", "Receiver's answer", "Error", "Took"], callback.attempts.map(function(attempt) {
        return [String(attempt.attempt), when(attempt.at), attempt.status_code === null ? "none" : "HTTP " + attempt.status_code, attempt.error || "", duration(attempt.latency_ms)]
      }), "Not attempted yet.")
    ])
  })
}

function showDetail(detail: TaskDetailData): void {
  const task = detail.task
  $("task-id").textContent = task.taskId
  fill("task-summary", [el("p", {}, [
    el("span", { class: "status", id: "task-status", "data-status": task.status, text: task.status }),
    reasonOf(task) ? ": " + reasonOf(task) : "",
    " \u00b7 account ",
    el("code", { text: task.account_id }),
    " \u00b7 " + modelOf(task),
    task.provider ? " \u00b7 provider " + task.provider : "",
    task.key_id ? " \u00b7 key " + task.key_id : "",
    " \u00b7 price " + usd(task.price_micro_usd),
    task.callback_url ? " \u00b7 callback " + task.callback_url : "",
    " \u00b7 created " + when(task.created_at) + ", updated " + when(task.updated_at)
  ])])
  fill("task-attempts", task.attempts.length === 0 ? [el("p", { class: "note", text: "No attempt upstream yet." })] : [
    el("ol", { class: "timeline" }, task.attempts.map(function(attempt) {
      return el("li", {}, [
        when(attempt.started_at) + " \u2192 " + (when(attempt.ended_at) || "running") + ": ",
        el("strong", { text: "#" + attempt.attempt + " " + attempt.model + (attempt.provider ? " on " + attempt.provider : "") }),
        " " + attempt.outcome + (attempt.error ? ": " + attempt.error : "")
      ])
    }))
  ])
  const progress = task.progress
  fill("task-progress", progress === null ? [el("p", { class: "note", text: "Nothing reported." })] : [
    el("p", { text: progress.stage + (progress.percent === null ? "" : " \u00b7 " + progress.percent + "%") + " \u00b7 " + when(progress.updated_at) }),
    progress.logs_tail.length > 0 ? el("pre", { text: progress.logs_tail.join("\n") }) : null
  ])
  fill("task-callbacks", callbacksTable(detail.callbacks))
  fill("task-ledger", [table("Ledger entries of the task", ["When", "Kind", "Amount", "Held", "Note"], detail.ledger.map(function(entry) {
    return [when(entry.created_at), entry.kind, usd(entry.amount_micro_usd), usd(entry.held_micro_usd), entry.note || ""]
  }), "No entry.")])
  const ended = terminal.indexOf(task.status) >= 0
  $<HTMLButtonElement>("task-cancel").disabled = ended
  $<HTMLButtonElement>("task-redeliver").disabled = !ended || detail.callbacks.length === 0
}

/** Opens one task's detail. */
function openTask(id: string): void {
  open = id
  $("task").hidden = false
  say("task-note", "Loading...")
  api<TaskDetailData>("GET", paths.task(id)).then(function(answer) {
    if (!ok(answer)) {
      $("task-id").textContent = id
      fill("task-summary", [])
      return say("task-note", answer.envelope.msg, "error")
    }
    say("task-note", "")
    showDetail(answer.envelope.data)
  })
}

$("task-redeliver").addEventListener("click", function() {
  const id = open
  api<RedeliverData>("POST", paths.redeliver(id)).then(function(answer) {
    if (!ok(answer)) return say("task-note", answer.envelope.msg, "error")
    fill("task-callbacks", callbacksTable(answer.envelope.data.callbacks))
    say("task-note", "The callback is being sent again.", "ok")
    // The delivery's outcome, a moment later.
    setTimeout(function() {
      if (open === id) openTask(id)
    }, 1500)
  })
})

$("task-cancel").addEventListener("click", function() {
  const id = open
  if (!confirm("Cancel task " + id + "? Its held credits are released.")) return
  api<unknown>("POST", paths.cancel(id)).then(function(answer) {
    if (!ok(answer)) return say("task-note", answer.envelope.msg, "error")
    openTask(id)
    say("task-note", "Cancelled.", "ok")
  })
})
