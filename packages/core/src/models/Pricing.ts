/**
 * Prices in integer micro-USD (1 USD = 1,000,000). The spec publishes alpha-image-2 and
 * beta-imagine prices; the rest come from this table, which a host may replace.
 */
import { Context, Either, JSONSchema } from "effect"
import type { Schema } from "effect"
import type { ModelSpec } from "./ModelSpec.js"

/** Unpublished prices, per model id. */
export interface PriceTable {
  /** clip3 tiers: micro-USD per second of video, by resolution ("720p" standard, "1080p", "4k"). */
  readonly clip3PerSecond: Readonly<Record<string, Readonly<Record<string, number>>>>
  /** motion-*, canvas-video-*: micro-USD per second of video. */
  readonly videoPerSecond: Readonly<Record<string, number>>
  /** compact-image, canvas and dream: micro-USD per image, by resolution. */
  readonly imagePerImage: Readonly<Record<string, Readonly<Record<string, number>>>>
}

const tiered = (k1: number, k2: number, k4: number) => ({ "1k": k1, "2k": k2, "4k": k4 })

/** The documented defaults (docs/models.md). */
export const defaultPrices: PriceTable = {
  clip3PerSecond: {
    clip3: { "720p": 50_000, "1080p": 75_000, "4k": 100_000 },
    clip3_fast: { "720p": 25_000, "1080p": 37_500, "4k": 50_000 },
    clip3_lite: { "720p": 12_500 }
  },
  videoPerSecond: {
    "motion-2.0": 40_000,
    "motion-2.0-fast": 20_000,
    "motion-1.5-pro": 30_000,
    "motion-2.0-pro": 60_000,
    "canvas-video-3.5-pro": 80_000,
    "canvas-video-3.0-pro": 60_000,
    "canvas-video-3.0": 40_000,
    "canvas-video-2.0-pro": 30_000,
    "canvas-video-2.0": 20_000
  },
  imagePerImage: {
    "compact-image": tiered(10_000, 10_000, 10_000),
    "compact-image-2": tiered(20_000, 30_000, 50_000),
    "compact-image-pro": tiered(40_000, 60_000, 100_000),
    "canvas-5.0-preview": tiered(40_000, 60_000, 80_000),
    "canvas-4.6": tiered(35_000, 50_000, 70_000),
    "canvas-4.5": tiered(30_000, 45_000, 60_000),
    "canvas-4.1": tiered(25_000, 40_000, 55_000),
    "canvas-4.0": tiered(25_000, 35_000, 50_000),
    "canvas-3.1": tiered(20_000, 30_000, 45_000),
    "canvas-3.0": tiered(20_000, 30_000, 40_000),
    "canvas-2.1": tiered(15_000, 25_000, 35_000),
    "canvas-2.0-pro": tiered(15_000, 25_000, 35_000),
    "canvas-2.0": tiered(10_000, 20_000, 30_000),
    "canvas-1.4": tiered(5_000, 10_000, 15_000),
    "canvas-xl-pro": tiered(10_000, 20_000, 30_000),
    "dream-5-lite": tiered(10_000, 15_000, 25_000),
    "dream-4.5": tiered(30_000, 40_000, 60_000),
    "dream-4": tiered(25_000, 35_000, 50_000)
  }
}

/** The price table in force; a host provides its own with `Effect.provideService` or a layer. */
export class Prices extends Context.Reference<Prices>()("@mediagate/core/Prices", {
  defaultValue: (): PriceTable => defaultPrices
}) {}

/**
 * Looks a price up. A table without the entry is a host configuration bug that `validate`
 * reports when the TaskService is built, so this throw is not reached by a request.
 */
export const lookup = (table: Readonly<Record<string, number>> | undefined, key: string, what: string): number => {
  const price = table?.[key]
  if (price === undefined) throw new Error(`price table has no entry for ${what} ${key}`)
  return price
}

/** The values a model's input schema allows for `field` (its JSON Schema enum), or none. */
const enumValues = (model: ModelSpec, field: string): ReadonlyArray<unknown> => {
  const schema = JSONSchema.make(model.inputSchema as Schema.Schema<unknown, unknown>) as {
    readonly properties?: Readonly<Record<string, { readonly enum?: ReadonlyArray<unknown> }>>
  }
  return schema.properties?.[field]?.enum ?? []
}

/** A model's input as priced: the input, and what it costs (or why it cannot be priced). */
export interface PricedInput {
  readonly input: Readonly<Record<string, unknown>>
  readonly price: Either.Either<number, string>
}

/**
 * Each of a model's examples with every resolution and mode its schema allows (and with
 * neither), normalised and priced with `table`: this reaches every model a job can run as
 * (clip3 r2v runs as clip3_fast) and every resolution it is priced by. Inputs a rule refuses
 * are left out.
 */
export const pricedInputs = (model: ModelSpec, table: PriceTable): ReadonlyArray<PricedInput> => {
  const priced: Array<PricedInput> = []
  const variants = (field: string) => [undefined, ...enumValues(model, field)]
  for (const example of model.examples) {
    for (const resolution of variants("resolution")) {
      for (const mode of variants("mode")) {
        const input = {
          ...example.input,
          ...(resolution === undefined ? {} : { resolution }),
          ...(mode === undefined ? {} : { mode })
        }
        const normalized = model.normalize(input)
        if (Either.isLeft(normalized)) continue
        try {
          priced.push({ input, price: Either.right(model.price(normalized.right.job, table)) })
        } catch (error) {
          priced.push({ input, price: Either.left(error instanceof Error ? error.message : String(error)) })
        }
      }
    }
  }
  return priced
}

/**
 * Checks that `table` prices every job the models can produce (`pricedInputs`). Returns what
 * is missing, so that a host's incomplete table stops the service at start instead of
 * failing a submit.
 */
export const validate = (models: ReadonlyArray<ModelSpec>, table: PriceTable): Either.Either<void, string> => {
  for (const model of models) {
    for (const { price } of pricedInputs(model, table)) {
      if (Either.isLeft(price)) return Either.left(`${model.id}: ${price.left}`)
    }
  }
  return Either.right(undefined)
}
