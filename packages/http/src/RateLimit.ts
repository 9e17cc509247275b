/**
 * Per-key rate limits: a token bucket per API key, `perSecond` requests a second with
 * bursts of up to `burst`, kept in this process (with several nodes, each node allows that
 * much). A request over the limit answers 429 in the envelope, with `Retry-After` (seconds)
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
import { Clock, Context, Effect, Layer } from "effect"
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

/** Rate limits for the API (see `MediagateHttp.httpApp`). */
export const layer = (options: Options): Layer.Layer<RateLimit> => Layer.sync(RateLimit, () => make(options))

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
