/**
 * Token buckets by key in bounded memory, shared by the per-key rate limit and the limit on
 * failed authentications per address. A bucket that has been idle long enough to refill is
 * no different from a new one, so it is dropped (checked at each use, with the caller's
 * Clock time); at most `maxKeys` are kept, the least recently used dropped first.
 */
import type { SharedLimits } from "@mediagate/core"

/** What a request may do: go on, or wait `retryAfterMs` (the same as a shared bucket's). */
export type Decision = SharedLimits.Decision

/** Settings of `make`. */
export interface Options {
  /** Tokens a bucket gains a second. */
  readonly perSecond: number
  /** Tokens a full bucket holds. */
  readonly burst: number
  /** Buckets kept at most. */
  readonly maxKeys: number
}

/** Buckets by key. Times are Clock milliseconds. */
export interface TokenBuckets {
  /** Takes one token from the key's bucket, if it has one. */
  readonly take: (key: string, now: number) => Decision
  /** Whether the key's bucket has a token, without taking it. */
  readonly check: (key: string, now: number) => Decision
  /** Buckets held now. */
  readonly size: () => number
}

interface Bucket {
  tokens: number
  at: number
}

/** Token buckets in bounded memory. */
export const make = ({ burst, maxKeys, perSecond }: Options): TokenBuckets => {
  // Map order is insertion order: re-inserting on each use keeps the least recently used first.
  const buckets = new Map<string, Bucket>()
  const refillMs = (burst / perSecond) * 1000
  const sweep = (now: number) => {
    for (const [key, bucket] of buckets) {
      if (now - bucket.at < refillMs) break
      buckets.delete(key)
    }
  }
  const current = (key: string, now: number): Bucket => {
    sweep(now)
    const bucket = buckets.get(key) ?? { tokens: burst, at: now }
    buckets.delete(key)
    buckets.set(key, bucket)
    if (buckets.size > maxKeys) buckets.delete(buckets.keys().next().value!)
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * perSecond)
    bucket.at = now
    return bucket
  }
  const decide = (bucket: Bucket, spend: boolean): Decision => {
    if (bucket.tokens >= 1) {
      if (spend) bucket.tokens -= 1
      return { _tag: "Allowed", remaining: Math.floor(bucket.tokens) }
    }
    return { _tag: "Limited", retryAfterMs: Math.ceil(((1 - bucket.tokens) / perSecond) * 1000) }
  }
  return {
    take: (key, now) => decide(current(key, now), true),
    // A key without a bucket is not given one just for asking.
    check: (key, now) => buckets.has(key) ? decide(current(key, now), false) : { _tag: "Allowed", remaining: burst },
    size: () => buckets.size
  }
}
