/**
 * The models a deployment serves, by the id clients put in `model`.
 */
import { Context, Layer, Option } from "effect"
import type { UpstreamJob } from "../domain/Task.js"
import * as AlphaImage2 from "./AlphaImage2.js"
import * as BetaImagine from "./BetaImagine.js"
import * as CanvasVideo from "./CanvasVideo.js"
import * as Clip3 from "./Clip3.js"
import * as ImageModels from "./ImageModels.js"
import type { ModelSpec } from "./ModelSpec.js"
import * as Motion from "./Motion.js"

/** The model catalog. */
export class ModelCatalog extends Context.Tag("@mediagate/core/ModelCatalog")<ModelCatalog, {
  readonly models: ReadonlyArray<ModelSpec>
  readonly find: (id: string) => Option.Option<ModelSpec>
  /**
   * The spec of the model a job runs: its model with its mode where the catalog has that
   * (`alpha-image-2/image-to-image`), else its model (`beta-imagine/text-to-video`, and
   * `motion-1.5-pro` after a fallback or `clip3_fast` for clip3 r2v, which the job runs
   * instead of the model asked for).
   */
  readonly forJob: (job: Pick<UpstreamJob, "model" | "mode">) => Option.Option<ModelSpec>
}>() {}

/** Every model of the spec, in the spec's order. */
export const allModels: ReadonlyArray<ModelSpec> = [
  AlphaImage2.textToImage,
  AlphaImage2.imageToImage,
  BetaImagine.textToImageLite,
  BetaImagine.textToImageStandard,
  BetaImagine.textToImagePro,
  BetaImagine.textToVideo,
  BetaImagine.imageToVideo,
  Clip3.clip3,
  Clip3.clip3Fast,
  Clip3.clip3Lite,
  Motion.motion20,
  Motion.motion20Fast,
  Motion.motion15Pro,
  ...CanvasVideo.models,
  ...ImageModels.compactModels,
  ...ImageModels.canvasModels,
  ...ImageModels.dreamModels
]

/** A catalog of the given models. */
export const make = (models: ReadonlyArray<ModelSpec>): Context.Tag.Service<ModelCatalog> => {
  const byId = new Map(models.map((model) => [model.id, model]))
  const find = (id: string) => Option.fromNullable(byId.get(id))
  return { models, find, forJob: (job) => Option.orElse(find(`${job.model}/${job.mode}`), () => find(job.model)) }
}

/** The catalog of every known model. */
export const layer: Layer.Layer<ModelCatalog> = Layer.succeed(ModelCatalog, make(allModels))
