/**
 * The form's controls: one per field of the model (`fieldsOf`), their values as the form
 * functions take them, and the model's example typed into them. `changed` is called on every
 * edit, as the page's own handler.
 */
import { fileControls } from "./fileDrop.js"
import { $, el } from "./page.js"

/** The id of a field's control. */
export function fieldId(field: Field): string {
  return "f-" + field.name
}

/** A field's label, control and hint. */
export function renderField(field: Field, changed: () => void): HTMLElement {
  const id = fieldId(field)
  const label = el("label", { "for": id }, [
    el("span", { "class": "name", text: field.name }),
    field.required ? el("span", { "class": "required", text: "required", title: "required" }) : null
  ])
  let control: HTMLElement
  if (field.kind === "select") {
    const select = el("select", { id, name: field.name, "data-kind": "select" }) as HTMLSelectElement
    if (!field.required || field.default === undefined) {
      select.appendChild(el("option", { value: "", text: field.required ? "choose" : "(not set)" }))
    }
    field.options.forEach(function(option) {
      select.appendChild(el("option", { value: String(option), text: String(option) + (option === field.default ? " (default)" : "") }))
    })
    if (field.default !== undefined) select.value = String(field.default)
    control = select
  } else if (field.kind === "number") {
    control = el("input", {
      id,
      name: field.name,
      type: "number",
      "data-kind": "number",
      min: field.min,
      max: field.max,
      step: field.step,
      value: field.default,
      placeholder: field.min !== undefined && field.max !== undefined ? field.min + " to " + field.max : ""
    })
  } else if (field.kind === "checkbox") {
    control = el("input", { id, name: field.name, type: "checkbox", "data-kind": "checkbox", checked: field.default === true })
  } else if (field.kind === "textarea") {
    control = el("textarea", { id, name: field.name, rows: 3, "data-kind": "textarea", maxlength: field.maxLength })
  } else if (field.kind === "text") {
    control = el("input", { id, name: field.name, type: "text", "data-kind": "text", maxlength: field.maxLength, value: field.default })
  } else if (field.kind === "urls") {
    const urls = el("div", { id, "class": "urls", "data-kind": "urls" })
    const add = el("button", {
      type: "button",
      "class": "small",
      text: "Add URL",
      onclick: function() {
        addUrl(urls, field, "", changed)
        changed()
      }
    })
    urls.appendChild(add)
    for (let i = 0; i < Math.max(1, field.minItems); i++) addUrl(urls, field, "", changed)
    control = urls
  } else {
    control = el("textarea", { id, name: field.name, rows: 3, "class": "fallback", "data-kind": "json", placeholder: "JSON" })
  }
  control.addEventListener("input", changed)
  control.addEventListener("change", changed)
  return el("div", { "class": "field" }, [label, control, field.description ? el("p", { "class": "hint", text: field.description }) : null])
}

/** One more URL row in a URL list's control, up to the field's most. */
function addUrl(container: HTMLElement, field: Field, value: string, changed: () => void): void {
  const rows = container.querySelectorAll(".url-row")
  if (field.maxItems !== undefined && rows.length >= field.maxItems) return
  const input = el("input", { type: "url", placeholder: "https://... or drop a file", value }) as HTMLInputElement
  const row: HTMLElement = el("div", { "class": "url-row" }, [
    input,
    el("button", {
      type: "button",
      "class": "small",
      text: "Remove",
      "aria-label": "Remove URL",
      onclick: function() {
        row.remove()
        changed()
      }
    })
  ])
  // The row takes a chosen or dropped file: uploaded, its URL fills the input.
  fileControls(row, input, changed).forEach(function(node) {
    row.appendChild(node)
  })
  container.insertBefore(row, container.lastChild)
}

/** What the controls hold, by field name. */
export function valuesOf(fields: ReadonlyArray<Field>): Values {
  const values: Values = {}
  fields.forEach(function(field) {
    const control = $<HTMLInputElement>(fieldId(field))
    if (!control) return
    if (field.kind === "checkbox") values[field.name] = control.checked
    else if (field.kind === "urls") {
      values[field.name] = Array.prototype.map.call(control.querySelectorAll("input[type=url]"), function(input: HTMLInputElement) {
        return input.value
      }) as Array<string>
    } else values[field.name] = control.value
  })
  return values
}

/** The example's input typed into the controls; a field it leaves out gets its default. */
export function fillIn(fields: ReadonlyArray<Field>, example: Readonly<Record<string, unknown>>, changed: () => void): void {
  fields.forEach(function(field) {
    const control = $<HTMLInputElement>(fieldId(field))
    const value = example[field.name]
    if (field.kind === "checkbox") control.checked = value === undefined ? field.default === true : value === true
    else if (field.kind === "urls") {
      Array.prototype.forEach.call(control.querySelectorAll(".url-row"), function(row: HTMLElement) {
        row.remove()
      })
      const urls = value && (value as ReadonlyArray<string>).length ? value as ReadonlyArray<string> : [""]
      urls.forEach(function(url) {
        addUrl(control, field, url, changed)
      })
    } else if (field.kind === "json") control.value = value === undefined ? "" : JSON.stringify(value)
    else control.value = value === undefined ? (field.default === undefined ? "" : String(field.default)) : String(value)
  })
}
