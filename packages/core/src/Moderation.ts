/**
 * Pre-submission content moderation (spec section 7).
 */
import { Context, Effect, Layer } from "effect"

/** The 13 moderation categories, in the spec's order. */
export const moderationCategories = [
  "harassment",
  "harassment/threatening",
  "sexual",
  "hate",
  "hate/threatening",
  "illicit",
  "illicit/violent",
  "self-harm/intent",
  "self-harm/instructions",
  "self-harm",
  "sexual/minors",
  "violence",
  "violence/graphic"
] as const
export type ModerationCategory = typeof moderationCategories[number]

/**
 * A moderation verdict. A moderator may leave categories out (a third-party API names only
 * the ones it knows); the answer to the client always has all 13, missing ones false.
 */
export interface ModerationVerdict {
  readonly flagged: boolean
  readonly categories: Readonly<Partial<Record<ModerationCategory, boolean>>>
}

/** A verdict with the given categories flagged. */
export const verdict = (flaggedCategories: ReadonlyArray<ModerationCategory> = []): ModerationVerdict => {
  const categories = Object.fromEntries(
    moderationCategories.map((category) => [category, flaggedCategories.includes(category)])
  ) as Record<ModerationCategory, boolean>
  return { flagged: flaggedCategories.length > 0, categories }
}

/** Checks a prompt before a task is accepted. */
export class Moderation extends Context.Tag("@mediagate/core/Moderation")<Moderation, {
  readonly check: (prompt: string) => Effect.Effect<ModerationVerdict>
}>() {}

/** Moderation that flags nothing. */
export const layerAllowAll: Layer.Layer<Moderation> = Layer.succeed(Moderation, {
  check: () => Effect.succeed(verdict())
})
