/**
 * API keys: their format, and the rules every accounts backend applies.
 *
 * A generated key is `mg_` followed by 32 random base62 characters and a 6-character base62
 * checksum (CRC-32 of everything before it), 41 characters in all, like GitHub's tokens:
 * a secret scanner finds a leaked one by its shape (`mg_[0-9A-Za-z]{38}`) and can verify the
 * checksum, and a mistyped one is refused before any database read. Keys an operator brings
 * (`MEDIAGATE_API_KEY`, or keys made before this format) do not have that shape and are
 * taken as given. Keys are stored only as their SHA-256 (with a short hint for people, the
 * first characters), looked up by that hash, and compared in constant time.
 */
import { Effect, Redacted } from "effect"
import { Ids } from "./Ids.js"

export const prefix = "mg_"

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const bodyLength = 32
const checksumLength = 6

/** The shape of a generated key: what a secret scanner looks for. */
export const generatedPattern = /^mg_[0-9A-Za-z]{38}$/

const crcTable = Array.from({ length: 256 }, (_, n) => {
  let c = n
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
  return c >>> 0
})

/** CRC-32 (IEEE) of a string's UTF-8 bytes. */
export const crc32 = (text: string): number => {
  let crc = 0xffffffff
  for (const byte of new TextEncoder().encode(text)) crc = crcTable[(crc ^ byte) & 0xff]! ^ (crc >>> 8)
  return (crc ^ 0xffffffff) >>> 0
}

/** A number in base62, left-padded with zeros to `width`. */
const base62 = (value: bigint | number, width: number): string => {
  let n = BigInt(value)
  let out = ""
  while (n > 0n) {
    out = alphabet[Number(n % 62n)]! + out
    n /= 62n
  }
  return out.padStart(width, "0").slice(-width)
}

/** The checksum of a key's first part (`mg_` and the random body). */
export const checksum = (head: string): string => base62(crc32(head), checksumLength)

/** What a presented key is: one of ours (checksum right), one of ours mistyped, or one brought as given. */
export type Kind = "generated" | "malformed" | "given"

export const classify = (key: string): Kind => {
  if (key.length === 0) return "malformed"
  if (!generatedPattern.test(key)) return "given"
  const head = key.slice(0, prefix.length + bodyLength)
  return key.slice(prefix.length + bodyLength) === checksum(head) ? "generated" : "malformed"
}

/** A new key from the Ids service's randomness: 32 base62 characters (190 bits) and the checksum. */
export const generate: Effect.Effect<Redacted.Redacted<string>, never, Ids> = Effect.gen(function*() {
  const ids = yield* Ids
  // 24 random bytes hold 192 bits; 32 base62 characters hold 190.
  const random = BigInt(`0x${yield* ids.token(24)}`)
  const head = `${prefix}${base62(random, bodyLength)}`
  return Redacted.make(`${head}${checksum(head)}`)
})

/**
 * What people see of a key: its first characters, enough to tell keys apart, never enough to
 * use: `mg_` and 4 more of a generated key (34 random characters stay unknown), at most a
 * quarter (and 4 characters) of a key brought as given.
 */
export const hint = (key: string): string =>
  `${key.slice(0, classify(key) === "given" ? Math.min(4, Math.floor(key.length / 4)) : prefix.length + 4)}...`

/** A key as backends store it: its SHA-256 (hex) and its hint. */
export interface StoredKey {
  readonly hash: string
  readonly hint: string
}

/** Compares two hex hashes in time that does not depend on where they differ. */
export const sameHash = (a: string, b: string): boolean => {
  if (a.length !== b.length) return false
  let difference = 0
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return difference === 0
}

/** A stored key's state at `now`: usable, revoked or expired. */
export type KeyState = "active" | "revoked" | "expired"

export const stateOf = (key: { readonly revokedAt: number | null; readonly expiresAt: number | null }, now: number): KeyState =>
  key.revokedAt !== null ? "revoked" : key.expiresAt !== null && key.expiresAt <= now ? "expired" : "active"

/** A key of an account, as admin tools list it: never the key itself. */
export interface KeyInfo {
  readonly id: string
  readonly accountId: string
  readonly hint: string
  readonly label: string | null
  readonly createdAt: number
  readonly expiresAt: number | null
  readonly revokedAt: number | null
  /** Its scope; absent on backends that keep none (the same as `unscoped`). */
  readonly scope?: KeyScope | undefined
}

/**
 * What a key may do beyond authenticating its account (scoped keys, as LiteLLM's virtual
 * keys): each part null when the key has no such rule.
 */
export interface KeyScope {
  /** Glob patterns (`*` any run of characters, `?` one) of the model ids it may submit; null: every model. */
  readonly models: ReadonlyArray<string> | null
  /** The most it may spend in a UTC calendar month, in micro-USD (reservations count until released); null: no cap. */
  readonly monthlyCapMicroUsd: number | null
  /** Its own rate limit, replacing the server's per-key limit for it; null: the server's. */
  readonly rateLimit: { readonly perSecond: number; readonly burst: number } | null
}

/** A key with no rule of its own. */
export const unscoped: KeyScope = { models: null, monthlyCapMicroUsd: null, rateLimit: null }
