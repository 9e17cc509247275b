/**
 * Helpers shared by the model modules.
 */
import type { Adjustment } from "../domain/Task.js"
import type { Schema } from "effect"
import type { DraftJob, ModelSpec } from "./ModelSpec.js"

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
