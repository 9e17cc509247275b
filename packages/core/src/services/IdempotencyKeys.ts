/**
 * Idempotency keys of submit (draft-ietf-httpapi-idempotency-key-header): the same key and
 * the same body from the same account within 24 hours answer the same task. A key is first
 * reserved for the task id its request will create ("in progress", under a lease), then
 * completed with that task; a reservation whose lease ran out belongs to a request that
 * died or stalled, and the next request with the key looks whether its task exists before
 * taking the key over, so a crash never leaves a key pointing at nothing for good. Backends:
 * `makeMemory` here, `SqlIdempotencyKeys` in @mediagate/store-sql.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { shortened } from "../domain/Errors.js"
import type { StoreError } from "../domain/Errors.js"
import type { AccountId, TaskId } from "../domain/Ids.js"

/** How long a key answers with its task: 24 hours from its first request. */
export const keyLifetimeMs = 24 * 60 * 60 * 1000

/** How long a reservation holds before another request with the key may look behind it. */
export const reservationLeaseMs = 60 * 1000

/** Longest accepted key. */
export const maxKeyLength = 255

/** A request's claim on a key. */
export interface Reservation {
  readonly owner: AccountId
  readonly key: string
  /** The request body's fingerprint (`fingerprint`). */
  readonly fingerprint: string
  /** The task this request creates if it gets the key. */
  readonly taskId: TaskId
  readonly now: number
  /** The reservation holds until then. */
  readonly leaseUntil: number
  /** Keys first used before this time have expired: they are free again. */
  readonly expiredBefore: number
}

/** What a store found for a key, after reserving it when it was free. */
export type Begin =
  /** The key was free (new, or expired): it is reserved for this request's task id. */
  | { readonly _tag: "Reserved" }
  /** The key answers with `taskId`. */
  | { readonly _tag: "Completed"; readonly taskId: TaskId; readonly sameBody: boolean }
  /** Another request holds the key and is still within its lease. */
  | { readonly _tag: "InProgress"; readonly sameBody: boolean }
  /** A request reserved the key for `taskId` and its lease ran out: it died or stalled. */
  | { readonly _tag: "Stale"; readonly taskId: TaskId; readonly sameBody: boolean }

/** The keys' store. Every method is atomic; a database failure is a StoreError, as in TaskStore. */
export class IdempotencyKeys extends Context.Tag("@mediagate/core/IdempotencyKeys")<IdempotencyKeys, {
  /** Reserves the key for `reservation.taskId` if it is free or expired; otherwise says what holds it. */
  readonly begin: (reservation: Reservation) => Effect.Effect<Begin, StoreError>
  /**
   * Takes over a stale reservation made for `previous` (whose task was never created):
   * answers whether the key is now reserved for this request (false when another request
   * moved it first).
   */
  readonly takeOver: (reservation: Reservation, previous: TaskId) => Effect.Effect<boolean, StoreError>
  /** Binds the key, reserved for `taskId`, to that task: from now on it answers with it. */
  readonly complete: (owner: AccountId, key: string, taskId: TaskId) => Effect.Effect<void, StoreError>
  /** Frees the key reserved for `taskId` (its request created nothing), so it may be sent again. */
  readonly release: (owner: AccountId, key: string, taskId: TaskId) => Effect.Effect<void, StoreError>
  /** Deletes the keys first used before `before`; answers how many. */
  readonly prune: (before: number) => Effect.Effect<number, StoreError>
}>() {}

/** The same key sent with another body: 422. */
export class IdempotencyKeyMismatch extends Schema.TaggedError<IdempotencyKeyMismatch>()("IdempotencyKeyMismatch", {
  key: Schema.String
}) {
  override get message() {
    return `Idempotency-Key '${shortened(this.key)}' was already used with a different request body; use a new key for a new request`
  }
}

/** The same key while its first request is still being processed: 409. */
export class IdempotencyKeyInUse extends Schema.TaggedError<IdempotencyKeyInUse>()("IdempotencyKeyInUse", {
  key: Schema.String
}) {
  override get message() {
    return `a request with Idempotency-Key '${shortened(this.key)}' is still being processed; try again in a moment`
  }
}

/**
 * The Idempotency-Key header's value. The draft makes it a Structured Field string
 * (`"abc"`, RFC 8941); a bare value is taken as it is, as Stripe's clients send it. Either
 * way the key is 1 to 255 visible ASCII characters (or spaces inside the quotes).
 */
export const parseKey = (header: string): { readonly key: string } | { readonly problem: string } => {
  const trimmed = header.trim()
  let key = trimmed
  if (trimmed.length >= 2 && trimmed.startsWith("\"") && trimmed.endsWith("\"")) {
    let unquoted = ""
    const inner = trimmed.slice(1, -1)
    for (let i = 0; i < inner.length; i++) {
      const char = inner[i]!
      if (char === "\\" && (inner[i + 1] === "\"" || inner[i + 1] === "\\")) unquoted += inner[++i]
      else if (char === "\\" || char === "\"") return { problem: "Idempotency-Key is not a valid quoted string" }
      else unquoted += char
    }
    key = unquoted
  }
  if (key.length === 0 || key.length > maxKeyLength) return { problem: `Idempotency-Key must be 1 to ${maxKeyLength} characters` }
  if (!/^[\x20-\x7e]+$/.test(key)) return { problem: "Idempotency-Key must be visible ASCII characters" }
  return { key }
}

/**
 * A JSON value written canonically: object keys sorted by UTF-16 code units (as RFC 8785
 * sorts them), no whitespace, numbers and strings as JSON.stringify writes them. Two bodies
 * that differ only in key order or spacing are the same request.
 */
export const canonicalJson = (value: unknown): string => {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null"
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  const entries = Object.keys(value).sort().map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`)
  return `{${entries.join(",")}}`
}

/** The fingerprint of a request body: SHA-256 (Web Crypto) of its canonical JSON, in hex. */
export const fingerprint = (body: unknown): Effect.Effect<string> =>
  Effect.promise(() => globalThis.crypto.subtle.digest("SHA-256", new TextEncoder().encode(canonicalJson(body)))).pipe(
    Effect.map((digest) => Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join(""))
  )

interface Entry {
  fingerprint: string
  taskId: TaskId
  completed: boolean
  createdAt: number
  leaseUntil: number
}

/** Keys in memory: for tests and single-process deployments; they end with the process. */
export const makeMemory: Effect.Effect<Context.Tag.Service<IdempotencyKeys>> = Effect.sync(() => {
  const entries = new Map<string, Entry>()
  const id = (owner: string, key: string) => `${owner}\u0000${key}`
  const reserve = (reservation: Reservation) =>
    void entries.set(id(reservation.owner, reservation.key), {
      fingerprint: reservation.fingerprint,
      taskId: reservation.taskId,
      completed: false,
      createdAt: reservation.now,
      leaseUntil: reservation.leaseUntil
    })
  return {
    begin: (reservation) =>
      Effect.sync((): Begin => {
        const found = entries.get(id(reservation.owner, reservation.key))
        if (found === undefined || found.createdAt < reservation.expiredBefore) {
          reserve(reservation)
          return { _tag: "Reserved" }
        }
        const sameBody = found.fingerprint === reservation.fingerprint
        if (found.completed) return { _tag: "Completed", taskId: found.taskId, sameBody }
        return found.leaseUntil > reservation.now ? { _tag: "InProgress", sameBody } : { _tag: "Stale", taskId: found.taskId, sameBody }
      }),
    takeOver: (reservation, previous) =>
      Effect.sync(() => {
        const found = entries.get(id(reservation.owner, reservation.key))
        if (found === undefined || found.completed || found.taskId !== previous) return false
        reserve(reservation)
        return true
      }),
    complete: (owner, key, taskId) =>
      Effect.sync(() => {
        const found = entries.get(id(owner, key))
        if (found !== undefined && found.taskId === taskId) found.completed = true
      }),
    release: (owner, key, taskId) =>
      Effect.sync(() => {
        const found = entries.get(id(owner, key))
        if (found !== undefined && found.taskId === taskId && !found.completed) entries.delete(id(owner, key))
      }),
    prune: (before) =>
      Effect.sync(() => {
        let pruned = 0
        for (const [name, entry] of entries) {
          if (entry.createdAt < before) {
            entries.delete(name)
            pruned++
          }
        }
        return pruned
      })
  }
})

/** The memory keys layer. */
export const layerMemory: Layer.Layer<IdempotencyKeys> = Layer.effect(IdempotencyKeys, makeMemory)
