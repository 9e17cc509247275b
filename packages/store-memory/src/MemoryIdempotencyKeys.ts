/**
 * Submit's Idempotency-Keys in memory (core's implementation, beside the other memory
 * backends): they end with the process.
 */
import { IdempotencyKeys } from "@mediagate/core"
import type { Layer } from "effect"

/** The memory keys. */
export const make = IdempotencyKeys.makeMemory

/** The memory keys layer. */
export const layer: Layer.Layer<IdempotencyKeys.IdempotencyKeys> = IdempotencyKeys.layerMemory
