/**
 * Local files for a URL input: each URL row takes a chosen or dropped file, uploads it to
 * `POST /api/v1/files` (the body is the file itself, with the key in the Authorization
 * header) and fills the row's URL with the upload's `url`; a refusal (415, 413, 400) is shown
 * under the row in the server's words.
 */
import type { FilesApi } from "@mediagate/core"
import { el, key } from "./page.js"

type Upload = (typeof FilesApi.UploadResponse.Type)["data"]

/** Uploads `file` and answers its URL; rejects with the server's `msg` (or what went wrong). */
function upload(file: Blob): Promise<string> {
  return fetch("/api/v1/files", {
    method: "POST",
    headers: { "Authorization": "Bearer " + key(), "Content-Type": file.type || "application/octet-stream" },
    body: file
  }).then(function(response) {
    return response.text().then(function(text) {
      let envelope: { code: number; msg: string; data?: Upload }
      try {
        envelope = JSON.parse(text)
      } catch (e) {
        throw new Error("HTTP " + response.status + ": " + text.slice(0, 200))
      }
      if (envelope.code !== 0 || !envelope.data) throw new Error(envelope.msg)
      return envelope.data.url
    })
  })
}

/**
 * A "Choose file" button and its note for the row of `input`, and the row made a drop
 * target: the file's upload URL goes into `input`, then `changed` is called.
 */
export function fileControls(row: HTMLElement, input: HTMLInputElement, changed: () => void): ReadonlyArray<HTMLElement> {
  const note = el("span", { "class": "note file-note" })
  const picker = el("input", { type: "file", accept: "image/*,video/*", hidden: true }) as HTMLInputElement
  const send = function(file: File | undefined): void {
    if (!file) return
    note.className = "note file-note"
    note.textContent = "Uploading " + file.name + "..."
    row.setAttribute("data-uploading", "")
    upload(file).then(function(url) {
      input.value = url
      note.textContent = "Uploaded " + file.name + "."
      row.removeAttribute("data-uploading")
      changed()
    }, function(error: Error) {
      note.className = "note file-note error"
      note.textContent = file.name + ": " + error.message
      row.removeAttribute("data-uploading")
    })
  }
  picker.addEventListener("change", function() {
    send(picker.files ? picker.files[0] : undefined)
    picker.value = ""
  })
  row.addEventListener("dragover", function(event) {
    event.preventDefault()
    row.classList.add("dropping")
  })
  row.addEventListener("dragleave", function() {
    row.classList.remove("dropping")
  })
  row.addEventListener("drop", function(event) {
    event.preventDefault()
    row.classList.remove("dropping")
    send(event.dataTransfer && event.dataTransfer.files.length > 0 ? event.dataTransfer.files[0] : undefined)
  })
  const choose = el("button", {
    type: "button",
    "class": "small",
    text: "Choose file",
    title: "Upload a file from this computer, or drop one on the row",
    onclick: function() {
      picker.click()
    }
  })
  return [choose, picker, note]
}
