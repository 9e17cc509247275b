/** The console's small tools: elements by id, new elements, notes, tables, and how figures read. */

/** An element of the page by id. */
export const $ = <E extends HTMLElement = HTMLElement>(id: string): E => document.getElementById(id) as E

/** A child of an element. */
export type Child = Node | string | null | undefined

/**
 * A new element: `text` sets its text, `on<event>` adds a listener, any other attribute is set
 * (`true` as present; `undefined`, `null` and `false` leave it out). A string child is text.
 */
export function el(tag: string, attrs?: Record<string, unknown>, children?: ReadonlyArray<Child>): HTMLElement {
  const node = document.createElement(tag)
  const given = attrs || {}
  Object.keys(given).forEach(function(name) {
    const value = given[name]
    if (value === undefined || value === null || value === false) return
    if (name === "text") node.textContent = String(value)
    else if (name.slice(0, 2) === "on") node.addEventListener(name.slice(2), value as EventListener)
    else node.setAttribute(name, value === true ? "" : String(value))
  })
  ;(children || []).forEach(function(child) {
    if (child === null || child === undefined) return
    node.appendChild(typeof child === "string" ? document.createTextNode(child) : child)
  })
  return node
}

/** Sets a note's text, and its kind ("error", "ok") for the style; an error note is announced. */
export function say(id: string, text: string, kind?: "error" | "ok"): void {
  const node = $(id)
  node.textContent = text
  node.className = "note" + (kind ? " " + kind : "")
  node.setAttribute("role", kind === "error" ? "alert" : "status")
}

/** A table with a caption for screen readers, a header row, and a row per item (an empty table says so). */
export function table(caption: string, headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<Child>>, empty: string): HTMLElement {
  const body = rows.length === 0
    ? [el("tr", {}, [el("td", { colspan: headers.length, class: "empty", text: empty })])]
    : rows.map(function(cells) {
      return el("tr", {}, cells.map(function(cell) {
        return el("td", {}, [cell])
      }))
    })
  return el("table", {}, [
    el("caption", { class: "visually-hidden", text: caption }),
    el("thead", {}, [el("tr", {}, headers.map(function(header) {
      return el("th", { scope: "col", text: header })
    }))]),
    el("tbody", {}, body)
  ])
}

/** Replaces an element's children. */
export function fill(id: string, children: ReadonlyArray<Child>): void {
  const node = $(id)
  node.textContent = ""
  children.forEach(function(child) {
    if (child !== null && child !== undefined) node.appendChild(typeof child === "string" ? document.createTextNode(child) : child)
  })
}

/** Micro-USD as people read money: at least the cents, no zeros beyond them ($12.50, $0.042, -$1.00). */
export function usd(micro: number): string {
  const sign = micro < 0 ? "-" : ""
  const whole = Math.floor(Math.abs(micro) / 1_000_000)
  const fraction = String(Math.abs(micro) % 1_000_000).padStart(6, "0").replace(/0+$/, "")
  return sign + "$" + whole + "." + (fraction.length < 2 ? (fraction + "00").slice(0, 2) : fraction)
}

/** A time (epoch milliseconds or ISO text) as UTC, to the second; "" for none. */
export function when(at: number | string | null | undefined): string {
  if (at === null || at === undefined || at === "") return ""
  const date = new Date(at)
  return isNaN(date.getTime()) ? String(at) : date.toISOString().slice(0, 19).replace("T", " ") + " UTC"
}

/** Milliseconds as people read a duration: 850 ms, 12.3 s, 4.0 min. */
export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return ""
  if (ms < 1000) return Math.round(ms) + " ms"
  if (ms < 60_000) return (ms / 1000).toFixed(1) + " s"
  return (ms / 60_000).toFixed(1) + " min"
}

/** A button with its text and what a click does. */
export function button(text: string, onClick: () => void, attrs?: Record<string, unknown>): HTMLElement {
  return el("button", Object.assign({ type: "button", text: text, onclick: onClick }, attrs || {}))
}
