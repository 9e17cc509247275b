/**
 * Standard Webhooks signatures as the deliverer uses them: `sign`, and a receiver's
 * `verifyCallback`. The scheme has one implementation, core's `StandardWebhooks`, shared with
 * the upstream adapters' checks and the client; these names stay here for the scheduler's users.
 */
import { StandardWebhooks } from "@mediagate/core"

/** A new `whsec_` secret from 24 random bytes (given as hex, from the Ids service). */
export const secretFromHex: (hex: string) => string = StandardWebhooks.secretFromHex

/** The `webhook-signature` value for a message. */
export const sign: (secret: string, id: string, timestampSeconds: number, body: string) => string = StandardWebhooks.sign

export {
  type CallbackHeaders,
  CallbackVerificationError,
  verifyCallback,
  verifyCallbackEffect,
  verifyCallbackEvent,
  type VerifiedCallback,
  type VerifyOptions
} from "@mediagate/core"
