/**
 * Provider webhooks: each adapter asks for one at submit when given a webhook URL, and
 * accepts only a webhook signed with the provider's keys and fresh: fal (ED25519, keys from
 * a JWKS), Replicate (Standard Webhooks, with its secret given or fetched), the relay
 * (Standard Webhooks with the gateway's secret).
 */
import type { HttpClient } from "@effect/platform"
import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Ids, StandardWebhooks } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { Fal, Relay, Replicate } from "@mediagate/upstream"
import { Effect } from "effect"
import { generateKeyPairSync } from "node:crypto"
import * as FakeFal from "./fakes/FakeFal.js"
import * as FakeReplicate from "./fakes/FakeReplicate.js"
import * as FakeServer from "./fakes/FakeServer.js"

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
const now = 1_800_000_000_000
const bytes = (text: string) => new Uint8Array(Buffer.from(text))
/** Standard Webhooks headers for `body` at `seconds`. */
const signed = (body: string, seconds: number, key = secret) => ({
  "webhook-id": "msg_1",
  "webhook-timestamp": String(seconds),
  "webhook-signature": `v1,bm90LXRoaXMtb25l ${StandardWebhooks.sign(key, "msg_1", seconds, body)}`
})

describe("Standard Webhooks", () => {
  const body = JSON.stringify({ id: "pred1", status: "succeeded" })
  it("accepts a good signature among several, refuses a bad, a stale or a missing one", () => {
    expect(StandardWebhooks.verify(secret, signed(body, now / 1000), bytes(body), now)).toBe(true)
    expect(StandardWebhooks.verify(secret, signed(body, now / 1000), bytes(`${body} `), now)).toBe(false)
    expect(StandardWebhooks.verify(secret, signed(body, now / 1000, "whsec_b3RoZXItc2VjcmV0LW90aGVyLXNlY3JldA=="), bytes(body), now)).toBe(false)
    expect(StandardWebhooks.verify(secret, signed(body, now / 1000 - 301), bytes(body), now)).toBe(false)
    expect(StandardWebhooks.verify(secret, signed(body, now / 1000 + 301), bytes(body), now)).toBe(false)
    expect(StandardWebhooks.verify(secret, { "webhook-id": "msg_1" }, bytes(body), now)).toBe(false)
  })
})

let fal: Awaited<ReturnType<typeof FakeFal.start>>
let replicate: Awaited<ReturnType<typeof FakeReplicate.start>>
let gateway: FakeServer.FakeServer
beforeAll(async () => {
  fal = await FakeFal.start({ key: "k" })
  replicate = await FakeReplicate.start({ token: "r8" })
  gateway = await FakeServer.start((request) =>
    request.path === "/api/v1/task/submit" ? { status: 200, body: { code: 0, msg: "ok", data: { taskId: "down-1" } } } : undefined
  )
})
afterAll(() => Promise.all([fal.close(), replicate.close(), gateway.close()]))

const run = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient>) => Effect.runPromise(Effect.provide(effect, FetchHttpClient.layer))
const context = { taskId: Ids.TaskId.make("t1"), idempotencyKey: "t1.1", request: { model: "m", prompt: "x" }, webhookUrl: "https://gw.example/webhooks/p/t1" }
const webhook = (provider: string, headers: Record<string, string>, body: string) => ({ provider, token: "t1", headers, body: bytes(body) })

describe("fal webhooks", () => {
  it("the submit names the webhook; a webhook signed with a key of the JWKS and fresh is accepted", async () => {
    const provider = Fal.make({ key: "k", baseUrl: fal.url, jwksUrl: fal.jwksUrl })
    await run(provider.submit({ job: Testing.job(), model: "fal-ai/flux/dev" }, { prompt: "x" }, context))
    expect(fal.requests.at(-1)!.path).toBe("/fal-ai/flux/dev")
    expect([...fal.jobs.values()].at(-1)!.webhook).toBe(context.webhookUrl)
    const body = JSON.stringify({ request_id: "req-1", status: "OK" })
    const at = Math.floor(Date.now() / 1000)
    const verify = (headers: Record<string, string>, text = body) => run(provider.verifyWebhook!(webhook("fal", headers, text)))
    expect(await verify(FakeFal.signWebhook("req-1", body, at))).toBe(true)
    // The body changed, a stale timestamp, another key, no signature.
    expect(await verify(FakeFal.signWebhook("req-1", body, at), `${body} `)).toBe(false)
    expect(await verify(FakeFal.signWebhook("req-1", body, at - 600))).toBe(false)
    expect(await verify(FakeFal.signWebhook("req-1", body, at, generateKeyPairSync("ed25519").privateKey))).toBe(false)
    expect(await verify({})).toBe(false)
    // The keys were fetched once.
    expect(fal.requests.filter((r) => r.path === "/.well-known/jwks.json")).toHaveLength(1)
  })

  it("keys that cannot be fetched refuse the webhook (logged) and are asked for again next time", async () => {
    const provider = Fal.make({ key: "k", baseUrl: fal.url, jwksUrl: `${fal.url}/missing.json` })
    const body = "{}"
    const headers = FakeFal.signWebhook("r", body, Math.floor(Date.now() / 1000))
    expect(await run(provider.verifyWebhook!(webhook("fal", headers, body)))).toBe(false)
    expect(await run(provider.verifyWebhook!(webhook("fal", headers, body)))).toBe(false)
    expect(fal.requests.filter((r) => r.path === "/missing.json")).toHaveLength(2)
  })
})

describe("Replicate webhooks", () => {
  it("the prediction is created with the webhook, completed events only; the given secret checks signatures", async () => {
    const provider = Replicate.make({ token: "r8", baseUrl: replicate.url, webhookSecret: secret })
    await run(provider.submit({ job: Testing.job(), model: "o/m" }, { prompt: "x" }, context))
    expect(FakeServer.json(replicate.requests.at(-1)!)).toEqual({ input: { prompt: "x" }, webhook: context.webhookUrl, webhook_events_filter: ["completed"] })
    const body = JSON.stringify({ id: "pred1", status: "succeeded" })
    const at = Math.floor(Date.now() / 1000)
    expect(await run(provider.verifyWebhook!(webhook("replicate", signed(body, at), body)))).toBe(true)
    expect(await run(provider.verifyWebhook!(webhook("replicate", signed(body, at - 400), body)))).toBe(false)
  })

  it("without a secret, it is fetched from Replicate once", async () => {
    replicate.failNext({ status: 200, body: { key: secret } }, { path: /^\/v1\/webhooks\/default\/secret$/ })
    const provider = Replicate.make({ token: "r8", baseUrl: replicate.url })
    const body = "{}"
    const at = Math.floor(Date.now() / 1000)
    expect(await run(provider.verifyWebhook!(webhook("replicate", signed(body, at), body)))).toBe(true)
    expect(await run(provider.verifyWebhook!(webhook("replicate", signed(body, at), body)))).toBe(true)
    expect(replicate.requests.filter((r) => r.path === "/v1/webhooks/default/secret")).toHaveLength(1)
  })
})

describe("relay callbacks", () => {
  it("the submit sets callBackUrl; with the gateway's secret only its signed callbacks are accepted", async () => {
    const provider = Relay.make({ baseUrl: gateway.url, key: "gw", webhookSecret: secret })
    await run(provider.submit({ job: Testing.job(), model: "m" }, { model: "m", prompt: "x" }, context))
    expect(FakeServer.json(gateway.requests.at(-1)!)).toEqual({ model: "m", input: { prompt: "x" }, callBackUrl: context.webhookUrl })
    const body = JSON.stringify({ code: 0, msg: "ok", data: { taskId: "down-1", status: "SUCCESS" } })
    const at = Math.floor(Date.now() / 1000)
    expect(await run(provider.verifyWebhook!(webhook("relay", signed(body, at), body)))).toBe(true)
    expect(await run(provider.verifyWebhook!(webhook("relay", signed(body, at), body.replace("SUCCESS", "FAILURE"))))).toBe(false)
    // Without a secret a callback is only a wake-up, taken as it comes.
    expect(await run(Relay.make({ baseUrl: gateway.url, key: "gw" }).verifyWebhook!(webhook("relay", {}, body)))).toBe(true)
  })
})
