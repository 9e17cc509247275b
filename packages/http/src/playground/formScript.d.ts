/**
 * `PlaygroundForm.formScript`'s functions, which the page defines before its own script: they
 * stay script text because a test evaluates that same text in Node against every model.
 */

/** A control of the form, as `fieldsOf` builds it. */
interface Field {
  readonly name: string
  readonly kind: "select" | "number" | "checkbox" | "text" | "textarea" | "urls" | "json"
  readonly required: boolean
  readonly description: string
  readonly default?: unknown
  readonly options: ReadonlyArray<string | number | boolean>
  readonly min?: number
  readonly max?: number
  readonly step?: number | "any"
  readonly maxLength?: number
  readonly minItems: number
  readonly maxItems?: number
}

/** The form's values by field name, as the controls hold them. */
type Values = Record<string, string | boolean | ReadonlyArray<string>>

declare function fieldsOf(schema: unknown, modelDefaults: unknown): ReadonlyArray<Field>
declare function inputOf(fields: ReadonlyArray<Field>, values: Values): { input: Record<string, unknown>; errors: ReadonlyArray<string> }
declare function curlOf(origin: string, body: unknown): string
declare function priceText(priceUsd: string): string
declare function readEvents(buffer: string): { events: ReadonlyArray<{ event: string; data: string }>; rest: string }
