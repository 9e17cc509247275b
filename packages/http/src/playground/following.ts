/**
 * A submitted task on the page: its status line, following its events until a terminal
 * status (the stream is read from a `fetch` body, with the key in the header), its progress
 * and its result files.
 */
import type { Task } from "@mediagate/core"
import { $, el, key } from "./page.js"

type Progress = Partial<Task.WireProgress>

const terminal: ReadonlyArray<Task.TaskStatus> = ["SUCCESS", "FAILURE", "CANCELLED", "TIMEOUT"]

/** What the status line shows: the task's status, or the page's own word for a request's fate. */
export function setStatus(status: Task.TaskStatus | "SUBMITTING" | "REFUSED" | "ERROR" | "DISCONNECTED", detail?: string | null): void {
  const node = $("status")
  node.textContent = status + (detail ? ": " + detail : "")
  node.setAttribute("data-status", status)
}

/**
 * Follows the task's events until a terminal status; a stream that ends early is opened
 * again (20 times). `current` is the page's run: a newer submit stops this one.
 */
export function follow(run: number, current: () => number, taskId: string, attempt: number): void {
  let ended = false
  fetch("/api/v1/task/" + encodeURIComponent(taskId) + "/events", {
    headers: { "Authorization": "Bearer " + key(), "Accept": "text/event-stream" }
  }).then(function(response) {
    if (!response.ok || !response.body) throw new Error("events answered " + response.status)
    const reader = response.body.getReader()
    const decoder = new TextDecoder()
    let buffer = ""
    function pump(): Promise<void> {
      return reader.read().then(function(chunk) {
        if (run !== current()) return reader.cancel()
        if (chunk.done) return
        buffer += decoder.decode(chunk.value, { stream: true })
        const read = readEvents(buffer)
        buffer = read.rest
        read.events.forEach(function(event) {
          let data
          try {
            data = JSON.parse(event.data)
          } catch (e) {
            return
          }
          if (event.event === "task") ended = showTask(data as Task.Task) || ended
          else if (event.event === "progress") showProgress((data as { progress: Progress | null }).progress)
        })
        return pump()
      })
    }
    return pump()
  }).catch(function() {}).then(function() {
    if (ended || run !== current()) return
    if (attempt >= 20) return setStatus("DISCONNECTED", "the events stream stopped; query the task with its id")
    setTimeout(function() {
      follow(run, current, taskId, attempt + 1)
    }, 1000)
  })
}

/** Shows the task (a failure or timeout with its reason); true when it has ended. */
function showTask(task: Task.Task): boolean {
  const detail = task.status === "FAILURE" || task.status === "TIMEOUT" ? task.failure_reason || task.error : ""
  setStatus(task.status, detail)
  if (task.progress) showProgress(task.progress)
  const done = terminal.indexOf(task.status) >= 0
  if (done) {
    if (task.status === "SUCCESS") showProgress({ percent: 100 })
    if (task.result) showResult(task.result)
  }
  return done
}

/** The bar, the stage, queue position and percent, and the last log lines. */
export function showProgress(progress: Progress | null): void {
  const bar = $<HTMLProgressElement>("bar")
  const percent = progress && typeof progress.percent === "number" ? progress.percent : null
  bar.hidden = percent === null
  if (percent !== null) bar.value = percent
  const facts: Array<string> = []
  if (progress && progress.stage) facts.push(progress.stage)
  if (progress && typeof progress.queue_position === "number") facts.push("queue position " + progress.queue_position)
  if (percent !== null) facts.push(Math.round(percent) + "%")
  $("progress-note").textContent = facts.join(" \u00b7 ")
  if (progress && progress.logs_tail && progress.logs_tail.length) {
    $("logs").textContent = progress.logs_tail.slice(-5).join("\n")
  }
}

/** The result: images in a grid or videos with controls, and the list of its files. */
function showResult(result: Task.TaskResult): void {
  const area = $("results")
  area.textContent = ""
  const urls = result.urls || []
  const media = el("div", { "class": result.type === "image" ? "grid" : "videos" })
  urls.forEach(function(url) {
    if (result.type === "image") {
      media.appendChild(el("a", { href: url, target: "_blank", rel: "noopener" }, [el("img", { src: url, alt: "result image" })]))
    } else if (result.type === "video") media.appendChild(el("video", { src: url, controls: true, preload: "metadata" }))
  })
  area.appendChild(media)
  area.appendChild(el(
    "ul",
    { "class": "files" },
    urls.map(function(url) {
      return el("li", {}, [el("a", { href: url, target: "_blank", rel: "noopener", text: url })])
    })
  ))
}
