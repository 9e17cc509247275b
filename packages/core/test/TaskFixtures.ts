/** What the state machine's and the lifecycle's tests build their tasks from. */
import type { Task } from "../src/index.js"

/** An alpha-image-2 text-to-image job of one image, run synchronously or not. */
export const job = (sync: boolean): Task.UpstreamJob => ({
  model: "alpha-image-2",
  mode: "text-to-image",
  output: "image",
  prompt: "a lighthouse",
  n: 1,
  ratio: null,
  resolution: "1k",
  width: null,
  height: null,
  duration: null,
  imageUrls: [],
  params: {},
  fallbackModel: null,
  sync,
  priceMicroUsd: 20_000,
  adjustments: []
})
