/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): `webhook-id`,
 * `webhook-timestamp` and `webhook-signature: v1,<base64 HMAC-SHA256>` over
 * `<id>.<timestamp>.<body>`, keyed by the base64 part of a `whsec_` secret.
 */
import { createHmac } from "node:crypto"

/** A new `whsec_` secret from 24 random bytes (given as hex, from the Ids service). */
export const secretFromHex = (hex: string): string => `whsec_${Buffer.from(hex, "hex").toString("base64")}`

/** The `webhook-signature` value for a message. */
export const sign = (secret: string, id: string, timestampSeconds: number, body: string): string => {
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret, "base64")
  return `v1,${createHmac("sha256", key).update(`${id}.${timestampSeconds}.${body}`).digest("base64")}`
}
