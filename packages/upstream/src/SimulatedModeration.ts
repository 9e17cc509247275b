/**
 * Moderation for demos and tests: flags prompts that carry the `[sim:moderation]` marker.
 */
import { Moderation } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer } from "effect"

/** The marker that makes moderation reject a prompt. */
export const marker = "[sim:moderation]"

/** Moderation that flags `violence` and `violence/graphic` for marked prompts and passes the rest. */
export const moderator: Context.Tag.Service<Moderation.Moderation> = {
  check: (prompt) =>
    Effect.succeed(prompt.includes(marker) ? Moderation.verdict(["violence", "violence/graphic"]) : Moderation.verdict())
}

/** `moderator` as the Moderation. */
export const layer: Layer.Layer<Moderation.Moderation> = Layer.succeed(Moderation.Moderation, moderator)
