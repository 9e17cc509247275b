/**
 * Admin keys in memory, kept as SHA-256 hashes, never in the clear.
 */
import { AdminKeys, ApiKeys } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer, Option, Redacted } from "effect"
import { hashKey } from "./MemoryAccounts.js"

/** The memory AdminKeys: a Map of keys by id, looked up by hash. */
export const make: Effect.Effect<Context.Tag.Service<AdminKeys.AdminKeys>> = Effect.sync(() => {
  const keys = new Map<string, AdminKeys.AdminKeyInfo & { readonly hash: string }>()
  const byHash = new Map<string, string>()
  const info = ({ hash: _hash, ...key }: AdminKeys.AdminKeyInfo & { readonly hash: string }): AdminKeys.AdminKeyInfo => key
  return {
    authenticate: (key, now) =>
      Effect.sync(() => {
        const hash = hashKey(Redacted.value(key)).toString("hex")
        const stored = keys.get(byHash.get(hash) ?? "")
        if (stored === undefined || !ApiKeys.sameHash(stored.hash, hash) || ApiKeys.stateOf(stored, now) !== "active") return Option.none()
        return Option.some(info(stored))
      }),
    create: (key) =>
      Effect.suspend(() => {
        if (keys.has(key.id) || byHash.has(key.hash)) return Effect.dieMessage(`admin key ${key.id} or its hash exists`)
        keys.set(key.id, { ...key, revokedAt: null })
        byHash.set(key.hash, key.id)
        return Effect.void
      }),
    list: Effect.sync(() => [...keys.values()].sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1)).map(info)),
    revoke: (id, now) =>
      Effect.sync(() => {
        const stored = keys.get(id)
        if (stored === undefined) return Option.none()
        const revoked = stored.revokedAt === null ? { ...stored, revokedAt: now } : stored
        keys.set(id, revoked)
        return Option.some(info(revoked))
      })
  }
})

/** The memory AdminKeys layer, empty. */
export const layer: Layer.Layer<AdminKeys.AdminKeys> = Layer.effect(AdminKeys.AdminKeys, make)
