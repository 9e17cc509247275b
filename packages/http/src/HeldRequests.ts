/**
 * Requests the server holds open: the events stream of a task and the query with `?wait=`.
 * Each costs a socket, a fiber and buffers for up to a minute or more, so how many are held
 * at once is capped per key and in total; over a cap the request answers 429 in the
 * envelope with Retry-After. A held request gives its place back when it ends, whether it
 * answered, failed or the client went away (the request's scope closes in every case).
 */
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
export type Refusal = "key" | "total"

/** The held requests of one API app. */
export interface HeldRequests {
  /** Takes a place for a request of the key of `digest`, or says which cap is full. */
  readonly acquire: (digest: string) => Refusal | undefined
  /** Gives back a place `acquire` took. */
  readonly release: (digest: string) => void
  /** Requests held now, over every key. */
  readonly total: () => number
  /** Keys with requests held now. */
  readonly keys: () => number
}

/** Counts of held requests, under `limits`. */
export const make = (limits: Limits): HeldRequests => {
  const byKey = new Map<string, number>()
  let total = 0
  return {
    acquire: (digest) => {
      const held = byKey.get(digest) ?? 0
      if (held >= limits.perKey) return "key"
      if (total >= limits.total) return "total"
      byKey.set(digest, held + 1)
      total++
      return undefined
    },
    release: (digest) => {
      const held = byKey.get(digest) ?? 0
      if (held <= 0) return
      if (held === 1) byKey.delete(digest)
      else byKey.set(digest, held - 1)
      total--
    },
    total: () => total,
    keys: () => byKey.size
  }
}

/** A place for the request in context, given back when its scope closes; or the cap that is full. */
export const hold = (held: HeldRequests, digest: string): Effect.Effect<Refusal | undefined, never, Scope.Scope> =>
  Effect.uninterruptible(Effect.suspend(() => {
    const refused = held.acquire(digest)
    return refused === undefined
      ? Effect.as(Effect.addFinalizer(() => Effect.sync(() => held.release(digest))), undefined)
      : Effect.succeed(refused)
  }))
