/**
 * The OpenAI-compatible moderation client against a loopback fake speaking the moderations
 * API: verdicts, and every way the backend can fail (wrong key, 429, 5xx, a malformed
 * answer, no answer in time, nobody listening), each a ModerationUnavailable with its cause;
 * and what the host does with that: refuse (counted) or, failing open, let the prompt
 * through (counted).
 */
import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Moderation } from "@mediagate/core"
import { OpenAiModeration } from "@mediagate/upstream"
import { Effect, Layer, Metric } from "effect"
import * as FakeOpenAi from "./fakes/FakeOpenAi.js"
import type * as FakeServer from "./fakes/FakeServer.js"

let api: FakeServer.FakeServer
beforeAll(async () => {
  api = await FakeOpenAi.start({ key: "sk-mod" })
})
afterAll(() => api.close())

const moderator = (options: Partial<OpenAiModeration.Options> = {}) =>
  OpenAiModeration.layer({ key: "sk-mod", baseUrl: api.url, timeout: "500 millis", ...options }).pipe(Layer.provide(FetchHttpClient.layer))

const check = (prompt: string, options?: Partial<OpenAiModeration.Options>) =>
  Effect.flatMap(Moderation.Moderation, (moderation) => moderation.check(prompt)).pipe(Effect.provide(moderator(options)))

const failure = (prompt: string, options?: Partial<OpenAiModeration.Options>) =>
  Effect.map(Effect.flip(check(prompt, options)), (error) => [error._tag, error.message] as const)

describe("OpenAI-compatible moderation client", () => {
  it.live("sends the model and the prompt with the key, and reads the verdict's 13 categories", () =>
    Effect.gen(function*() {
      const verdict = yield* check("a storm at sea, violence! and violence/graphic!")
      expect(verdict.flagged).toBe(true)
      expect(Object.entries(verdict.categories).filter(([, on]) => on).map(([name]) => name).sort()).toEqual(["violence", "violence/graphic"])
      expect(Object.keys(verdict.categories).sort()).toEqual([...Moderation.moderationCategories].sort())
      const sent = api.requests.at(-1)!
      expect([sent.method, sent.path, sent.headers.authorization]).toEqual(["POST", "/v1/moderations", "Bearer sk-mod"])
      expect(JSON.parse(sent.body)).toEqual({ model: "omni-moderation-latest", input: "a storm at sea, violence! and violence/graphic!" })

      expect(yield* check("a lighthouse at dusk", { model: "text-moderation-007" })).toMatchObject({ flagged: false })
      expect(JSON.parse(api.requests.at(-1)!.body).model).toBe("text-moderation-007")
    }))

  it.live("a wrong key, 429, 5xx and a malformed answer are ModerationUnavailable, saying what happened", () =>
    Effect.gen(function*() {
      expect(yield* failure("x", { key: "sk-wrong" })).toEqual([
        "ModerationUnavailable",
        "the moderation service answered 401: Incorrect API key provided"
      ])
      api.failNext({ status: 429, headers: { "retry-after": "2" }, body: { error: { message: "Rate limit reached for omni-moderation-latest" } } })
      expect(yield* failure("x")).toEqual(["ModerationUnavailable", "the moderation service answered 429: Rate limit reached for omni-moderation-latest"])
      api.failNext({ status: 503, body: { error: { message: "The server is overloaded" } } })
      expect(yield* failure("x")).toEqual(["ModerationUnavailable", "the moderation service answered 503: The server is overloaded"])
      api.failNext({ status: 200, body: { id: "modr-2", results: [] } })
      expect((yield* failure("x"))[1]).toMatch(/^the moderation service answered without a verdict/)
      api.failNext({ status: 200, body: "<html>gateway</html>" })
      expect((yield* failure("x"))[1]).toMatch(/^the moderation service answered without a verdict: <html>gateway<\/html>/)
    }))

  it.live("no answer within the time limit, or nobody listening, is ModerationUnavailable", () =>
    Effect.gen(function*() {
      api.failNext("hang")
      expect(yield* failure("x", { timeout: "200 millis" })).toEqual([
        "ModerationUnavailable",
        "the moderation service did not answer within 200ms"
      ])
      const [tag, message] = yield* failure("x", { baseUrl: "http://127.0.0.1:9" })
      expect(tag).toBe("ModerationUnavailable")
      expect(message).toMatch(/^the moderation service could not be reached/)
    }))
})

describe("a moderation backend that cannot answer", () => {
  // The client itself, with a key the fake refuses.
  const down = () => moderator({ key: "sk-wrong" })
  const counts = Effect.gen(function*() {
    const refused = yield* Metric.value(Metric.tagged(Moderation.unavailableCount, "outcome", "refused"))
    const allowed = yield* Metric.value(Metric.tagged(Moderation.unavailableCount, "outcome", "allowed"))
    return [refused.count, allowed.count]
  })

  it.live("fails closed by default: the failure stands and is counted as refused", () =>
    Effect.gen(function*() {
      const [refused, allowed] = yield* counts
      const error = yield* Effect.flip(Effect.flatMap(Moderation.Moderation, (m) => m.check("x")).pipe(
        Effect.provide(Moderation.layerCounted().pipe(Layer.provide(down())))
      ))
      expect(error._tag).toBe("ModerationUnavailable")
      expect(yield* counts).toEqual([refused! + 1, allowed])
    }))

  it.live("failing open lets the prompt through unflagged, counted as allowed", () =>
    Effect.gen(function*() {
      const [refused, allowed] = yield* counts
      const verdict = yield* Effect.flatMap(Moderation.Moderation, (m) => m.check("x")).pipe(
        Effect.provide(Moderation.layerCounted({ failOpen: true }).pipe(Layer.provide(down())))
      )
      expect(verdict.flagged).toBe(false)
      expect(yield* counts).toEqual([refused, allowed! + 1])
    }))
})
