/** The callback deliverer. */
export * as Deliverer from "./Deliverer.js"
/** The task lifecycle engine. */
export * as Engine from "./Engine.js"
/** Standard Webhooks signatures. */
export * as Webhooks from "./Webhooks.js"
/** The settlement sweep: credits left open by a crash, settled. */
export * as Settlements from "./Settlements.js"
/** A receiver's check of a callback (Standard Webhooks), and why it refuses one. */
export { CallbackVerificationError, verifyCallback, verifyCallbackEvent } from "./Webhooks.js"
