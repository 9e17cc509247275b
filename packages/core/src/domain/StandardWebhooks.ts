/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com), the one implementation of
 * the scheme: `webhook-id`, `webhook-timestamp` and `webhook-signature` (space-separated
 * `v1,<base64 HMAC-SHA256>` values: during a secret rotation there are two) over
 * `<id>.<timestamp>.<body>`, keyed by the base64 part of a `whsec_` secret. The deliverer
 * signs callbacks with `sign`; the upstream adapters check Replicate's and a relay's webhooks
 * with `verify`; a receiver checks a mediagate callback with `verifyCallback`, built on `check`.
 *
 * No platform API (no node:crypto, no Buffer): the client re-exports the receiver's check, and
 * it must run wherever the client does, and answer synchronously, which Web Crypto's
 * `subtle.sign` does not. The HMAC is `@noble/hashes` (audited, synchronous, no dependencies);
 * the server's deliverer signs with node:crypto (scheduler's `Webhooks.sign`), and both are
 * checked against node:crypto and the `standardwebhooks` library in the tests.
 */
import { hmac as nobleHmac } from "@noble/hashes/hmac.js"
import { sha256 } from "@noble/hashes/sha2.js"
import { Duration, Either, Encoding, Schema } from "effect"

/** How far `webhook-timestamp` may be from now, either way, unless told otherwise: 5 minutes. */
export const defaultTolerance: Duration.Duration = Duration.minutes(5)

const utf8 = new TextEncoder()

/** Bytes of a hex string, up to its first character that is not a hex digit pair (as node's `Buffer.from(hex, "hex")`). */
const bytesOfHex = (hex: string): Uint8Array => {
  const bytes: Array<number> = []
  for (let i = 0; i + 1 < hex.length && /^[0-9a-f]{2}$/i.test(hex.slice(i, i + 2)); i += 2) bytes.push(parseInt(hex.slice(i, i + 2), 16))
  return Uint8Array.from(bytes)
}

const base64Digits = new Map(
  [..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"].map((char, value) => [char, value] as const)
).set("-", 62).set("_", 63)

/**
 * Bytes of a base64 (or base64url) text, read leniently as node's `Buffer.from(text, "base64")`
 * reads it: padding optional, other characters skipped, the first `=` ends it. A signature or
 * secret a sender wrote slightly off still reads as it always did.
 */
const bytesOfBase64 = (text: string): Uint8Array => {
  const bytes: Array<number> = []
  let bits = 0
  let count = 0
  for (const char of text) {
    if (char === "=") break
    const value = base64Digits.get(char)
    if (value === undefined) continue
    bits = ((bits << 6) | value) & 0x3fff
    count += 6
    if (count >= 8) {
      count -= 8
      bytes.push((bits >> count) & 0xff)
    }
  }
  return Uint8Array.from(bytes)
}

/** A new `whsec_` secret from 24 random bytes (given as hex, from the Ids service). */
export const secretFromHex = (hex: string): string => `whsec_${Encoding.encodeBase64(bytesOfHex(hex))}`

/** The key a secret stands for: the base64 after `whsec_` (or the whole secret without the prefix). */
const keyOf = (secret: string): Uint8Array => bytesOfBase64(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret)

const hmac = (key: Uint8Array, id: string, timestampSeconds: number | string, body: string | Uint8Array): Uint8Array =>
  nobleHmac.create(sha256, key)
    .update(utf8.encode(`${id}.${timestampSeconds}.`))
    .update(typeof body === "string" ? utf8.encode(body) : body)
    .digest()

/**
 * The `webhook-signature` value for a message, wherever it runs (tests, a relay in a worker).
 * The deliverer signs with node:crypto instead: scheduler's `Webhooks.sign`, the same value.
 */
export const sign = (secret: string, id: string, timestampSeconds: number, body: string): string =>
  `v1,${Encoding.encodeBase64(hmac(keyOf(secret), id, timestampSeconds, body))}`

/** Equal bytes, in a time that depends on the length only. */
const equalInConstantTime = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) return false
  let difference = 0
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!
  return difference === 0
}

/** Why `check` refuses a message. */
export const Refusal = Schema.Literal(
  /** `webhook-id`, `webhook-timestamp` or `webhook-signature` is missing. */
  "MissingHeader",
  /** `webhook-timestamp` is not a number of seconds. */
  "InvalidTimestamp",
  /** The timestamp is older than the tolerance: possibly a replay. */
  "TooOld",
  /** The timestamp is further ahead than the tolerance. */
  "TooNew",
  /** No `v1` signature matches any of the secrets: a wrong secret, or the body or headers were changed. */
  "BadSignature"
)
export type Refusal = typeof Refusal.Type

/** A refused message: why, and `message` saying it in a sentence. */
export interface Refused {
  readonly reason: Refusal
  readonly message: string
}

/** Request headers as node:http gives them (names in lower case), a plain record, or a fetch `Headers`. */
export type Headers =
  | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  | { readonly get: (name: string) => string | null }

const header = (headers: Headers, name: string): string | undefined => {
  if (typeof headers.get === "function") return (headers as { readonly get: (name: string) => string | null }).get(name) ?? undefined
  const record = headers as Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  const key = Object.hasOwn(record, name) ? name : Object.keys(record).find((candidate) => candidate.toLowerCase() === name)
  const value = key === undefined ? undefined : record[key]
  return typeof value === "string" ? value : value?.join(" ")
}

const refuse = (reason: Refusal, message: string): Either.Either<void, Refused> => Either.left({ reason, message })

/**
 * Checks a message per Standard Webhooks: the three headers are there, the timestamp is
 * within `tolerance` of `now` (epoch milliseconds), and one of the `v1` signatures is the HMAC
 * of the raw body under one of the secrets, compared in constant time. Pass the body exactly
 * as received: parsed and serialised again it no longer matches its signature.
 */
export const check = (
  secret: string | ReadonlyArray<string>,
  headers: Headers,
  body: string | Uint8Array,
  options: { readonly now: number; readonly tolerance?: Duration.DurationInput | undefined }
): Either.Either<void, Refused> => {
  const id = header(headers, "webhook-id")
  const timestamp = header(headers, "webhook-timestamp")
  const signatures = header(headers, "webhook-signature")
  const missing = [["webhook-id", id], ["webhook-timestamp", timestamp], ["webhook-signature", signatures]]
    .filter(([, value]) => value === undefined || value === "")
    .map(([name]) => name)
  if (missing.length > 0) return refuse("MissingHeader", `missing header ${missing.join(", ")}`)
  if (!/^\d{1,15}$/.test(timestamp!.trim())) return refuse("InvalidTimestamp", "webhook-timestamp is not a number of seconds")
  const seconds = Number(timestamp!.trim())
  const now = Math.floor(options.now / 1000)
  const tolerance = Duration.toSeconds(options.tolerance ?? defaultTolerance)
  if (now - seconds > tolerance) return refuse("TooOld", `webhook-timestamp is ${now - seconds} s old, more than the ${tolerance} s tolerated`)
  if (seconds - now > tolerance) return refuse("TooNew", `webhook-timestamp is ${seconds - now} s ahead, more than the ${tolerance} s tolerated`)

  const given = signatures!.split(" ").flatMap((entry) => {
    const [version, signature] = entry.split(",", 2)
    return version === "v1" && signature !== undefined ? [bytesOfBase64(signature)] : []
  })
  const keys = (typeof secret === "string" ? [secret] : secret).map(keyOf).filter((key) => key.length > 0)
  const genuine = keys.some((key) => {
    const expected = hmac(key, id!, timestamp!.trim(), body)
    return given.some((signature) => equalInConstantTime(signature, expected))
  })
  if (!genuine) {
    return refuse("BadSignature", keys.length === 0 ? "no signing secret was given" : "no signature matches the secret")
  }
  return Either.void
}

/** Whether a message is genuine and timely (within 5 minutes of `now`, epoch milliseconds): `check` as a yes or no. */
export const verify = (secret: string | ReadonlyArray<string>, headers: Headers, body: string | Uint8Array, now: number): boolean =>
  Either.isRight(check(secret, headers, body, { now }))
