/**
 * The models a deployment serves, by the id clients put in `model`.
 */
import { Context, Layer, Option } from "effect"
import * as AlphaImage2 from "./AlphaImage2.js"
import type { ModelSpec } from "./ModelSpec.js"

/** The model catalog. */
export class ModelCatalog extends Context.Tag("@mediagate/core/ModelCatalog")<ModelCatalog, {
  readonly models: ReadonlyArray<ModelSpec>
  readonly find: (id: string) => Option.Option<ModelSpec>
}>() {}

/** Every model this version of mediagate knows. */
export const allModels: ReadonlyArray<ModelSpec> = [AlphaImage2.textToImage, AlphaImage2.imageToImage]

/** A catalog of the given models. */
export const make = (models: ReadonlyArray<ModelSpec>): Context.Tag.Service<ModelCatalog> => {
  const byId = new Map(models.map((model) => [model.id, model]))
  return { models, find: (id) => Option.fromNullable(byId.get(id)) }
}

/** The catalog of every known model. */
export const layer: Layer.Layer<ModelCatalog> = Layer.succeed(ModelCatalog, make(allModels))
