/**
 * The HTTP edge's limits kept where every node on one database sees them, so that they hold
 * for the cluster rather than per process: the per-key token bucket of the rate limit and
 * the places of held requests (events streams, `?wait=`). `@mediagate/http` applies them
 * (`RateLimit.layerShared`, `HeldRequests.layerShared`), falling back to its in-process
 * counts when the store fails; `PgLimits` in @mediagate/store-sql keeps them on PostgreSQL.
 * Keys are named by their digest only. Times are whole Clock milliseconds.
 */
import { Context } from "effect"
import type { Effect } from "effect"
import type { StoreError } from "../domain/Errors.js"

/** A token bucket's settings: `perSecond` tokens regained a second, at most `burst` held. */
export interface Rate {
  readonly perSecond: number
  readonly burst: number
}

/** What a request may do: go on, or wait `retryAfterMs`. */
export type Decision =
  | { readonly _tag: "Allowed"; readonly remaining: number }
  | { readonly _tag: "Limited"; readonly retryAfterMs: number }

/**
 * What a take of `count` tokens did: `granted` of them taken (`count`, or as many whole
 * tokens as the bucket had), and the `tokens` left (below 1 when it could not give them all).
 */
export interface Taken {
  readonly granted: number
  readonly tokens: number
}

/** The caps on held requests: per key, and over every key. */
export interface Caps {
  readonly perKey: number
  readonly total: number
}

/** Which cap refused a held request. */
export type Refusal = "key" | "total"

/** A place taken (`id`, to give back), or the cap that is full. */
export type Hold =
  | { readonly _tag: "Held"; readonly id: string }
  | { readonly _tag: "Refused"; readonly cap: Refusal }

/** The edge's limits over every node. */
export class SharedLimits extends Context.Tag("@mediagate/core/SharedLimits")<SharedLimits, {
  /**
   * Takes `count` tokens from the bucket of the key of `digest`, or as many whole ones as it
   * has: one round trip for several requests of a key at once.
   */
  readonly take: (digest: string, rate: Rate, count: number) => Effect.Effect<Taken, StoreError>
  /**
   * How many nodes share the store, this one included (at least 1), as last counted: nodes
   * seen recently. Answers at once, without asking the store: it is what a node divides the
   * limits by while the store cannot be reached.
   */
  readonly nodes: Effect.Effect<number>
  /**
   * Takes a place for a held request of the key of `digest` under `caps`. The place is this
   * node's: it lapses if the node stops renewing it (a node that died gives its places back).
   */
  readonly hold: (digest: string, caps: Caps) => Effect.Effect<Hold, StoreError>
  /** Gives back a place `hold` took. */
  readonly release: (id: string) => Effect.Effect<void, StoreError>
}>() {}
