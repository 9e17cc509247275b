/**
 * Wake-ups: the use cases tell the engine that new work is due, and the write path tells the
 * callback deliverer that a callback is owed, so neither waits for its next periodic scan.
 */
import { Context, Effect, Layer } from "effect"

/** A nudge to the engine. Optional: without it the engine finds the work at its next poll. */
export class TaskWakeup extends Context.Tag("@mediagate/core/TaskWakeup")<TaskWakeup, {
  readonly wake: Effect.Effect<void>
  /** When the wake-up is an engine's: whether its loop is running (not stopping, not dead), for readiness. */
  readonly running?: Effect.Effect<boolean>
}>() {}

/** A nudge to the callback deliverer. Optional: without it the deliverer finds the callback at its next scan. */
export class CallbackWakeup extends Context.Tag("@mediagate/core/CallbackWakeup")<CallbackWakeup, {
  readonly wake: Effect.Effect<void>
}>() {}

/** A wakeup that does nothing, for compositions without an engine. */
export const layerNoop: Layer.Layer<TaskWakeup> = Layer.succeed(TaskWakeup, { wake: Effect.void })
