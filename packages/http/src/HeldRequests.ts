/**
 * Requests the server holds open: the events stream of a task and the query with `?wait=`.
 * Each costs a socket, a fiber and buffers for up to a minute or more, so how many are held
 * at once is capped per key and in total; over a cap the request answers 429 in the
 * envelope with Retry-After. A held request gives its place back when it ends, whether it
 * answered, failed or the client went away (the request's scope closes in every case).
 *
 * The caps hold in this process by default (`make`); with `layerShared` they hold for every
 * node on the shared store (`SharedLimits`, PostgreSQL's `PgLimits`), where a node that dies
 * gives its places back once they lapse.
 */
import { SharedLimits } from "@mediagate/core"
import type { Scope } from "effect"
import { Context, Effect, Layer } from "effect"

/** The caps. */
export interface Limits {
  /** Requests one key may have held at once. */
  readonly perKey: number
  /** Requests held at once over every key. */
  readonly total: number
}

/** The library's caps: 20 per key, 1,000 in all. */
export const defaultLimits: Limits = { perKey: 20, total: 1_000 }

/** The caps the API applies (`MediagateHttp.httpApp`). */
export class Settings extends Context.Reference<Settings>()("@mediagate/http/HeldRequests/Settings", {
  defaultValue: (): Limits => defaultLimits
}) {}

/** Sets the caps. */
export const layer = (limits: Limits): Layer.Layer<never> => Layer.succeed(Settings, limits)

/** Whether a request is one the server holds: GET (or HEAD) of a task's events, or of a task with `wait`. */
export const isHeld = (method: string, url: string): boolean => {
  if (method !== "GET" && method !== "HEAD") return false
  const [path = "", query = ""] = url.split("?", 2)
  if (/^\/api\/v1\/task\/[^/]+\/events\/?$/.test(path)) return true
  return /^\/api\/v1\/task\/[^/]+\/?$/.test(path) && new URLSearchParams(query).has("wait")
}

/** Why a request was not taken. */
export type Refusal = SharedLimits.Refusal

/** A place taken, with what gives it back; or the cap that is full. */
export type Acquired =
  | { readonly _tag: "Held"; readonly release: Effect.Effect<void> }
  | { readonly _tag: "Refused"; readonly cap: Refusal }

/** The held requests of one API app. */
export interface HeldRequests {
  /** Takes a place for a request of the key of `digest`, or says which cap is full. */
  readonly acquire: (digest: string) => Effect.Effect<Acquired>
}

/** Held requests counted in this process, with their counts. */
export interface Counts extends HeldRequests {
  /** Requests held now, over every key. */
  readonly total: () => number
  /** Keys with requests held now. */
  readonly keys: () => number
}

/** Counts of held requests in this process, under `limits`: the default, for one node. */
export const make = (limits: Limits): Counts => {
  const byKey = new Map<string, number>()
  let total = 0
  const release = (digest: string) =>
    Effect.sync(() => {
      const held = byKey.get(digest) ?? 0
      if (held <= 0) return
      if (held === 1) byKey.delete(digest)
      else byKey.set(digest, held - 1)
      total--
    })
  return {
    acquire: (digest) =>
      Effect.sync((): Acquired => {
        const held = byKey.get(digest) ?? 0
        if (held >= limits.perKey) return { _tag: "Refused", cap: "key" }
        if (total >= limits.total) return { _tag: "Refused", cap: "total" }
        byKey.set(digest, held + 1)
        total++
        return { _tag: "Held", release: release(digest) }
      }),
    total: () => total,
    keys: () => byKey.size
  }
}

/**
 * Places shared by every node (`SharedLimits`), under `limits` over the cluster. When the
 * store fails, the request is counted in this process instead (failing open, as the rate
 * limit does: the caps protect this node's sockets, which its own counts still bound), and a
 * warning is logged once until the store answers again.
 */
export const makeShared = (limits: Limits, shared: Context.Tag.Service<SharedLimits.SharedLimits>): HeldRequests => {
  const local = make(limits)
  let degraded = false
  return {
    acquire: (digest) =>
      shared.hold(digest, limits).pipe(
        Effect.map((hold): Acquired =>
          hold._tag === "Refused"
            ? hold
            : { _tag: "Held", release: Effect.ignore(shared.release(hold.id)) }
        ),
        Effect.tap(() => {
          if (!degraded) return Effect.void
          degraded = false
          return Effect.logInfo("held requests: the shared counts answer again")
        }),
        Effect.catchAll((error) =>
          Effect.suspend(() => {
            const warn = degraded
              ? Effect.void
              : Effect.logWarning("held requests: the shared counts cannot be reached; counting this node's held requests only", error)
            degraded = true
            return Effect.zipRight(warn, local.acquire(digest))
          })
        )
      )
  }
}

/** How the API counts held requests: in this process by default (`make`). */
export class Backend extends Context.Reference<Backend>()("@mediagate/http/HeldRequests/Backend", {
  defaultValue: (): (limits: Limits) => HeldRequests => make
}) {}

/** Held requests counted over every node on the shared store (`makeShared`). */
export const layerShared: Layer.Layer<never, never, SharedLimits.SharedLimits> = Layer.effect(
  Backend,
  Effect.map(SharedLimits.SharedLimits, (shared) => (limits: Limits) => makeShared(limits, shared))
)

/** A place for the request in context, given back when its scope closes; or the cap that is full. */
export const hold = (held: HeldRequests, digest: string): Effect.Effect<Refusal | undefined, never, Scope.Scope> =>
  Effect.uninterruptible(Effect.flatMap(held.acquire(digest), (acquired) =>
    acquired._tag === "Refused"
      ? Effect.succeed(acquired.cap)
      : Effect.as(Effect.addFinalizer(() => acquired.release), undefined)))
