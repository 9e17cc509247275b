/**
 * Verifying Standard Webhooks signatures (https://www.standardwebhooks.com), as Replicate
 * and mediagate itself sign: `webhook-id`, `webhook-timestamp` and `webhook-signature`
 * (space-separated `v1,<base64 HMAC-SHA256>` values) over `<id>.<timestamp>.<body>`, keyed by
 * the base64 part of a `whsec_` secret. A timestamp more than 5 minutes from now is refused
 * (a replay).
 */
import { createHmac, timingSafeEqual } from "node:crypto"

/** How far a webhook's timestamp may be from now. */
export const tolerance = 5 * 60 * 1000

export const verify = (
  secret: string,
  headers: Readonly<Record<string, string | undefined>>,
  body: Uint8Array,
  now: number
): boolean => {
  const id = headers["webhook-id"]
  const timestamp = headers["webhook-timestamp"]
  const signatures = headers["webhook-signature"]
  if (id === undefined || timestamp === undefined || signatures === undefined || !/^\d+$/.test(timestamp)) return false
  if (Math.abs(now - Number(timestamp) * 1000) > tolerance) return false
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret, "base64")
  const expected = createHmac("sha256", key).update(`${id}.${timestamp}.`).update(body).digest()
  return signatures.split(" ").some((entry) => {
    const [version, value] = entry.split(",")
    if (version !== "v1" || value === undefined) return false
    const given = Buffer.from(value, "base64")
    return given.length === expected.length && timingSafeEqual(given, expected)
  })
}
