/**
 * Pre-submission content moderation (spec section 7). Adapters: the local rules
 * (`ModerationRules`, the default), an OpenAI-compatible moderation API
 * (`@mediagate/upstream` `OpenAiModeration`), the simulator's marker for demos.
 */
import { Context, Effect, Layer, Metric } from "effect"
import { ModerationUnavailable } from "../domain/Errors.js"

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

/**
 * Checks a prompt before a task is accepted. A backend that cannot answer fails with
 * `ModerationUnavailable`: the submit is refused (503), unless the host wraps the service in
 * `failOpen`.
 */
export class Moderation extends Context.Tag("@mediagate/core/Moderation")<Moderation, {
  readonly check: (prompt: string) => Effect.Effect<ModerationVerdict, ModerationUnavailable>
}>() {}

/** Moderation that flags nothing. */
export const layerAllowAll: Layer.Layer<Moderation> = Layer.succeed(Moderation, {
  check: () => Effect.succeed(verdict())
})

/**
 * Times the moderation backend could not answer, by what was done about it: `refused` (the
 * submit answered 503) or `allowed` (failing open, the prompt went through unchecked).
 */
export const unavailableCount = Metric.counter("mediagate_moderation_unavailable_total", {
  description: "Prompts the moderation backend could not check, by what was done with the submit",
  incremental: true
})

/**
 * Counts each failure of `inner`'s backend and, failing open, lets the prompt through
 * (logged as a warning); failing closed (the default), the failure stands and the submit is
 * refused.
 */
export const counted = (
  inner: Context.Tag.Service<Moderation>,
  options: { readonly failOpen?: boolean } = {}
): Context.Tag.Service<Moderation> => ({
  check: (prompt) =>
    inner.check(prompt).pipe(
      Effect.catchTag("ModerationUnavailable", (error) => {
        const open = options.failOpen === true
        return Metric.increment(Metric.tagged(unavailableCount, "outcome", open ? "allowed" : "refused")).pipe(
          Effect.zipRight(Effect.logWarning(
            `moderation: ${error.message}; ${open ? "the prompt was let through unchecked (failing open)" : "the submit was refused (failing closed)"}`
          )),
          Effect.zipRight(open ? Effect.succeed(verdict()) : Effect.fail(error))
        )
      })
    )
})

/** Puts `counted` in front of the Moderation in context. */
export const layerCounted = (options: { readonly failOpen?: boolean } = {}): Layer.Layer<Moderation, never, Moderation> =>
  Layer.effect(Moderation, Effect.map(Moderation, (inner) => counted(inner, options)))

/**
 * Several moderators in turn: the first that flags the prompt decides; otherwise clean. A
 * moderator that cannot answer fails the whole check.
 */
export const all = (moderators: ReadonlyArray<Context.Tag.Service<Moderation>>): Context.Tag.Service<Moderation> => ({
  check: (prompt) =>
    Effect.reduce(moderators, verdict(), (found, moderator) => (found.flagged ? Effect.succeed(found) : moderator.check(prompt)))
})
