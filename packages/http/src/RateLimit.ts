/**
 * Per-key rate limits: a token bucket per API key, `perSecond` requests a second with
 * bursts of up to `burst`. The buckets are kept in this process (`layer`), or for every node
 * on the shared store (`layerShared`: `SharedLimits`, PostgreSQL's `PgLimits`), so that a key
 * gets that much from the whole cluster; when the shared store fails, the node falls back
 * to its own buckets (fail open, logged). A request over the limit answers 429 in the envelope, with `Retry-After` (seconds)
 * and the IETF draft's `RateLimit-Policy` and `RateLimit` fields
 * (draft-ietf-httpapi-ratelimit-headers): `"per-key";q=<perSecond>;w=1` and
 * `"per-key";r=0;t=<seconds until a request is allowed>`.
 *
 * Buckets are checked before authentication, so a flood with one wrong key is limited too.
 * They are keyed by a fixed-size digest of the presented key, never the key itself: a
 * presented key may be any 16 KB string, and thousands of distinct ones must not be kept.
 * A bucket idle long enough to be full again is dropped, and at most `maxKeys` are kept
 * (`TokenBuckets`). Times come from the Clock.
 */
import { SharedLimits } from "@mediagate/core"
import { Clock, Context, Duration, Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import * as TokenBuckets from "./TokenBuckets.js"

export interface Options {
  /** Requests a second each key may make, on average. */
  readonly perSecond: number
  /** Requests a key may make at once after being idle. Default twice `perSecond`. */
  readonly burst?: number
  /** Buckets kept at most. Default 10,000 (about 1.5 MB). */
  readonly maxKeys?: number
}

/** What a request may do: go on, or wait `retryAfterMs`. */
export type Decision = TokenBuckets.Decision

export class RateLimit extends Context.Tag("@mediagate/http/RateLimit")<RateLimit, {
  readonly perSecond: number
  readonly burst: number
  /** Takes one request from the key's bucket. */
  readonly take: (key: string) => Effect.Effect<Decision>
  /** Buckets held now. */
  readonly size: Effect.Effect<number>
}>() {}

/**
 * A fixed-size name for a presented key (128 bits of its SHA-256): what buckets and
 * held-request counts are keyed by.
 */
export const keyDigest = (key: string): string => createHash("sha256").update(key).digest("base64url").slice(0, 22)

export const make = (options: Options): Context.Tag.Service<RateLimit> => {
  const perSecond = options.perSecond
  const burst = options.burst ?? perSecond * 2
  const buckets = TokenBuckets.make({ perSecond, burst, maxKeys: options.maxKeys ?? 10_000 })
  return {
    perSecond,
    burst,
    take: (key) => Effect.map(Clock.currentTimeMillis, (now) => buckets.take(keyDigest(key), now)),
    size: Effect.sync(buckets.size)
  }
}

/** Rate limits for the API (see `MediagateHttp.httpApp`), kept in this process. */
export const layer = (options: Options): Layer.Layer<RateLimit> => Layer.sync(RateLimit, () => make(options))

/** Settings of `makeShared`. */
export interface SharedOptions extends Options {
  /** Longest wait for the shared store before a take falls back to this node's bucket. Default 1 s. */
  readonly timeout?: Duration.DurationInput
}

/**
 * Buckets shared by every node (`SharedLimits`). A key the store refused is refused by this
 * node without asking again until its Retry-After. A take the store cannot answer (down, or
 * slower than `timeout`) is taken from this node's own bucket instead: the API stays up,
 * limited per node, while the database is away; a warning is logged once until the store
 * answers again.
 */
export const makeShared = (options: SharedOptions, shared: Context.Tag.Service<SharedLimits.SharedLimits>): Context.Tag.Service<RateLimit> => {
  const local = make(options)
  const rate = { perSecond: local.perSecond, burst: local.burst }
  const timeout = options.timeout ?? Duration.seconds(1)
  const maxKeys = options.maxKeys ?? 10_000
  // Keys the store refused, until their Retry-After: no node can give a bucket tokens sooner
  // than its refill does, so these are refused here without a round trip. A key sending far
  // past its limit would otherwise cost a write on the database every node shares for each
  // request. Oldest first; at most `maxKeys`.
  const refusedUntil = new Map<string, number>()
  let degraded = false
  const fromStore = (key: string, digest: string, now: number) =>
    shared.take(digest, rate).pipe(
      Effect.timeoutFail({ duration: timeout, onTimeout: () => "timed out" as const }),
      Effect.tap((decision) => {
        if (decision._tag === "Limited") {
          refusedUntil.set(digest, now + decision.retryAfterMs)
          if (refusedUntil.size > maxKeys) refusedUntil.delete(refusedUntil.keys().next().value!)
        }
        if (!degraded) return Effect.void
        degraded = false
        return Effect.logInfo("rate limit: the shared buckets answer again")
      }),
      Effect.catchAll((error) =>
        Effect.suspend(() => {
          const warn = degraded
            ? Effect.void
            : Effect.logWarning("rate limit: the shared buckets cannot be reached; limiting with this node's buckets", error)
          degraded = true
          return Effect.zipRight(warn, local.take(key))
        })
      )
    )
  return {
    perSecond: local.perSecond,
    burst: local.burst,
    take: (key) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const digest = keyDigest(key)
        const until = refusedUntil.get(digest)
        if (until !== undefined) {
          if (now < until) return Effect.succeed<Decision>({ _tag: "Limited", retryAfterMs: until - now })
          refusedUntil.delete(digest)
        }
        return fromStore(key, digest, now)
      }),
    size: local.size
  }
}

/** Rate limits for the API kept for every node on the shared store (`makeShared`). */
export const layerShared = (options: SharedOptions): Layer.Layer<RateLimit, never, SharedLimits.SharedLimits> =>
  Layer.effect(RateLimit, Effect.map(SharedLimits.SharedLimits, (shared) => makeShared(options, shared)))

/** The headers of a 429. */
export const limitedHeaders = (limit: Context.Tag.Service<RateLimit>, retryAfterMs: number): Record<string, string> => {
  const seconds = retryAfterSeconds(retryAfterMs)
  return {
    "retry-after": String(seconds),
    "ratelimit-policy": `"per-key";q=${limit.perSecond};w=1`,
    ratelimit: `"per-key";r=0;t=${seconds}`
  }
}

/** A wait in whole seconds for `Retry-After`, at least 1. */
export const retryAfterSeconds = (retryAfterMs: number): number => Math.max(1, Math.ceil(retryAfterMs / 1000))
