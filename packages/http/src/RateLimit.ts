/**
 * Per-key rate limits: a token bucket per API key, `perSecond` requests a second with
 * bursts of up to `burst`. The buckets are kept in this process (`layer`), or for every node
 * on the shared store (`layerShared`: `SharedLimits`, PostgreSQL's `PgLimits`), so that a key
 * gets that much from the whole cluster (one take at a time per key and node, see
 * `makeShared`); when the shared store fails or is slow, the node falls back to its own
 * buckets with its share of the limit (logged). A request over the limit answers 429 in the envelope, with `Retry-After` (seconds)
 * and the IETF draft's `RateLimit-Policy` and `RateLimit` fields
 * (draft-ietf-httpapi-ratelimit-headers): `"per-key";q=<perSecond>;w=1` and
 * `"per-key";r=0;t=<seconds until a request is allowed>`.
 *
 * A scoped key's own rate (`ApiKeys.KeyScope.rateLimit`) replaces the server's for it
 * (`ownLimit`): authentication (`Auth`) tells the limit the key's rate, and from then on, for
 * `ownTtl` after the key's last authentication, `take` counts the key's requests in a bucket of
 * its own at that rate, kept as the server's buckets are (in this process for `layer`, for
 * every node for `layerShared`), instead of the server's. The request that first
 * authenticates a key on a node was counted by the server's bucket; it is counted in the
 * key's own too.
 *
 * Buckets are checked before authentication, so a flood with one wrong key is limited too.
 * They are keyed by a fixed-size digest of the presented key, never the key itself: a
 * presented key may be any 16 KB string, and thousands of distinct ones must not be kept.
 * A bucket idle long enough to be full again is dropped, and at most `maxKeys` are kept
 * (`TokenBuckets`). Times come from the Clock.
 */
import { SharedLimits } from "@mediagate/core"
import { Clock, Context, Deferred, Duration, Effect, Exit, Layer } from "effect"
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

/** A rate: requests a second on average, and at once after being idle. */
export interface Rate {
  readonly perSecond: number
  readonly burst: number
}

export class RateLimit extends Context.Tag("@mediagate/http/RateLimit")<RateLimit, {
  readonly perSecond: number
  readonly burst: number
  /** Takes one request from the key's bucket: its own (`ownLimit`) when it has one. */
  readonly take: (key: string) => Effect.Effect<Decision>
  /** Buckets held now. */
  readonly size: Effect.Effect<number>
  /**
   * Tells the limit that `key` (as `take` is given it) has its own `rate`, replacing the
   * server's for it from the next request; its first telling also counts this request
   * against it. Absent on limits made elsewhere: keys keep the server's rate there.
   */
  readonly ownLimit?: (key: string, rate: Rate) => Effect.Effect<void>
  /** The rate `take` applies to `key` now: its own, else the server's (for the 429's RateLimit-Policy). */
  readonly rateOf?: (key: string) => Effect.Effect<Rate>
}>() {}

/** How long a key's own rate is remembered after its last authentication. */
export const ownTtl = Duration.minutes(5)

/** Own rates kept at most, and limits made for distinct rates at most (past that, the oldest are dropped). */
const maxOwn = 10_000
const maxRates = 1_000

/**
 * `server` with keys' own rates (see the module comment): a limit made by `limitFor` per
 * distinct rate, its buckets named apart from the server's (`own:` and the key).
 */
const withOwnLimits = (
  server: Context.Tag.Service<RateLimit>,
  limitFor: (rate: Rate) => Context.Tag.Service<RateLimit>
): Context.Tag.Service<RateLimit> => {
  const ttl = Duration.toMillis(ownTtl)
  const own = new Map<string, { readonly rate: Rate; readonly until: number }>()
  const limits = new Map<string, Context.Tag.Service<RateLimit>>()
  const limitOf = (rate: Rate) => {
    const name = `${rate.perSecond}/${rate.burst}`
    const found = limits.get(name)
    if (found !== undefined) return found
    const made = limitFor(rate)
    limits.set(name, made)
    if (limits.size > maxRates) limits.delete(limits.keys().next().value!)
    return made
  }
  const ownNow = (key: string, now: number) => {
    const found = own.get(key)
    if (found === undefined || found.until > now) return found
    own.delete(key)
    return undefined
  }
  return {
    ...server,
    take: (key) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const found = ownNow(key, now)
        return found === undefined ? server.take(key) : limitOf(found.rate).take(`own:${key}`)
      }),
    ownLimit: (key, rate) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const found = ownNow(key, now)
        const same = found !== undefined && found.rate.perSecond === rate.perSecond && found.rate.burst === rate.burst
        own.delete(key)
        own.set(key, { rate, until: now + ttl })
        if (own.size > maxOwn) own.delete(own.keys().next().value!)
        // Newly told: this request went through the server's bucket; count it in the key's own.
        return same ? Effect.void : Effect.asVoid(limitOf(rate).take(`own:${key}`))
      }),
    rateOf: (key) =>
      Effect.map(Clock.currentTimeMillis, (now) => ownNow(key, now)?.rate ?? { perSecond: server.perSecond, burst: server.burst })
  }
}

/**
 * A fixed-size name for a presented key (128 bits of its SHA-256): what buckets and
 * held-request counts are keyed by.
 */
export const keyDigest = (key: string): string => createHash("sha256").update(key).digest("base64url").slice(0, 22)

export const make = (options: Options): Context.Tag.Service<RateLimit> =>
  withOwnLimits(makeBuckets(options), (rate) => makeBuckets({ ...rate, maxKeys: options.maxKeys ?? 10_000 }))

/** The server's buckets in this process. */
const makeBuckets = (options: Options): Context.Tag.Service<RateLimit> => {
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

/**
 * No server-wide rate, only keys' own (`ownLimit`): what a composition with no per-key limit
 * configured installs, so that a scoped key's rate holds there too. A key with no rate of its
 * own is not counted (no bucket is kept for it). `perSecond` and `burst` read 0: there is no
 * server rate to name.
 */
const noServerLimit: Context.Tag.Service<RateLimit> = {
  perSecond: 0,
  burst: 0,
  take: () => Effect.succeed({ _tag: "Allowed", remaining: 0 }),
  size: Effect.succeed(0)
}

/** Keys' own rates only (`noServerLimit`), their buckets in this process. */
export const makeOwnOnly = (options: { readonly maxKeys?: number } = {}): Context.Tag.Service<RateLimit> =>
  withOwnLimits(noServerLimit, (rate) => makeBuckets({ ...rate, maxKeys: options.maxKeys ?? 10_000 }))

/** Keys' own rates only, their buckets shared by every node (`SharedLimits`), as `makeShared` keeps them. */
export const makeSharedOwnOnly = (
  shared: Context.Tag.Service<SharedLimits.SharedLimits>,
  options: Omit<SharedOptions, "perSecond" | "burst"> = {}
): Context.Tag.Service<RateLimit> => withOwnLimits(noServerLimit, (rate) => makeSharedBuckets({ ...options, ...rate }, shared))

/** `makeOwnOnly` as a layer: for a composition with no per-key rate limit. */
export const layerOwnOnly: Layer.Layer<RateLimit> = Layer.sync(RateLimit, () => makeOwnOnly())

/** `makeSharedOwnOnly` as a layer. */
export const layerSharedOwnOnly: Layer.Layer<RateLimit, never, SharedLimits.SharedLimits> = Layer.effect(
  RateLimit,
  Effect.map(SharedLimits.SharedLimits, (shared) => makeSharedOwnOnly(shared))
)

/** The rate `limit` applies to `key` now (a key's own, else the server's): what a 429's RateLimit-Policy names. */
export const rateFor = (limit: Context.Tag.Service<RateLimit>, key: string): Effect.Effect<Rate> =>
  limit.rateOf === undefined ? Effect.succeed({ perSecond: limit.perSecond, burst: limit.burst }) : limit.rateOf(key)

/** Rate limits for the API (see `MediagateHttp.httpApp`), kept in this process. */
export const layer = (options: Options): Layer.Layer<RateLimit> => Layer.sync(RateLimit, () => make(options))

/** Settings of `makeShared`. */
export interface SharedOptions extends Options {
  /**
   * Longest a request waits for the shared store before this node's own buckets decide it
   * (with its share of the limit). Default 1 s.
   */
  readonly timeout?: Duration.DurationInput
}

/** A request waiting for its key's next take from the shared store. */
interface Waiter {
  readonly key: string
  readonly answer: Deferred.Deferred<Decision>
  /** When this node's own buckets decide it instead (Clock milliseconds). */
  readonly deadline: number
}

/**
 * Buckets shared by every node (`SharedLimits`). A node asks the store once at a time per
 * key: the requests of a key that come while its take is on the way wait for the next one,
 * a take of as many tokens as they are, and are answered from it in order of arrival (a
 * burst of one key costs the database a statement or two per node, not one a request, and
 * does not queue on its connections). A key the store refused, or left without a whole token, is
 * refused by this node without asking again until its bucket has one. A request the store
 * cannot answer within `timeout` of its arrival (down, or slow) is decided by this node's own
 * buckets instead, with 1/N of the limit (N the nodes on the store seen recently,
 * `SharedLimits.nodes`, and a burst of at least 1): the API stays up and the cluster keeps
 * to about the limit while the database is away; a warning is logged once until the store
 * answers again.
 */
export const makeShared = (options: SharedOptions, shared: Context.Tag.Service<SharedLimits.SharedLimits>): Context.Tag.Service<RateLimit> =>
  withOwnLimits(makeSharedBuckets(options, shared), (rate) => makeSharedBuckets({ ...options, ...rate }, shared))

/** The server's buckets for every node (`makeShared`). */
const makeSharedBuckets = (options: SharedOptions, shared: Context.Tag.Service<SharedLimits.SharedLimits>): Context.Tag.Service<RateLimit> => {
  const perSecond = options.perSecond
  const burst = options.burst ?? perSecond * 2
  const rate = { perSecond, burst }
  const timeout = Duration.toMillis(options.timeout ?? Duration.seconds(1))
  const maxKeys = options.maxKeys ?? 10_000
  // This node's share of the limit, for when the store cannot answer: made again when the
  // count of nodes changes.
  let own = { nodes: 1, limit: makeBuckets({ perSecond, burst, maxKeys }) }
  const ownShare = Effect.map(shared.nodes, (nodes) => {
    if (nodes !== own.nodes) own = { nodes, limit: makeBuckets({ perSecond: perSecond / nodes, burst: Math.max(1, burst / nodes), maxKeys }) }
    return own.limit
  })
  // Keys refused until their bucket has a whole token again: no node can give it one sooner
  // than its refill does, so these are refused here without a round trip. A key sending far
  // past its limit would otherwise cost a write on the database every node shares for each
  // request. Oldest first; at most `maxKeys`.
  const refusedUntil = new Map<string, number>()
  const refusal = (digest: string, now: number): Decision | undefined => {
    const until = refusedUntil.get(digest)
    if (until === undefined) return undefined
    if (now < until) return { _tag: "Limited", retryAfterMs: until - now }
    refusedUntil.delete(digest)
    return undefined
  }
  // By key's digest, while a take of that key is on its way: the requests that came since,
  // for the next take.
  const queued = new Map<string, Array<Waiter>>()
  let degraded = false

  const answer = (waiters: ReadonlyArray<Waiter>, decisions: ReadonlyArray<Decision>) =>
    waiters.forEach((waiter, i) => Deferred.unsafeDone(waiter.answer, Exit.succeed(decisions[i]!)))

  /** The decisions of `waiters`, in order, from a take of their count that got `taken`. */
  const decide = (digest: string, now: number, waiters: ReadonlyArray<Waiter>, taken: SharedLimits.Taken): Array<Decision> => {
    const retryAfterMs = Math.ceil(((1 - taken.tokens) / perSecond) * 1000)
    if (taken.tokens < 1) {
      refusedUntil.delete(digest)
      refusedUntil.set(digest, now + retryAfterMs)
      if (refusedUntil.size > maxKeys) refusedUntil.delete(refusedUntil.keys().next().value!)
    }
    return waiters.map((_, i): Decision =>
      i < taken.granted
        ? { _tag: "Allowed", remaining: Math.floor(taken.tokens) + taken.granted - 1 - i }
        : { _tag: "Limited", retryAfterMs }
    )
  }

  /** Answers `waiters` from one take of their count, or from this node's share if the store does not answer in time. */
  const takeFor = (digest: string, waiters: ReadonlyArray<Waiter>): Effect.Effect<void> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      // The first came first: its deadline is the nearest.
      const wait = waiters[0]!.deadline - now
      // A take the timeout cuts short goes on in the background (the store's statements are
      // uninterruptible: waiting for one to stop would be waiting for it to end).
      const fromStore = wait <= 0
        ? Effect.fail("timed out" as const)
        : Effect.timeoutFail(Effect.interruptible(Effect.disconnect(shared.take(digest, rate, waiters.length))), {
          duration: wait,
          onTimeout: () => "timed out" as const
        })
      return fromStore.pipe(
        Effect.map((taken) => decide(digest, now, waiters, taken)),
        Effect.tap(() => {
          if (!degraded) return Effect.void
          degraded = false
          return Effect.logInfo("rate limit: the shared buckets answer again")
        }),
        Effect.catchAll((error) =>
          Effect.gen(function*() {
            if (!degraded) {
              yield* Effect.logWarning("rate limit: the shared buckets cannot be reached; limiting with this node's share of the buckets", error)
            }
            degraded = true
            const limit = yield* ownShare
            return yield* Effect.forEach(waiters, (waiter) => limit.take(waiter.key))
          })
        ),
        // A defect (a bug) is every waiter's, as it would be without the shared take.
        Effect.exit,
        Effect.map((exit) =>
          Exit.isSuccess(exit)
            ? answer(waiters, exit.value)
            : waiters.forEach((waiter) => Deferred.unsafeDone(waiter.answer, Exit.failCause(exit.cause)))
        )
      )
    })

  /** The requests queued for the next take of `digest` (those refused meanwhile answered); none closes the key's queue. */
  const next = (digest: string, now: number): Array<Waiter> => {
    let waiters = queued.get(digest) ?? []
    const refused = refusal(digest, now)
    if (refused !== undefined) {
      answer(waiters, waiters.map(() => refused))
      waiters = []
    }
    if (waiters.length === 0) queued.delete(digest)
    else queued.set(digest, [])
    return waiters
  }

  /** Takes for `digest` until no request waits; uninterruptible, so that every waiter is answered (each take is bounded by the timeout). */
  const drain = (digest: string, first: Array<Waiter>): Effect.Effect<void> =>
    Effect.uninterruptible(Effect.gen(function*() {
      for (let waiters = first; waiters.length > 0;) {
        yield* takeFor(digest, waiters)
        const now = yield* Clock.currentTimeMillis
        waiters = next(digest, now)
      }
    }))

  return {
    perSecond,
    burst,
    // Uninterruptible up to the wait: a key's queue opened must have its drain started.
    take: (key) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const digest = keyDigest(key)
          const refused = refusal(digest, now)
          if (refused !== undefined) return refused
          const waiter: Waiter = { key, answer: yield* Deferred.make<Decision>(), deadline: now + timeout }
          const waiting = queued.get(digest)
          if (waiting !== undefined) waiting.push(waiter)
          else {
            queued.set(digest, [])
            yield* Effect.forkDaemon(drain(digest, [waiter]))
          }
          return yield* restore(Deferred.await(waiter.answer))
        })
      ),
    size: Effect.suspend(() => own.limit.size)
  }
}

/** Rate limits for the API kept for every node on the shared store (`makeShared`). */
export const layerShared = (options: SharedOptions): Layer.Layer<RateLimit, never, SharedLimits.SharedLimits> =>
  Layer.effect(RateLimit, Effect.map(SharedLimits.SharedLimits, (shared) => makeShared(options, shared)))

/** The headers of a 429. */
export const limitedHeaders = (limit: { readonly perSecond: number }, retryAfterMs: number): Record<string, string> => {
  const seconds = retryAfterSeconds(retryAfterMs)
  return {
    "retry-after": String(seconds),
    "ratelimit-policy": `"per-key";q=${limit.perSecond};w=1`,
    ratelimit: `"per-key";r=0;t=${seconds}`
  }
}

/** A wait in whole seconds for `Retry-After`, at least 1. */
export const retryAfterSeconds = (retryAfterMs: number): number => Math.max(1, Math.ceil(retryAfterMs / 1000))
