/**
 * The account cache of the standard composition: a key's account is looked up once per
 * few seconds, not on every request; the cache expires on the Clock and can be dropped.
 */
import { HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Accounts, Ids } from "@mediagate/core"
import { Backends, Deployment } from "@mediagate/server"
import { MediagateHttp } from "@mediagate/http"
import { MemoryAccounts } from "@mediagate/store-memory"
import { Context, Effect, Layer, Option, Redacted, TestClock } from "effect"
import { apiKey } from "./support.js"

let lookups = 0
// The accounts' admin side as it is; only the lookups are counted.
const counting = Layer.effectContext(
  Effect.map(Effect.context<Accounts.Accounts | Accounts.AccountAdmin>(), (context) => {
    const inner = Context.get(context, Accounts.Accounts)
    return Context.add(context, Accounts.Accounts, {
      ...inner,
      authenticate: (key: Redacted.Redacted<string>) => Effect.suspend(() => (lookups++, inner.authenticate(key)))
    })
  })
).pipe(Layer.provide(MemoryAccounts.layer([{ id: "acct_test", name: "test", apiKey: Redacted.make(apiKey) }])))

const server = Layer.unwrapEffect(
  Effect.gen(function*() {
    const address = (yield* HttpServer.HttpServer).address
    const backends = Backends.memoryBackends({ publicUrl: `http://127.0.0.1:${address._tag === "TcpAddress" ? address.port : 0}` }, [])
    return MediagateHttp.serve.pipe(
      Layer.provide(Deployment.services({ simulatorProfile: "instant", allowPrivateUrls: false, backends: { ...backends, accounts: counting } }))
    )
  })
).pipe(Layer.provideMerge(NodeHttpServer.layerTest))

const query = (key: string) =>
  Effect.flatMap(HttpClient.HttpClient, (client) =>
    client.execute(HttpClientRequest.get("/api/v1/task/0190c8a4-0000-7000-8000-000000000000").pipe(HttpClientRequest.bearerToken(key)))
  ).pipe(Effect.map((response) => response.status))

describe("the account cache", () => {
  it.layer(server)((it) => {
    it.effect("looks a key up once, again after 5 s; unknown keys are never cached", () =>
      Effect.gen(function*() {
        lookups = 0
        for (let i = 0; i < 5; i++) expect(yield* query(apiKey)).toBe(404)
        expect(lookups).toBe(1)
        yield* TestClock.adjust("6 seconds")
        expect(yield* query(apiKey)).toBe(404)
        expect(lookups).toBe(2)
        for (let i = 0; i < 3; i++) expect(yield* query("mg_not_a_key")).toBe(401)
        expect(lookups).toBe(5)
      }))
  })

  it.effect("invalidate drops every cached key at once", () =>
    Effect.gen(function*() {
      let calls = 0
      const inner: Accounts.Accounts["Type"] = {
        authenticate: () => Effect.sync(() => (calls++, Option.some({ id: Ids.AccountId.make("acct_a"), name: "a" }))),
        webhookSecret: () => Effect.succeed(Option.none())
      }
      const cache = Accounts.cached(inner)
      yield* cache.authenticate(Redacted.make("k"))
      yield* cache.authenticate(Redacted.make("k"))
      expect(calls).toBe(1)
      yield* cache.invalidate
      yield* cache.authenticate(Redacted.make("k"))
      expect(calls).toBe(2)
    }))
})
