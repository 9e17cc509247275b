/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): `webhook-id`,
 * `webhook-timestamp` and `webhook-signature: v1,<base64 HMAC-SHA256>` over
 * `<id>.<timestamp>.<body>`, keyed by the base64 part of a `whsec_` secret. The deliverer
 * signs with `sign`; a receiver checks a callback with `verifyCallback`.
 */
import { Api } from "@mediagate/core"
import type { Task } from "@mediagate/core"
import { Clock, Duration, Effect, Either, Schema } from "effect"
import { createHmac, timingSafeEqual } from "node:crypto"

/** A new `whsec_` secret from 24 random bytes (given as hex, from the Ids service). */
export const secretFromHex = (hex: string): string => `whsec_${Buffer.from(hex, "hex").toString("base64")}`

/** The key a secret stands for: the base64 after `whsec_` (or the whole secret without the prefix). */
const keyOf = (secret: string): Buffer =>
  Buffer.from(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret, "base64")

const hmac = (key: Buffer, id: string, timestampSeconds: number | string, body: string | Uint8Array): Buffer =>
  createHmac("sha256", key).update(`${id}.${timestampSeconds}.`).update(body).digest()

/** The `webhook-signature` value for a message. */
export const sign = (secret: string, id: string, timestampSeconds: number, body: string): string =>
  `v1,${hmac(keyOf(secret), id, timestampSeconds, body).toString("base64")}`

/** Why a callback was refused; `message` says it in a sentence. */
export class CallbackVerificationError extends Schema.TaggedError<CallbackVerificationError>()("CallbackVerificationError", {
  reason: Schema.Literal(
    /** `webhook-id`, `webhook-timestamp` or `webhook-signature` is missing. */
    "MissingHeader",
    /** `webhook-timestamp` is not a number of seconds. */
    "InvalidTimestamp",
    /** The timestamp is older than the tolerance: possibly a replay. */
    "TooOld",
    /** The timestamp is further ahead than the tolerance. */
    "TooNew",
    /** No `v1` signature matches any of the secrets: a wrong secret, or the body or headers were changed. */
    "BadSignature",
    /** Genuine, but the body is not a mediagate callback (`{ code: 0, msg: "ok", data: <task> }`). */
    "InvalidBody"
  ),
  message: Schema.String
}) {}

/** Request headers as node:http gives them (names in lower case), a plain record, or a fetch `Headers`. */
export type CallbackHeaders =
  | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  | { readonly get: (name: string) => string | null }

/** Options of `verifyCallback`. */
export interface VerifyOptions {
  /** How far `webhook-timestamp` may be from now, either way. Default 5 minutes. */
  readonly tolerance?: Duration.DurationInput
  /** The time to check the timestamp against, in epoch milliseconds (tests). Default: the wall clock. */
  readonly now?: number
}

const header = (headers: CallbackHeaders, name: string): string | undefined => {
  if (typeof headers.get === "function") return (headers as { readonly get: (name: string) => string | null }).get(name) ?? undefined
  const record = headers as Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  const key = Object.hasOwn(record, name) ? name : Object.keys(record).find((candidate) => candidate.toLowerCase() === name)
  const value = key === undefined ? undefined : record[key]
  return typeof value === "string" ? value : value?.join(" ")
}

const refuse = (reason: CallbackVerificationError["reason"], message: string) =>
  Either.left(new CallbackVerificationError({ reason, message }))

const decodeBody = Schema.decodeUnknownEither(Schema.parseJson(Api.TaskResponse), { onExcessProperty: "preserve" })

/**
 * Checks a callback as a receiver gets it, per Standard Webhooks: the three headers are
 * there, the timestamp is within `tolerance` of now (5 minutes by default), and one of the
 * `v1` signatures in `webhook-signature` (space-separated: during a secret rotation there are
 * two) is the HMAC of the raw body under one of the given secrets, compared in constant time.
 * Answers the task the callback carries, or why it was refused. Pass the body exactly as
 * received: parsed and serialised again it no longer matches its signature.
 */
export const verifyCallback = (
  secret: string | ReadonlyArray<string>,
  headers: CallbackHeaders,
  body: string | Uint8Array,
  options: VerifyOptions = {}
): Either.Either<Task.Task, CallbackVerificationError> => {
  const id = header(headers, "webhook-id")
  const timestamp = header(headers, "webhook-timestamp")
  const signatures = header(headers, "webhook-signature")
  const missing = [["webhook-id", id], ["webhook-timestamp", timestamp], ["webhook-signature", signatures]]
    .filter(([, value]) => value === undefined || value === "")
    .map(([name]) => name)
  if (missing.length > 0) return refuse("MissingHeader", `missing header ${missing.join(", ")}`)
  if (!/^\d{1,15}$/.test(timestamp!.trim())) return refuse("InvalidTimestamp", "webhook-timestamp is not a number of seconds")
  const seconds = Number(timestamp!.trim())
  // A receiver's check, outside any Effect runtime: the wall clock unless told (verifyCallbackEffect reads the Clock).
  const now = Math.floor((options.now ?? Date.now()) / 1000)
  const tolerance = Duration.toSeconds(options.tolerance ?? "5 minutes")
  if (now - seconds > tolerance) return refuse("TooOld", `webhook-timestamp is ${now - seconds} s old, more than the ${tolerance} s tolerated`)
  if (seconds - now > tolerance) return refuse("TooNew", `webhook-timestamp is ${seconds - now} s ahead, more than the ${tolerance} s tolerated`)

  const given = signatures!.split(" ").flatMap((entry) => {
    const [version, signature] = entry.split(",", 2)
    return version === "v1" && signature !== undefined ? [Buffer.from(signature, "base64")] : []
  })
  const keys = (typeof secret === "string" ? [secret] : secret).map(keyOf).filter((key) => key.length > 0)
  const genuine = keys.some((key) => {
    const expected = hmac(key, id!, timestamp!.trim(), body)
    return given.some((signature) => signature.length === expected.length && timingSafeEqual(signature, expected))
  })
  if (!genuine) {
    return refuse("BadSignature", keys.length === 0 ? "no signing secret was given" : "no signature matches the secret")
  }
  const text = typeof body === "string" ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8")
  return Either.match(decodeBody(text), {
    onLeft: () => refuse("InvalidBody", "the body is not a mediagate callback"),
    onRight: (envelope) => Either.right(envelope.data)
  })
}

/** `verifyCallback` with the time from the Clock in context (TestClock in tests). */
export const verifyCallbackEffect = (
  secret: string | ReadonlyArray<string>,
  headers: CallbackHeaders,
  body: string | Uint8Array,
  options: Omit<VerifyOptions, "now"> = {}
): Effect.Effect<Task.Task, CallbackVerificationError> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => verifyCallback(secret, headers, body, { ...options, now }))
