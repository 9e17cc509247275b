/**
 * Model ids and the input each takes, as far as the catalog in @mediagate/core types them.
 *
 * Core describes every model as a `ModelSpec` whose `inputSchema` is `Schema.Schema.Any`
 * and whose `id` is `string`: the catalog is typed for the server, which validates at run
 * time, not for callers. Only alpha-image-2 exports its input Schemas, so only those two
 * models get an input type derived from their Schema; every other model takes the
 * catalog's encoded input (`prompt` required, the rest checked by the server, whose 400
 * names the field and the rule). The ids come from core's exported id lists wherever core
 * exports one.
 */
import type { AlphaImage2, Api, Clip3, Motion } from "@mediagate/core"
import { BetaImagine, CanvasVideo, ImageModels } from "@mediagate/core"
import type { Schema } from "effect"

/** The inputs core types with a Schema: model id to the Schema's encoded (wire) type. */
export interface SchemaTypedInputs {
  readonly "alpha-image-2/text-to-image": Schema.Schema.Encoded<typeof AlphaImage2.TextToImageInput>
  readonly "alpha-image-2/image-to-image": Schema.Schema.Encoded<typeof AlphaImage2.ImageToImageInput>
}

/** The catalog's encoded input: the submit body's `input` with the prompt every model requires. */
export type CatalogInput = Api.SubmitRequest["input"] & { readonly prompt: string }

/** Every model id of core's catalog (GET /api/v1/models lists the same 37). */
export type ModelId =
  | keyof SchemaTypedInputs
  | `beta-imagine/text-to-image-${BetaImagine.ImageTier}`
  | "beta-imagine/text-to-video"
  | "beta-imagine/image-to-video"
  | Clip3.Tier
  | Motion.Tier
  | typeof CanvasVideo.ids[number]
  | typeof ImageModels.compactIds[number]
  | typeof ImageModels.canvasIds[number]
  | typeof ImageModels.dreamIds[number]

/** The input `model` takes: its Schema's encoded type when core has one, else the catalog's. */
export type InputOf<M extends string> = M extends keyof SchemaTypedInputs ? SchemaTypedInputs[M] : CatalogInput

const tiers = Object.keys(BetaImagine.imageTiers) as ReadonlyArray<BetaImagine.ImageTier>

/** Every model id of `ModelId`, in the catalog's order; the test compares it with the server's list. */
export const modelIds: ReadonlyArray<ModelId> = [
  "alpha-image-2/text-to-image",
  "alpha-image-2/image-to-image",
  ...tiers.map((tier) => `beta-imagine/text-to-image-${tier}` as const),
  "beta-imagine/text-to-video",
  "beta-imagine/image-to-video",
  ...(["clip3", "clip3_fast", "clip3_lite"] satisfies ReadonlyArray<Clip3.Tier>),
  ...(["motion-2.0", "motion-2.0-fast", "motion-1.5-pro"] satisfies ReadonlyArray<Motion.Tier>),
  ...CanvasVideo.ids,
  ...ImageModels.compactIds,
  ...ImageModels.canvasIds,
  ...ImageModels.dreamIds
]

/** Whether `id` is a model of core's catalog. */
export const isModelId = (id: string): id is ModelId => (modelIds as ReadonlyArray<string>).includes(id)

