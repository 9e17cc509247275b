/**
 * Helpers shared by the model modules.
 */
import { Either } from "effect"
import type { Schema } from "effect"
import type { ValidationError } from "../domain/Errors.js"
import type { Adjustment } from "../domain/Task.js"
import type { DecodeOptions } from "./Fields.js"
import { decodeInput } from "./Fields.js"
import type { DraftJob, ModelSpec, Normalized } from "./ModelSpec.js"

/** A draft job with the fields most models leave at their neutral value. */
export const draft = (
  fields: Partial<DraftJob> & Pick<DraftJob, "model" | "mode" | "output" | "prompt">
): DraftJob => ({
  n: 1,
  ratio: null,
  resolution: null,
  width: null,
  height: null,
  duration: null,
  imageUrls: [],
  params: {},
  fallbackModel: null,
  sync: false,
  adjustments: [],
  ...fields
})

/** Records a silent change of a field the client set; nothing when it did not set it or nothing changed. */
export const adjusted = (
  field: string,
  requested: unknown,
  applied: unknown,
  reason: string
): ReadonlyArray<Adjustment> =>
  requested === undefined || requested === applied ? [] : [{ field, requested, applied, reason }]

/** The fields of `decoded` that the schema does not name: pass-through parameters. */
export const extras = (
  decoded: Readonly<Record<string, unknown>>,
  known: ReadonlyArray<string>
): Record<string, unknown> =>
  Object.fromEntries(Object.entries(decoded).filter(([key]) => !known.includes(key)))

/** A spec per id of `Id`, each typed with its own id (distributes over a union of ids). */
export type SpecPerId<Id extends string, S extends Schema.Schema.Any> = Id extends string ? ModelSpec<Id, S> : never

/**
 * The specs of an id list, in its order, each typed with its own id and Schema. `make`
 * returns a spec whose id is the id it is given, so each element's type is that id's spec.
 */
export const specsOf = <const Id extends string, S extends Schema.Schema.Any>(
  ids: ReadonlyArray<Id>,
  make: (id: Id) => ModelSpec<Id, S>
): ReadonlyArray<SpecPerId<Id, S>> => ids.map(make) as unknown as ReadonlyArray<SpecPerId<Id, S>>

/**
 * The `normalize` of a model whose job follows from its decoded input alone: `input` decoded
 * with the model's schema (`decodeInput`, with `options` fixed or read from the raw input),
 * then made a job by `toJob`.
 */
export const normalizeWith = <A, I>(
  modelId: string,
  schema: Schema.Schema<A, I>,
  toJob: (decoded: A) => DraftJob,
  options: DecodeOptions | ((raw: Readonly<Record<string, unknown>>) => DecodeOptions) = {}
) =>
(input: unknown): Either.Either<Normalized, ValidationError> => {
  const raw = typeof input === "object" && input !== null ? (input as Record<string, unknown>) : {}
  const decodeOptions = typeof options === "function" ? options(raw) : options
  return Either.map(decodeInput(modelId, schema, input, decodeOptions), (decoded) => ({ job: toJob(decoded) }))
}
