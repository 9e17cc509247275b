/**
 * The public description of a model: what GET /api/v1/models returns and docs/models.md shows.
 */
import { Duration, Either, JSONSchema, Schema } from "effect"
import type { ModelSpec } from "./ModelSpec.js"
import type { PriceTable } from "./Pricing.js"
import { defaultPrices, pricedInputs } from "./Pricing.js"

/** One model as the catalog endpoint describes it. */
export const ModelInfo = Schema.Struct({
  id: Schema.String,
  family: Schema.String,
  output: Schema.Literal("image", "video"),
  modes: Schema.Array(Schema.String),
  /** JSON Schema (draft-07) of `input`, generated from the model's Effect Schema. */
  inputSchema: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  /** Whether fields the schema does not name pass through to the upstream. */
  passThrough: Schema.Boolean,
  defaults: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  limits: Schema.Array(Schema.String),
  priceRule: Schema.String,
  /**
   * Where the prices come from: the spec's published prices, or the operator's price table
   * (the documented defaults unless the operator replaced them).
   */
  priceSource: Schema.Literal("spec", "price table"),
  /** What the examples cost, at each resolution and mode the model takes, in USD. */
  prices: Schema.Array(Schema.Struct({
    input: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
    usd: Schema.Number
  })),
  /** Seconds after submission at which an unfinished task becomes TIMEOUT. */
  deadlineSeconds: Schema.Int,
  examples: Schema.Array(Schema.Struct({
    input: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
    type: Schema.Literal("image", "video"),
    count: Schema.Int
  }))
}).annotations({ identifier: "ModelInfo" })
export type ModelInfo = typeof ModelInfo.Type

/** The JSON Schema of a model's input, with `additionalProperties` telling whether unknown fields pass. */
export const inputJsonSchema = (spec: ModelSpec): Record<string, unknown> => {
  const { $schema: _, ...schema } = JSONSchema.make(spec.inputSchema as Schema.Schema<unknown, unknown>) as unknown as Record<string, unknown>
  return { ...withoutTitles(schema) as Record<string, unknown>, additionalProperties: spec.passThrough }
}

/**
 * The JSON Schema without the `title`s Schema derives from code (`between(4, 15)`,
 * `minItems(1)`): they describe our implementation, not the field; descriptions stay.
 */
const withoutTitles = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(withoutTitles)
    : typeof value === "object" && value !== null
    ? Object.fromEntries(Object.entries(value).filter(([key]) => key !== "title").map(([key, item]) => [key, withoutTitles(item)]))
    : value

/** The inputs of `pricedInputs` that priced, once each, in USD. */
const examplePrices = (spec: ModelSpec, table: PriceTable): ModelInfo["prices"] => {
  const seen = new Set<string>()
  return pricedInputs(spec, table).flatMap(({ input, price }) => {
    const key = JSON.stringify(input)
    if (Either.isLeft(price) || seen.has(key)) return []
    seen.add(key)
    return [{ input, usd: price.right / 1_000_000 }]
  })
}

/** Describes a model, with its prices from `table` (the documented defaults unless given). */
export const describe = (spec: ModelSpec, table: PriceTable = defaultPrices): ModelInfo => ({
  id: spec.id,
  family: spec.family,
  output: spec.output,
  modes: spec.modes,
  inputSchema: inputJsonSchema(spec),
  passThrough: spec.passThrough,
  defaults: spec.defaults,
  limits: spec.limits,
  priceRule: spec.priceRule,
  priceSource: spec.priceRule.includes("(price table)") ? "price table" : "spec",
  prices: examplePrices(spec, table),
  deadlineSeconds: Duration.toSeconds(spec.deadline),
  examples: spec.examples.map((example) => ({ ...example }))
})
