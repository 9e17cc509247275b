/**
 * Wake-ups: the use cases tell the engine that new work is due, and the write path tells the
 * callback deliverer that a callback is owed, so neither waits for its next periodic scan.
 * A host without an engine or a deliverer says so with the `layerNone` of each.
 */
import { Context, Effect, Layer } from "effect"

/** A nudge to the engine: without one (`TaskWakeup.layerNone`) the engine finds the work at its next poll. */
export class TaskWakeup extends Context.Tag("@mediagate/core/TaskWakeup")<TaskWakeup, {
  readonly wake: Effect.Effect<void>
  /** When the wake-up is an engine's: whether its loop is running (not stopping, not dead), for readiness. */
  readonly running?: Effect.Effect<boolean>
}>() {
  /** A wake-up that does nothing, for a composition without an engine in this process. */
  static readonly layerNone: Layer.Layer<TaskWakeup> = Layer.succeed(this, { wake: Effect.void })
}

/** A nudge to the callback deliverer: without one (`CallbackWakeup.layerNone`) it finds the callback at its next scan. */
export class CallbackWakeup extends Context.Tag("@mediagate/core/CallbackWakeup")<CallbackWakeup, {
  readonly wake: Effect.Effect<void>
}>() {
  /** A wake-up that does nothing, for a composition without a deliverer in this process. */
  static readonly layerNone: Layer.Layer<CallbackWakeup> = Layer.succeed(this, { wake: Effect.void })
}
