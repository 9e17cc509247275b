/**
 * Handlers of the task endpoints (and the catalog, account and callbacks groups). HttpApi
 * decodes each request into the use case's typed input (`Api.Requests`); what it cannot
 * decode is the contract's 400 (`decodeFailures`).
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiError from "@effect/platform/HttpApiError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import type * as HttpApp from "@effect/platform/HttpApp"
import type { CallbackDelivery, CallbackNotRedeliverable } from "@mediagate/core"
import { Accounts, Api, IdempotencyKeys, Ids, Ledger, ModelCatalog, ModelInfo, Pricing, TaskService } from "@mediagate/core"
import { Duration, Effect, Layer, Schedule, Schema, Stream } from "effect"
import { answerErrors } from "./EnvelopeMiddleware.js"
import * as EventStream from "./EventStream.js"
import * as JsonDepth from "./JsonDepth.js"
import * as RequestBody from "./RequestBody.js"
import * as RequestTimeouts from "./RequestTimeouts.js"

/** Largest accepted request body (DESIGN.md section 3). */
export const maxBodyBytes = 1024 * 1024

const badRequest = (msg: string) => new Api.BadRequest({ code: 400, msg })
const tooLarge = () => new Api.PayloadTooLarge({ code: 413, msg: `request body must be at most ${maxBodyBytes} bytes` })

const isJson = (contentType: string | undefined) =>
  contentType !== undefined && /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i.test(contentType.trim())

/**
 * How much of an over-limit body without Content-Length (chunked) is read and dropped so
 * that the 413 reaches the client: stopping at once would destroy the request, and with it
 * the connection, before the answer is written. Past this the connection is reset.
 */
const drainBytes = 16 * maxBodyBytes

/**
 * The body as text, at most `maxBodyBytes` of it kept; 413 when there is more, 408 when it
 * does not arrive within the body's deadline (`RequestTimeouts.readRequestBody`).
 */
const readText = (request: HttpServerRequest.HttpServerRequest) =>
  RequestTimeouts.readRequestBody(
    request,
    Effect.mapError(RequestBody.read(request, { keepBytes: maxBodyBytes, drainBytes }), () => badRequest("the request body could not be read")),
    RequestTimeouts.bodyTooSlow
  ).pipe(Effect.flatMap((body) => body.size > maxBodyBytes ? Effect.fail(tooLarge()) : Effect.succeed(decoder.decode(body.bytes))))

const decoder = new TextDecoder()

/** Reads and parses the JSON body, with the envelope errors a client should see. */
export const readJsonBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    if (!isJson(request.headers["content-type"])) {
      return yield* Effect.fail(badRequest("Content-Type must be application/json"))
    }
    const declared = Number(request.headers["content-length"] ?? "0")
    if (declared > maxBodyBytes) return yield* Effect.fail(tooLarge())
    const text = yield* readText(request)
    if (text.trim() === "") return yield* Effect.fail(badRequest("request body is required"))
    // Refused before parsing: the walks after JSON.parse recurse once per level.
    if (JsonDepth.exceeds(text)) {
      return yield* Effect.fail(badRequest(`request body is nested too deeply (at most ${JsonDepth.maxDepth} levels)`))
    }
    return yield* Effect.try({
      // A leading byte order mark is tolerated, as RFC 8259 allows.
      try: () => JSON.parse(text.replace(/^\uFEFF/, "")) as unknown,
      catch: () => badRequest("request body is not valid JSON")
    })
  })

/** A rule of the caller's key (its models, its monthly cap) refused the request: 403 naming the rule. */
const keyScopeRefused = (error: { readonly message: string }) => new Api.Forbidden({ code: 403, msg: error.message })

/** An Idempotency-Key refused: 422 for another body, 409 while its first request runs. */
const idempotencyError = <E>(error: E) =>
  error instanceof IdempotencyKeys.IdempotencyKeyMismatch
    ? new Api.UnprocessableEntity({ code: 422, msg: error.message })
    : error instanceof IdempotencyKeys.IdempotencyKeyInUse
    ? new Api.Conflict({ code: 409, msg: error.message })
    : error as Exclude<E, IdempotencyKeys.IdempotencyKeyMismatch | IdempotencyKeys.IdempotencyKeyInUse>

/**
 * The query of a task, at once or, with `wait` (seconds), held until the task ends or the
 * wait is over. `taskId` is the path's as the client wrote it.
 */
export const queryTask = (tasks: TaskService, account: Accounts.Account, taskId: string, params: Api.QueryParams) => {
  const id = Ids.TaskId.make(taskId.toLowerCase())
  return params.wait === undefined ? tasks.query(account, id) : tasks.wait(account, id, Duration.seconds(params.wait))
}

/** The query's answer: the task in the envelope, its JSON written without Schema (`Api.WireJson`); HttpApi's route and `QueryRoute` both answer with it. */
export const queryAnswer = (tasks: TaskService, account: Accounts.Account, taskId: string, params: Api.QueryParams = {}) =>
  Effect.map(queryTask(tasks, account, taskId, params), (task) => jsonAnswer(Api.WireJson.taskResponse(task)))

/**
 * The submit's answer: the body read and decoded, the task submitted (once per
 * `idempotencyKey`, when given), its id in the envelope; HttpApi's route and `SubmitRoute`
 * both answer with it.
 */
export const submitAnswer = (tasks: TaskService, account: Accounts.Account, request: HttpServerRequest.HttpServerRequest, idempotencyKey: string | undefined) =>
  Effect.gen(function*() {
    const body = yield* readJsonBody(request)
    const submit = yield* Api.decodeSubmitRequest(body)
    const idempotency = idempotencyKey === undefined ? undefined : { key: idempotencyKey, fingerprint: yield* IdempotencyKeys.fingerprint(body) }
    const { replayed, taskId } = yield* tasks.submit(account, submit, { idempotency })
    // The same answer as the first time; the header says it is a replay (as Stripe's does).
    return jsonAnswer(Api.WireJson.submitResponse(taskId), replayed ? replayedHeaders : undefined)
  }).pipe(Effect.catchTag("KeyScopeRefused", (error) => Effect.fail(keyScopeRefused(error))), Effect.mapError(idempotencyError), answerErrors)

/**
 * HttpApi's decode failures as the contract's 400 (`Api.decodeFailure`: the field and its
 * rule), never the framework's `{issues, message, _tag}`. Runs inside HttpApi, before it
 * encodes the failure into an answer.
 */
export const decodeFailures: Layer.Layer<never> = HttpApiBuilder.middleware((app) =>
  // HttpApp's type does not carry the failures HttpApi's routes raise; they are there.
  Effect.catchIf(
    app as HttpApp.Default<unknown>,
    (error): error is HttpApiError.HttpApiDecodeError => error instanceof HttpApiError.HttpApiDecodeError,
    (error) => Effect.fail(Api.decodeFailure(error))
  ) as HttpApp.Default
)

/** How often the events stream sends a comment line, so proxies and clients keep it open. */
export const keepAliveInterval = Duration.seconds(15)

const encoder = new TextEncoder()

const replayedHeaders = { "idempotent-replayed": "true" }

/**
 * A 200 answer whose JSON is written already (`Api.WireJson`): HttpApi sends a response as
 * it is, where it would encode a value through the endpoint's Schema; the same bytes and type.
 */
const jsonAnswer = (json: string, headers?: Record<string, string>) =>
  HttpServerResponse.text(json, { contentType: "application/json", ...(headers === undefined ? {} : { headers }) })

/** The handlers of the "tasks" group. Each request is decoded once, here, into the use case's typed input. */
export const layer: Layer.Layer<
  HttpApiGroup.ApiGroup<"mediagate", "tasks">,
  never,
  TaskService | Api.Authorization
> = HttpApiBuilder.group(Api.MediagateApi, "tasks", (handlers) =>
  Effect.gen(function*() {
    const tasks = yield* TaskService
    return handlers
      // Raw: the body is read here (size and depth limits, broken JSON is a 400; HttpApi would
      // take an unreadable body for a defect), then decoded with the endpoint's SubmitRequest.
      .handleRaw("submit", ({ headers, request }) =>
        Effect.flatMap(Accounts.CurrentAccount, (account) => submitAnswer(tasks, account, request, headers["idempotency-key"])))
      // Raw for the same reason as submit; the same body, read and decoded the same way.
      .handleRaw("estimate", ({ request }) =>
        Effect.gen(function*() {
          // Authenticated (the middleware); the account's key may not use every model.
          const account = yield* Accounts.CurrentAccount
          const body = yield* readJsonBody(request)
          const estimate = yield* tasks.estimate(yield* Api.decodeSubmitRequest(body), account)
          return Api.ok(Api.estimateWire(estimate))
        }).pipe(Effect.catchTag("KeyScopeRefused", (error) => Effect.fail(keyScopeRefused(error))), answerErrors))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const account = yield* Accounts.CurrentAccount
          return Api.ok(yield* tasks.list(account, Api.listQuery(urlParams)))
        }).pipe(answerErrors))
      .handle("cancel", ({ path }) =>
        Effect.gen(function*() {
          const account = yield* Accounts.CurrentAccount
          return Api.ok(yield* tasks.cancel(account, Ids.TaskId.make(path.taskId)))
        }).pipe(answerErrors))
      .handle("query", ({ path, urlParams }) =>
        Effect.flatMap(Accounts.CurrentAccount, (account) => queryAnswer(tasks, account, path.taskId, urlParams)).pipe(answerErrors))
      // Raw: the answer is a stream of server-sent events, not a JSON body.
      .handleRaw("events", ({ path }) =>
        Effect.gen(function*() {
          const account = yield* Accounts.CurrentAccount
          const changes = yield* tasks.watch(account, Ids.TaskId.make(path.taskId))
          const events = EventStream.sse(changes)
          const keepAlive = Stream.fromSchedule(Schedule.spaced(keepAliveInterval)).pipe(Stream.as(": keep-alive\n\n"))
          const body = Stream.merge(events, keepAlive, { haltStrategy: "left" }).pipe(Stream.map((text) => encoder.encode(text)))
          return HttpServerResponse.stream(body, {
            contentType: "text/event-stream",
            headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
          })
        }).pipe(answerErrors))
  }))

/** The handler of the "catalog" group. */
export const catalogLayer: Layer.Layer<
  HttpApiGroup.ApiGroup<"mediagate", "catalog">,
  never,
  ModelCatalog.ModelCatalog | Api.Authorization
> = HttpApiBuilder.group(Api.MediagateApi, "catalog", (handlers) =>
  Effect.gen(function*() {
    const catalog = yield* ModelCatalog.ModelCatalog
    const prices = yield* Pricing.Prices
    // Described and encoded once: the catalog and the price table do not change while the
    // server runs, and HttpApi would encode the whole list through its Schema on every request.
    const models = catalog.models.map((model) => ModelInfo.describe(model, prices))
    // One response for every request, as the OpenAPI document's (Routes): an answer is a value, never changed in place.
    const answer = jsonAnswer(JSON.stringify(yield* Schema.encode(Api.ModelsResponse)(Api.ok({ models })).pipe(Effect.orDie)))
    return handlers.handle("models", () => Effect.succeed(answer))
  }))

/** The handler of the "account" group: the caller's sums and latest movements. */
export const accountLayer: Layer.Layer<
  HttpApiGroup.ApiGroup<"mediagate", "account">,
  never,
  Ledger.Ledger | Api.Authorization
> = HttpApiBuilder.group(Api.MediagateApi, "account", (handlers) =>
  Effect.gen(function*() {
    const ledger = yield* Ledger.Ledger
    return handlers.handle("account", () =>
      Effect.gen(function*() {
        const account = yield* Accounts.CurrentAccount
        const [{ balance, reserved }, entries] = yield* Effect.all([ledger.balance(account.id), ledger.entries(account.id, Api.accountEntries)])
        return Api.ok({
          account_id: account.id,
          name: account.name,
          balance_micro_usd: balance,
          reserved_micro_usd: reserved,
          available_micro_usd: balance - reserved,
          entries: entries.map(Api.ledgerEntryWire)
        })
      }).pipe(answerErrors))
  }))

/** A redelivery the task's state does not allow: 409 with the reason. */
const notRedeliverable = (error: CallbackNotRedeliverable) => new Api.Conflict({ code: 409, msg: error.message })

/** The handlers of the "callbacks" group: a task's callbacks with their attempts, and a redelivery. */
export const callbacksLayer: Layer.Layer<
  HttpApiGroup.ApiGroup<"mediagate", "callbacks">,
  never,
  TaskService | Api.Authorization
> = HttpApiBuilder.group(Api.MediagateApi, "callbacks", (handlers) =>
  Effect.gen(function*() {
    const tasks = yield* TaskService
    const view = (deliveries: ReadonlyArray<CallbackDelivery>) =>
      Api.ok({ callbacks: deliveries.map(({ attempts, callback }) => Api.callbackWire(callback, attempts)) })
    return handlers
      .handle("callbacks", ({ path }) =>
        Effect.gen(function*() {
          const account = yield* Accounts.CurrentAccount
          return view(yield* tasks.callbacks(account, Ids.TaskId.make(path.taskId)))
        }).pipe(answerErrors))
      .handle("redeliver", ({ path }) =>
        Effect.gen(function*() {
          const account = yield* Accounts.CurrentAccount
          return view(yield* tasks.redeliver(account, Ids.TaskId.make(path.taskId)))
        }).pipe(Effect.catchTag("CallbackNotRedeliverable", (error) => Effect.fail(notRedeliverable(error))), answerErrors))
  }))
