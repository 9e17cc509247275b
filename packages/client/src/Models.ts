/**
 * Model ids and the input each takes, derived from the catalog in @mediagate/core.
 *
 * Every model module of core exports its specs typed `ModelSpec<Id, S>`: the literal id
 * clients put in `model` and the type of the input Schema the server validates with. The
 * union of those spec types gives `ModelId`, and a model's input type is its Schema's
 * encoded (wire) type, so every field name, literal, value type and required field is
 * checked at compile time for all 37 models. What a Schema cannot say (filters such as
 * ranges and URL counts, rules across fields, pass-through fields of the models that take
 * them) is checked by the server, whose 400 names the field and the rule.
 */
import type { AlphaImage2, Clip3, Motion } from "@mediagate/core"
import { BetaImagine, CanvasVideo, ImageModels } from "@mediagate/core"
import type { Schema } from "effect"

/** The spec type of every model of core's catalog (`ModelCatalog.allModels`). */
export type CatalogSpec =
  | typeof AlphaImage2.textToImage
  | typeof AlphaImage2.imageToImage
  | typeof BetaImagine.textToImageLite
  | typeof BetaImagine.textToImageStandard
  | typeof BetaImagine.textToImagePro
  | typeof BetaImagine.textToVideo
  | typeof BetaImagine.imageToVideo
  | typeof Clip3.clip3
  | typeof Clip3.clip3Fast
  | typeof Clip3.clip3Lite
  | typeof Motion.motion20
  | typeof Motion.motion20Fast
  | typeof Motion.motion15Pro
  | typeof CanvasVideo.models[number]
  | typeof ImageModels.compactModels[number]
  | typeof ImageModels.canvasModels[number]
  | typeof ImageModels.dreamModels[number]

/** Every model id of core's catalog (GET /api/v1/models lists the same 37). */
export type ModelId = CatalogSpec["id"]

/** The input `model` takes: the encoded type of its input Schema. */
export type InputOf<M extends string> = Schema.Schema.Encoded<Extract<CatalogSpec, { readonly id: M }>["inputSchema"]>

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
