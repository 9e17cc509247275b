/**
 * Lets the use cases tell the engine that new work is due, so it need not wait for its next poll.
 */
import { Context, Effect, Layer } from "effect"

/** A nudge to the engine. Optional: without it the engine finds the work at its next poll. */
export class TaskWakeup extends Context.Tag("@mediagate/core/TaskWakeup")<TaskWakeup, {
  readonly wake: Effect.Effect<void>
}>() {}

/** A wakeup that does nothing, for compositions without an engine. */
export const layerNoop: Layer.Layer<TaskWakeup> = Layer.succeed(TaskWakeup, { wake: Effect.void })
