/**
 * Standard Webhooks signatures as the deliverer uses them: `sign`, and a receiver's
 * `verifyCallback`. The deliverer signs with node:crypto, the server's own HMAC; the check
 * is core's `StandardWebhooks` (synchronous and isomorphic, on @noble/hashes), shared with the
 * upstream adapters and the client. These names stay here for the scheduler's users.
 */
import { StandardWebhooks } from "@mediagate/core"
import { createHmac } from "node:crypto"

/** A new `whsec_` secret from 24 random bytes (given as hex, from the Ids service). */
export const secretFromHex: (hex: string) => string = StandardWebhooks.secretFromHex

/**
 * The `webhook-signature` value for a message: `v1,` and the base64 HMAC-SHA256 of
 * `<id>.<timestamp>.<body>` under the key a `whsec_` secret stands for (its base64 part, read
 * leniently by Buffer as core's check reads it). The same value as `StandardWebhooks.sign`.
 */
export const sign = (secret: string, id: string, timestampSeconds: number, body: string): string => {
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret, "base64")
  return `v1,${createHmac("sha256", key).update(`${id}.${timestampSeconds}.`).update(body).digest("base64")}`
}

export {
  type CallbackHeaders,
  CallbackVerificationError,
  verifyCallback,
  verifyCallbackEffect,
  verifyCallbackEvent,
  type VerifiedCallback,
  type VerifyOptions
} from "@mediagate/core"
