/**
 * An OpenAI-compatible moderation API (https://platform.openai.com/docs/api-reference/moderations)
 * as the Moderation service: `POST {base}/v1/moderations` with `{model, input}` and
 * `Authorization: Bearer <key>`; the answer's `results[0]` has `flagged` and `categories`, whose
 * keys for `omni-moderation-latest` are the spec's 13.
 *
 * Anything but a well-formed answer in time (a connection error, 401, 429, 5xx, a malformed
 * body, no answer within the time limit) is `ModerationUnavailable`, with what happened: the
 * submit is then refused with 503, or let through when the host fails open
 * (`Moderation.counted`). There is no retry here: the client's own retry of the submit is
 * one, and a submit should not wait on several moderation calls.
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import { Moderation, ModerationUnavailable } from "@mediagate/core"
import { Context, Duration, Effect, Layer, Option } from "effect"
import * as ProviderHttp from "./ProviderHttp.js"

export interface Options {
  /** The API key. */
  readonly key: string
  /** Default `https://api.openai.com`. */
  readonly baseUrl?: string
  /** Default `omni-moderation-latest`. */
  readonly model?: string
  /** How long a check may take. Default 5 s. */
  readonly timeout?: Duration.DurationInput
}

const name = "the moderation service"

/** The verdict of an answer's body, or None when the body is not a moderation answer. */
export const verdictOf = (body: unknown): Option.Option<Moderation.ModerationVerdict> => {
  const results = ProviderHttp.field(body, "results")
  const first: unknown = Array.isArray(results) ? results[0] : undefined
  const flagged = ProviderHttp.field(first, "flagged")
  const categories = ProviderHttp.field(first, "categories")
  if (typeof flagged !== "boolean" || typeof categories !== "object" || categories === null) return Option.none()
  const named = categories as Record<string, unknown>
  const flags = Object.fromEntries(Moderation.moderationCategories.map((category) => [category, named[category] === true]))
  return Option.some({ flagged, categories: flags })
}

export const make = (options: Options): Effect.Effect<Context.Tag.Service<Moderation.Moderation>, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const context = yield* Effect.context<HttpClient.HttpClient>()
    const url = `${(options.baseUrl ?? "https://api.openai.com").replace(/\/+$/, "")}/v1/moderations`
    const model = options.model ?? "omni-moderation-latest"
    const timeout = Duration.decode(options.timeout ?? "5 seconds")
    const unavailable = (message: string) => new ModerationUnavailable({ message })
    return {
      check: (prompt) =>
        ProviderHttp.send(name, {
          method: "POST",
          url,
          headers: { authorization: `Bearer ${options.key}` },
          body: { model, input: prompt }
        }).pipe(
          Effect.mapError((error) => unavailable(error.message)),
          Effect.timeoutFail({ duration: timeout, onTimeout: () => unavailable(`${name} did not answer within ${Duration.format(timeout)}`) }),
          Effect.flatMap((answer) =>
            Option.match(verdictOf(answer.body), {
              onNone: () => Effect.fail(unavailable(`${name} answered without a verdict: ${ProviderHttp.describeBody(answer.body) || "an empty body"}`)),
              onSome: Effect.succeed
            })
          ),
          Effect.provide(context)
        )
    }
  })

/** The OpenAI-compatible moderation API as the Moderation service. */
export const layer = (options: Options): Layer.Layer<Moderation.Moderation, never, HttpClient.HttpClient> =>
  Layer.effect(Moderation.Moderation, make(options))
