/**
 * Shared pieces of the black-box suites: the standalone composition on a loopback test server.
 */
import type { Headers, HttpMethod } from "@effect/platform"
import { FetchHttpClient, HttpBody, HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { AdminKeys, AdminOperations, Api, Ids, ModelCatalog, Moderation, TaskServiceAlone } from "@mediagate/core"
import type { Engine } from "@mediagate/scheduler"
import { MemoryAccounts, MemoryAdminKeys, MemoryAuditLog, MemoryLedger, MemoryMediaStore, MemoryTaskStore, MemoryUploads, MemoryUsage } from "@mediagate/store-memory"
import { Health, MediagateHttp, Prometheus } from "@mediagate/http"
import type { Simulator } from "@mediagate/upstream"
import { Backends, Deployment } from "@mediagate/server"
import type { Context } from "effect"
import { Effect, Layer, Option, Redacted } from "effect"

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
  /** An admin key given as configuration (MEDIAGATE_ADMIN_KEY), for the admin API. */
  readonly adminKey?: string
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
          Deployment.services({
            simulatorProfile: options.profile ?? "instant",
            allowPrivateUrls: options.allowPrivateUrls ?? false,
            ...(options.simulatorStats === undefined ? {} : { simulatorStats: options.simulatorStats }),
            backends: Backends.memoryBackends({ publicUrl: `http://127.0.0.1:${port}` }, [
              { id: "acct_test", name: "test", apiKey: Redacted.make(apiKey), webhookSecret: Redacted.make(webhookSecret), credits: options.credits ?? testCredits },
              { id: "acct_other", name: "other", apiKey: Redacted.make(otherApiKey), credits: testCredits }
            ]),
            ...(options.engine === undefined ? {} : { engine: options.engine }),
            ...(options.adminKey === undefined ? {} : { adminKey: Option.some(Redacted.make(options.adminKey)) })
          })
        )
      )
    })
  ).pipe(Layer.provideMerge(NodeHttpServer.layerTest))

/**
 * The admin API's services in memory (no admin key until one is created), and the usage
 * reads over the task store and ledger (and no uploads: these compositions take none), over
 * the use cases and backends of a composition made by hand: what `MediagateHttp.serve` needs besides them.
 */
export const memoryAdmin = Layer.merge(
  AdminOperations.layer.pipe(Layer.provideMerge(Layer.mergeAll(MemoryAdminKeys.layer, MemoryAuditLog.layer))),
  MemoryUsage.layer.pipe(Layer.provide(MemoryUploads.layer))
)

/**
 * The use cases and backends of the API in memory, with no engine (a task stays PENDING):
 * `accounts`, `moderation`, and the admin API's services on the same store and ids, with
 * `adminKey`, when given, as its given key.
 */
export const memoryApiServices = (
  accounts: ReadonlyArray<MemoryAccounts.AccountWithKey>,
  moderation: Layer.Layer<Moderation.Moderation>,
  adminKey?: string
) =>
  Layer.mergeAll(
    TaskServiceAlone.layer.pipe(Layer.provide([MemoryTaskStore.layer, ModelCatalog.layer, moderation, TaskServiceAlone.noUpstream])),
    MemoryAccounts.layer(accounts),
    MemoryMediaStore.layer({ baseUrl: "http://127.0.0.1/media" }),
    MemoryLedger.layer,
    ModelCatalog.layer
  ).pipe(
    Layer.provide(Ids.layerTest),
    // The same store and ids (layers are memoised by reference).
    (services) => Layer.provideMerge(memoryAdmin.pipe(Layer.provide([MemoryTaskStore.layer, Ids.layerTest])), services),
    (services) => adminKey === undefined ? services : Layer.provideMerge(AdminKeys.layerWithGiven(Redacted.make(adminKey)), services)
  )

/** The API without an engine, on a loopback test server: a task stays PENDING until a request changes it. */
export const idleServer = MediagateHttp.serve.pipe(
  Layer.provide(
    memoryApiServices(
      [
        { id: "acct_a", name: "a", apiKey: Redacted.make(apiKey) },
        { id: "acct_b", name: "b", apiKey: Redacted.make(otherApiKey) }
      ],
      Moderation.layerAllowAll
    )
  ),
  Layer.provideMerge(NodeHttpServer.layerTest)
)

/** A body sent as it is, for requests off the wire shape: broken JSON, another content type, none (`null`). */
export class Raw {
  constructor(readonly text: string, readonly contentType: string | null = "application/json") {}
}

/** What a call to the API sends besides its method and path. */
export interface CallOptions {
  /** Sent as JSON, or as it is when a `Raw`. */
  readonly body?: unknown
  /** The bearer key; `null` sends none. Default (or `undefined`): the client's key. */
  readonly key?: string | null | undefined
  readonly headers?: Record<string, string> | undefined
  /** The answer is not JSON (the Prometheus text): leave `body` undefined instead of failing. */
  readonly text?: boolean | undefined
}

/**
 * What the API answered. `headers` and `text` are getters, not own fields, so an answer
 * compares equal (`toEqual`) to `{ status, body }`.
 */
export class Answer<A = any> {
  readonly #headers: Headers.Headers
  readonly #text: string
  constructor(readonly status: number, readonly body: A, headers: Headers.Headers, text: string) {
    this.#headers = headers
    this.#text = text
  }
  get headers(): Headers.Headers {
    return this.#headers
  }
  get text(): string {
    return this.#text
  }
}

/** The body of a submit as the API reads it. */
export type SubmitBody = typeof Api.SubmitRequest.Encoded

/** The 200 envelopes of submit and query; any other status carries the error envelope. */
export type Submitted = typeof Api.SubmitResponse.Encoded
export type Queried = typeof Api.TaskResponse.Encoded

/**
 * The API as a client calls it, over the `HttpClient` in context (the loopback test server's,
 * whose requests take paths). Every call sends `key` as the bearer token unless told otherwise.
 */
export const client = (key: string | null = apiKey) => {
  const call = <A = any>(method: HttpMethod.HttpMethod, path: string, options: CallOptions = {}) =>
    Effect.gen(function*() {
      const bearer = options.key === undefined ? key : options.key
      const body = options.body
      const request = HttpClientRequest.make(method)(path).pipe(
        HttpClientRequest.setHeaders(options.headers ?? {}),
        (request) => bearer === null ? request : HttpClientRequest.bearerToken(request, bearer),
        (request) =>
          body === undefined
            ? request
            : body instanceof Raw
            ? body.contentType === null
              ? HttpClientRequest.setBody(request, HttpBody.raw(body.text))
              : HttpClientRequest.bodyText(request, body.text, body.contentType)
            : HttpClientRequest.bodyText(request, JSON.stringify(body), "application/json")
      )
      const response = yield* HttpClient.execute(request)
      const text = yield* response.text
      const parsed = options.text === true ? undefined : yield* Effect.try(() => JSON.parse(text) as A)
      return new Answer<A>(response.status, parsed as A, response.headers, text)
    })
  const submit = (body: SubmitBody, options: Omit<CallOptions, "body" | "text"> = {}) =>
    call<Submitted>("POST", "/api/v1/task/submit", { ...options, body })
  return {
    call,
    submit,
    /** Submits and answers the new task's id; fails unless the API accepted the task. */
    submitId: (body: SubmitBody, options: Omit<CallOptions, "body" | "text"> = {}) =>
      Effect.flatMap(submit(body, options), (answer) =>
        answer.status === 200
          ? Effect.succeed(answer.body.data.taskId)
          : Effect.fail(new Error(`submit answered ${answer.status}: ${answer.text}`))),
    /** GET /api/v1/task/{taskId}, with `?wait=` when `wait` is given (seconds). */
    query: (taskId: string, options: Omit<CallOptions, "body" | "text"> & { readonly wait?: number | string } = {}) => {
      const { wait, ...rest } = options
      return call<Queried>("GET", `/api/v1/task/${taskId}${wait === undefined ? "" : `?wait=${wait}`}`, rest)
    }
  }
}

/**
 * The same client for a server in another process (the standalone server the process suites
 * start), on `port` of the loopback: every call a Promise.
 */
export const clientAt = (port: number, key: string | null = apiKey) => {
  const api = client(key)
  const http = Layer.effect(
    HttpClient.HttpClient,
    Effect.map(HttpClient.HttpClient, HttpClient.mapRequest(HttpClientRequest.prependUrl(`http://127.0.0.1:${port}`)))
  ).pipe(Layer.provide(FetchHttpClient.layer))
  const run = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient>) => Effect.runPromise(Effect.provide(effect, http))
  return {
    call: <A = any>(method: HttpMethod.HttpMethod, path: string, options: CallOptions = {}) => run(api.call<A>(method, path, options)),
    submit: (...args: Parameters<typeof api.submit>) => run(api.submit(...args)),
    submitId: (...args: Parameters<typeof api.submitId>) => run(api.submitId(...args)),
    query: (...args: Parameters<typeof api.query>) => run(api.query(...args))
  }
}

/** Event-loop turns (real I/O to finish, such as a swept file's deletion), not timed sleeps, until `done` holds. */
export { until } from "@mediagate/core/testing"
