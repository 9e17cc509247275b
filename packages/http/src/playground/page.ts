/** The page's small tools: its elements by id, new elements, notes, the key, and the API with it. */

/** Where the pasted key is kept (this tab's `sessionStorage`). */
export const keyName = "mediagate.apiKey"

/** An element of the page by id. */
export const $ = <E extends HTMLElement = HTMLElement>(id: string): E => document.getElementById(id) as E

/**
 * A new element: `text` sets its text, `on<event>` adds a listener, any other attribute is set
 * (`true` as present; `undefined`, `null` and `false` leave it out).
 */
export function el(tag: string, attrs?: Record<string, unknown>, children?: ReadonlyArray<Node | null>): HTMLElement {
  const node = document.createElement(tag)
  const given = attrs || {}
  Object.keys(given).forEach(function(name) {
    const value = given[name]
    if (value === undefined || value === null || value === false) return
    if (name === "text") node.textContent = value as string
    else if (name.slice(0, 2) === "on") node.addEventListener(name.slice(2), value as EventListener)
    else node.setAttribute(name, value === true ? "" : String(value))
  })
  ;(children || []).forEach(function(child) {
    if (child) node.appendChild(child)
  })
  return node
}

/** The kept key, or "". */
export function key(): string {
  return sessionStorage.getItem(keyName) || ""
}

/** An answer's envelope: the success schema's, or an error's code and message. */
export type Envelope<A> =
  | { readonly code: 0; readonly msg: string; readonly data: A }
  | { readonly code: number; readonly msg: string; readonly data?: undefined }

/** A request to this origin with the key; an answer that is not JSON becomes an error envelope. */
export function api<A>(method: string, path: string, body?: unknown): Promise<{ status: number; envelope: Envelope<A> }> {
  const headers: Record<string, string> = { "Authorization": "Bearer " + key() }
  if (body !== undefined) headers["Content-Type"] = "application/json"
  return fetch(path, { method, headers, body: body === undefined ? null : JSON.stringify(body) })
    .then(function(response) {
      return response.text().then(function(text) {
        let envelope: Envelope<A>
        try {
          envelope = JSON.parse(text)
        } catch (e) {
          envelope = { code: response.status, msg: text.slice(0, 200) }
        }
        return { status: response.status, envelope }
      })
    })
}

/** Sets a note's text, and its kind ("error") for the style. */
export function say(id: string, text: string, kind?: string): void {
  const node = $(id)
  node.textContent = text
  node.className = "note" + (kind ? " " + kind : "")
}
