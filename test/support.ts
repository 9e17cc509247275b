/**
 * Shared pieces of the black-box suites: the standalone composition on a loopback test server.
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Ids, ModelCatalog, Moderation, TaskService } from "@mediagate/core"
import type { Engine } from "@mediagate/scheduler"
import { MemoryAccounts, MemoryLedger, MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import { Health, MediagateHttp, Prometheus } from "@mediagate/http"
import type { Simulator } from "@mediagate/upstream"
import { memoryBackends, services } from "@mediagate/example-standalone-server/Server"
import type { Context } from "effect"
import { Effect, Layer, Redacted } from "effect"

/** The key of the test account. */
export const apiKey = "mg_test_key_0123456789"

/** The callback signing secret of the test account. */
export const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

/** The key of a second account, to check that tasks are private to their owner. */
export const otherApiKey = "mg_other_key_9876543210"

/** What each test account starts with: $1,000 in micro-USD. */
export const testCredits = 1_000_000_000

/** The standalone composition served by NodeHttpServer.layerTest; media URLs point at that server. */
export const testServer = (options: {
  readonly profile?: "instant" | "demo" | "realistic"
  readonly allowPrivateUrls?: boolean
  readonly engine?: Engine.Options
  readonly simulatorStats?: Simulator.Stats
  /** The test account's starting credits in micro-USD (default `testCredits`). */
  readonly credits?: number
  /** What readiness hears from the engine, instead of the composition's own engine. */
  readonly engineStatus?: Context.Tag.Service<Health.EngineStatus>
  /** Serve `GET /metrics` (MEDIAGATE_METRICS). */
  readonly metrics?: boolean
} = {}) =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      const port = server.address._tag === "TcpAddress" ? server.address.port : 0
      const engineStatus = options.engineStatus
      return MediagateHttp.serve.pipe(
        (served) => engineStatus === undefined ? served : Layer.provide(served, Layer.succeed(Health.EngineStatus, engineStatus)),
        (served) => options.metrics === true ? Layer.provide(served, Layer.succeed(Prometheus.Enabled, true)) : served,
        Layer.provide(
          services(
            {
              simulatorProfile: options.profile ?? "instant",
              allowPrivateUrls: options.allowPrivateUrls ?? false,
              ...(options.simulatorStats === undefined ? {} : { simulatorStats: options.simulatorStats })
            },
            memoryBackends({ publicUrl: `http://127.0.0.1:${port}` }, [
              { id: "acct_test", name: "test", apiKey: Redacted.make(apiKey), webhookSecret: Redacted.make(webhookSecret), credits: options.credits ?? testCredits },
              { id: "acct_other", name: "other", apiKey: Redacted.make(otherApiKey), credits: testCredits }
            ]),
            options.engine
          )
        )
      )
    })
  ).pipe(Layer.provideMerge(NodeHttpServer.layerTest))

/** The API without an engine, on a loopback test server: a task stays PENDING until a request changes it. */
export const idleServer = MediagateHttp.serve.pipe(
  Layer.provide(
    Layer.mergeAll(
      TaskService.Default.pipe(Layer.provide([MemoryTaskStore.layer, ModelCatalog.layer, Moderation.layerAllowAll])),
      MemoryAccounts.layer([
        { id: "acct_a", name: "a", apiKey: Redacted.make(apiKey) },
        { id: "acct_b", name: "b", apiKey: Redacted.make(otherApiKey) }
      ]),
      MemoryLedger.layer,
      MemoryMediaStore.layer({ baseUrl: "http://127.0.0.1/media" }),
      ModelCatalog.layer
    ).pipe(Layer.provide(Ids.layerTest))
  ),
  Layer.provideMerge(NodeHttpServer.layerTest)
)
