/**
 * The input schemas the protocol fakes check, in the shape the providers validate with
 * (Pydantic models behind fal and Cog): a field unknown to the model, a value of the wrong
 * type, out of range or not among the choices is refused, each with its location.
 */

/** One field's rule. */
export type Field =
  | { readonly type: "string"; readonly enum?: ReadonlyArray<string>; readonly required?: boolean }
  | { readonly type: "integer" | "number"; readonly min?: number; readonly max?: number; readonly required?: boolean }
  | { readonly type: "boolean"; readonly required?: boolean }
  | { readonly type: "uri"; readonly required?: boolean }
  | { readonly type: "object"; readonly fields: Schema; readonly required?: boolean }
  | { readonly type: "oneOf"; readonly options: ReadonlyArray<Field>; readonly required?: boolean }
  | { readonly type: "array"; readonly items: Field; readonly required?: boolean }

/** A model's input: its fields by name; any other field is refused. */
export type Schema = Readonly<Record<string, Field>>

/** A problem with the input, as Pydantic names it. */
export interface Problem {
  readonly loc: ReadonlyArray<string | number>
  readonly msg: string
  readonly type: string
}

const fieldProblems = (field: Field, value: unknown, loc: ReadonlyArray<string | number>): ReadonlyArray<Problem> => {
  switch (field.type) {
    case "string":
      if (typeof value !== "string") return [{ loc, msg: "Input should be a valid string", type: "string_type" }]
      return field.enum !== undefined && !field.enum.includes(value)
        ? [{ loc, msg: `Input should be ${field.enum.map((v) => `'${v}'`).join(", ")}`, type: "enum" }]
        : []
    case "uri":
      return typeof value === "string" && /^(https?|data):/.test(value) ? [] : [{ loc, msg: "Input should be a valid URL", type: "url_parsing" }]
    case "integer":
    case "number": {
      if (typeof value !== "number" || (field.type === "integer" && !Number.isInteger(value))) {
        return [{ loc, msg: `Input should be a valid ${field.type}`, type: field.type === "integer" ? "int_type" : "float_type" }]
      }
      if (field.min !== undefined && value < field.min) return [{ loc, msg: `Input should be greater than or equal to ${field.min}`, type: "greater_than_equal" }]
      if (field.max !== undefined && value > field.max) return [{ loc, msg: `Input should be less than or equal to ${field.max}`, type: "less_than_equal" }]
      return []
    }
    case "boolean":
      return typeof value === "boolean" ? [] : [{ loc, msg: "Input should be a valid boolean", type: "bool_type" }]
    case "object":
      return typeof value === "object" && value !== null && !Array.isArray(value)
        ? check(field.fields, value as Record<string, unknown>, loc)
        : [{ loc, msg: "Input should be a valid dictionary", type: "dict_type" }]
    case "array":
      return Array.isArray(value)
        ? value.flatMap((item, i) => fieldProblems(field.items, item, [...loc, i]))
        : [{ loc, msg: "Input should be a valid list", type: "list_type" }]
    case "oneOf": {
      const each = field.options.map((option) => fieldProblems(option, value, loc))
      return each.some((problems) => problems.length === 0) ? [] : each.flat()
    }
  }
}

/** Every problem of `input` against `schema`; none when it is valid. */
export const check = (schema: Schema, input: Readonly<Record<string, unknown>>, loc: ReadonlyArray<string | number> = ["body"]): ReadonlyArray<Problem> => [
  ...Object.keys(input).filter((name) => schema[name] === undefined).map((name) => ({ loc: [...loc, name], msg: "Extra inputs are not permitted", type: "extra_forbidden" })),
  ...Object.entries(schema).flatMap(([name, field]) =>
    input[name] === undefined
      ? field.required === true ? [{ loc: [...loc, name], msg: "Field required", type: "missing" }] : []
      : fieldProblems(field, input[name], [...loc, name])
  )
]

/** Whether `value` is a JSON object (not an array, not null). */
export const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)
