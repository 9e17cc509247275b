/**
 * Failed authentications per client address. A presented key that names no account costs
 * a lookup and tells the sender something; rotating wrong keys would otherwise never be
 * limited, since each has a fresh rate-limit bucket. An address may fail `failures` times
 * at once, regaining that many per `window`; past it, its requests under /api/v1/ answer
 * 429 with Retry-After before any lookup. The admin API's paths (/api/v1/admin/) count
 * apart, with a stricter limit (`adminLimit`).
 *
 * Several clients may share an address (behind a proxy or a NAT): a key that authenticated
 * lately from anywhere still goes through while its address is limited, so one client
 * guessing keys does not lock the others out; only keys not known to be good are refused.
 * Memory is bounded: buckets by address (`TokenBuckets`) and the digests of good keys, at
 * most `maxEntries` of each. Times come from the Clock.
 */
import { Clock, Context, Duration, Effect, Layer, Option } from "effect"
import * as TokenBuckets from "./TokenBuckets.js"

/** The limit, or none to turn it off. */
export interface Limit {
  /** Failed authentications an address may have at once. */
  readonly failures: number
  /** The time over which an address regains `failures`. */
  readonly window: Duration.DurationInput
  /** Addresses, and good keys, remembered at most. Default 10,000 each. */
  readonly maxEntries?: number
}

/** The library's limit: 20 failed authentications per address, regained over a minute. */
export const defaultLimit: Limit = { failures: 20, window: Duration.minutes(1) }

/** The limit the API applies (`MediagateHttp.httpApp`); `Option.none()` turns it off. */
export class Settings extends Context.Reference<Settings>()("@mediagate/http/AuthFailures/Settings", {
  defaultValue: (): Option.Option<Limit> => Option.some(defaultLimit)
}) {}

/** Sets the limit (`Option.none()`: off). */
export const layer = (limit: Option.Option<Limit>): Layer.Layer<never> => Layer.succeed(Settings, limit)

/**
 * The admin API's limit, stricter and counted apart: 5 failed admin sign-ins per address,
 * regained over 15 minutes (one every 3 minutes). An admin key opens every account; a person
 * mistyping one in the console retries after a few minutes, a guesser gets 480 tries a day.
 */
export const adminLimit: Limit = { failures: 5, window: Duration.minutes(15) }

/** The limit on failed sign-ins under /api/v1/admin/ (`MediagateHttp.httpApp`); `Option.none()` turns it off. */
export class AdminSettings extends Context.Reference<AdminSettings>()("@mediagate/http/AuthFailures/AdminSettings", {
  defaultValue: (): Option.Option<Limit> => Option.some(adminLimit)
}) {}

/** Sets the admin API's limit (`Option.none()`: off). */
export const layerAdmin = (limit: Option.Option<Limit>): Layer.Layer<never> => Layer.succeed(AdminSettings, limit)

/** The failures of each address and the keys known to be good. */
export interface AuthFailures {
  /** Whether a request from `address` with the key of `digest` may try to authenticate. */
  readonly check: (address: string, digest: string) => Effect.Effect<TokenBuckets.Decision>
  /** Records how authentication went for a request from `address`. */
  readonly record: (address: string, digest: string, authenticated: boolean) => Effect.Effect<void>
  /** Addresses with failures remembered now. */
  readonly size: () => number
}

/** The state of one API app. */
export const make = (limit: Limit): AuthFailures => {
  const maxEntries = limit.maxEntries ?? 10_000
  const buckets = TokenBuckets.make({
    burst: limit.failures,
    perSecond: limit.failures / (Duration.toMillis(limit.window) / 1000),
    maxKeys: maxEntries
  })
  // Least recently confirmed first; a key that fails again is forgotten.
  const good = new Map<string, true>()
  return {
    check: (address, digest) =>
      Effect.map(Clock.currentTimeMillis, (now) =>
        good.has(digest) ? { _tag: "Allowed", remaining: 0 } : buckets.check(address, now)),
    record: (address, digest, authenticated) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        good.delete(digest)
        if (!authenticated) return void buckets.take(address, now)
        good.set(digest, true)
        if (good.size > maxEntries) good.delete(good.keys().next().value!)
      }),
    size: buckets.size
  }
}
