/**
 * Per-key rate limits: a token bucket per API key, `perSecond` requests a second with
 * bursts of up to `burst`, kept in this process (with several nodes, each node allows that
 * much). A request over the limit answers 429 in the envelope, with `Retry-After` (seconds)
 * and the IETF draft's `RateLimit-Policy` and `RateLimit` fields
 * (draft-ietf-httpapi-ratelimit-headers): `"per-key";q=<perSecond>;w=1` and
 * `"per-key";r=0;t=<seconds until a request is allowed>`.
 *
 * Buckets are keyed by the presented bearer key, checked before authentication, so a flood
 * with one wrong key is limited too; at most `maxKeys` buckets are kept, the least recently
 * used dropped first (a dropped bucket starts full again). Times come from the Clock.
 */
import { Clock, Context, Effect, Layer } from "effect"

export interface Options {
  /** Requests a second each key may make, on average. */
  readonly perSecond: number
  /** Requests a key may make at once after being idle. Default twice `perSecond`. */
  readonly burst?: number
  /** Buckets kept at most. Default 100,000. */
  readonly maxKeys?: number
}

/** What a request may do: go on, or wait `retryAfterMs`. */
export type Decision =
  | { readonly _tag: "Allowed"; readonly remaining: number }
  | { readonly _tag: "Limited"; readonly retryAfterMs: number }

export class RateLimit extends Context.Tag("@mediagate/http/RateLimit")<RateLimit, {
  readonly perSecond: number
  readonly burst: number
  /** Takes one request from the key's bucket. */
  readonly take: (key: string) => Effect.Effect<Decision>
}>() {}

interface Bucket {
  tokens: number
  at: number
}

export const make = (options: Options): Context.Tag.Service<RateLimit> => {
  const perSecond = options.perSecond
  const burst = options.burst ?? perSecond * 2
  const maxKeys = options.maxKeys ?? 100_000
  const buckets = new Map<string, Bucket>()
  return {
    perSecond,
    burst,
    take: (key) =>
      Effect.map(Clock.currentTimeMillis, (now): Decision => {
        const bucket = buckets.get(key) ?? { tokens: burst, at: now }
        // Map order is insertion order: re-inserting keeps the least recently used first.
        buckets.delete(key)
        buckets.set(key, bucket)
        if (buckets.size > maxKeys) buckets.delete(buckets.keys().next().value!)
        bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * perSecond)
        bucket.at = now
        if (bucket.tokens >= 1) {
          bucket.tokens -= 1
          return { _tag: "Allowed", remaining: Math.floor(bucket.tokens) }
        }
        return { _tag: "Limited", retryAfterMs: Math.ceil(((1 - bucket.tokens) / perSecond) * 1000) }
      })
  }
}

/** Rate limits for the API (see `MediagateHttp.httpApp`). */
export const layer = (options: Options): Layer.Layer<RateLimit> => Layer.sync(RateLimit, () => make(options))

/** The headers of a 429. */
export const limitedHeaders = (limit: Context.Tag.Service<RateLimit>, retryAfterMs: number): Record<string, string> => {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000))
  return {
    "retry-after": String(seconds),
    "ratelimit-policy": `"per-key";q=${limit.perSecond};w=1`,
    ratelimit: `"per-key";r=0;t=${seconds}`
  }
}
