/**
 * Wake-ups: the use cases tell the engine that new work is due, and the write path tells the
 * callback deliverer that a callback is owed (or hands it the callback, when it has a slot
 * free), so neither waits for its next periodic scan.
 * A host without an engine or a deliverer says so with the `layerNone` of each.
 */
import { Context, Effect, Layer } from "effect"
import type { DueCallback } from "./TaskStore.js"

/** A nudge to the engine: without one (`TaskWakeup.layerNone`) the engine finds the work at its next poll. */
export class TaskWakeup extends Context.Tag("@mediagate/core/TaskWakeup")<TaskWakeup, {
  readonly wake: Effect.Effect<void>
  /** When the wake-up is an engine's: whether its loop is running (not stopping, not dead), for readiness. */
  readonly running?: Effect.Effect<boolean>
}>() {
  /** A wake-up that does nothing, for a composition without an engine in this process. */
  static readonly layerNone: Layer.Layer<TaskWakeup> = Layer.succeed(this, { wake: Effect.void })
}

/**
 * A slot of this process's deliverer, taken for a callback about to be written
 * (`CallbackWakeup.reserve`).
 */
export interface CallbackSlot {
  /** Until when the callback is written leased to this deliverer (`CallbackRow.leaseUntil`). */
  readonly leaseUntil: number
  /** The callback, written with that lease (and its task as written): sent at once, without a claim. */
  readonly deliver: (callback: DueCallback) => Effect.Effect<void>
  /** The write did not happen: the slot is free again. */
  readonly release: Effect.Effect<void>
}

/** A nudge to the callback deliverer: without one (`CallbackWakeup.layerNone`) it finds the callback at its next scan. */
export class CallbackWakeup extends Context.Tag("@mediagate/core/CallbackWakeup")<CallbackWakeup, {
  readonly wake: Effect.Effect<void>
  /**
   * A deliverer in this process with a slot free and no backlog takes the slot for a callback
   * due at once that is about to be written; none otherwise (then the write wakes it, and it
   * claims the callback). The write path then gives it the callback once written, or gives
   * the slot back.
   */
  readonly reserve?: Effect.Effect<CallbackSlot | undefined>
}>() {
  /** A wake-up that does nothing, for a composition without a deliverer in this process. */
  static readonly layerNone: Layer.Layer<CallbackWakeup> = Layer.succeed(this, { wake: Effect.void })
}
