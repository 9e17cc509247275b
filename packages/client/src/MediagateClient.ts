/**
 * The Effect client: every call goes through `HttpApiClient.make(Api.MediagateApi)`, the
 * client Effect derives from the one HttpApi contract, with the bearer key on each request
 * and the contract's errors turned into `MediagateError`.
 */
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as UrlParams from "@effect/platform/UrlParams"
import { Api, type ModelInfo, Task } from "@mediagate/core"
import { createParser, type EventSourceMessage } from "eventsource-parser"
import { Config, type ConfigError, Context, Effect, Either, FiberRef, Layer, Option, Redacted, Schema, Stream } from "effect"
import { globalValue } from "effect/GlobalValue"
import { type ClientError, type LocalFileError, MediagateError, refail, type RunTimeout, TransportError } from "./CallErrors.js"
import { type FileInput, type Upload, upload as uploadTo, type WithFiles, withUploads } from "./FileInputs.js"
import type { InputOf, ModelId } from "./Models.js"
import { type RunOptions, type Update, waitForEnd } from "./Run.js"

/** Where the server is and the key to call it with. */
export interface ClientOptions {
  /** The server's address, e.g. `http://127.0.0.1:8080` (the API is under `/api/v1`). */
  readonly baseUrl: string | URL
  /** The bearer key (`Authorization: Bearer <key>`). */
  readonly apiKey: string | Redacted.Redacted<string>
}

/** Optional fields of a submit besides the model and its input. */
export interface SubmitOptions {
  /** Webhook address: a signed POST is sent there when the task ends (`verifyCallback` checks it). */
  readonly callBackUrl?: string
  /**
   * Callbacks besides the terminal one (additive): `started`, `progress` (at most one per 2 s)
   * and `completed`, which must be listed. Each carries its `event` (`verifyCallbackEvent`).
   */
  readonly callBackEvents?: ReadonlyArray<"started" | "progress" | "completed">
  /** Your user's id, for tracing. */
  readonly userId?: string
  /**
   * Idempotency-Key: the same key and input from the same account within 24 hours answer
   * the same task, so a submit can be sent again safely after a lost answer.
   */
  readonly idempotencyKey?: string
}

/** What `estimate` answers: `data` of POST /api/v1/task/estimate. */
export type Estimate = (typeof Api.EstimateResponse.Type)["data"]

/** Which tasks `list` answers, and from where. */
export interface ListOptions {
  /** Tasks per page, 1 to 100 (default 20). */
  readonly limit?: number
  /** The previous page's `next_cursor` (with the same filters). */
  readonly cursor?: string
  /** Only tasks in this status, or in any of these. */
  readonly status?: Task.TaskStatus | ReadonlyArray<Task.TaskStatus>
  /** Only tasks of this model. */
  readonly model?: string
  /** Only tasks created after this time (exclusive): a Date or ISO 8601 with a time zone. */
  readonly createdAfter?: Date | string
  /** Only tasks created before this time (exclusive). */
  readonly createdBefore?: Date | string
}

/** One page of `list`, newest task first. */
export interface TaskPage {
  readonly tasks: ReadonlyArray<Task.Task>
  /** Pass as `cursor` for the next page; null on the last one. */
  readonly next_cursor: string | null
}

/** The calls of a mediagate client. */
export interface Client {
  /**
   * Submits a task and answers its id as a plain string, not the `{ taskId }` object the
   * HTTP answer's `data` is: `const taskId = yield* client.submit(model, input)`, with no
   * `.taskId` after it. `input` is type-checked against the model's input. A Blob or a
   * local path (Node) in a media URL field (imageUrls, images, mediaUrls) is uploaded first
   * (`upload`) and its URL submitted in its place; an http(s) URL is sent as it is.
   */
  readonly submit: <M extends ModelId>(
    model: M,
    input: WithFiles<InputOf<M>>,
    options?: SubmitOptions
  ) => Effect.Effect<string, ClientError | LocalFileError>
  /**
   * What a submit of the same model, input and options would store and charge, with nothing
   * created or held: the price in micro-USD (and as `priceUsd`), the adjustments the model's
   * rules would make, the input as the task would store it. Refused as submit would refuse it.
   * Moderation is not asked.
   */
  readonly estimate: <M extends ModelId>(
    model: M,
    input: InputOf<M>,
    options?: Omit<SubmitOptions, "idempotencyKey">
  ) => Effect.Effect<Estimate, ClientError>
  /** The task as it is now; with `wait` (seconds, at most 60) the server holds the answer until the task ends or the wait is over. */
  readonly get: (taskId: string, options?: { readonly wait?: number }) => Effect.Effect<Task.Task, ClientError>
  /** Your tasks, newest first, a page at a time, optionally only some statuses, a model, a time range. */
  readonly list: (options?: ListOptions) => Effect.Effect<TaskPage, ClientError>
  /** Cancels a task that has not ended; answers it, CANCELLED (409 MediagateError when it has ended). */
  readonly cancel: (taskId: string) => Effect.Effect<Task.Task, ClientError>
  /**
   * Submits (uploading the local files of its media URL fields first, as `submit`) and waits
   * until the task ends; answers the ended task, whatever its status.
   */
  readonly run: <M extends ModelId>(
    model: M,
    input: WithFiles<InputOf<M>>,
    options?: RunOptions & SubmitOptions
  ) => Effect.Effect<Task.Task, ClientError | LocalFileError | RunTimeout>
  /**
   * Uploads a file (`POST /api/v1/files`): a Blob (a browser's File), or in Node the path of
   * a file, streamed from disk. Answers the upload: its `url` works in any URL input.
   */
  readonly upload: (file: FileInput) => Effect.Effect<Upload, ClientError | LocalFileError>
  /** Waits until a submitted task ends (what `run` does after submitting). */
  readonly waitFor: (taskId: string, options?: RunOptions) => Effect.Effect<Task.Task, ClientError | RunTimeout>
  /**
   * The task's events stream (`GET /api/v1/task/{taskId}/events`), parsed: the task at once
   * and at each change of status, its status and progress at each change of progress, a
   * `KeepAlive` for each comment; it ends after the terminal status. Fails when the server
   * answers an error or something other than `text/event-stream`.
   */
  readonly events: (taskId: string) => Stream.Stream<Update, ClientError>
  /** The model catalog: every model with the JSON Schema of its input. */
  readonly models: Effect.Effect<ReadonlyArray<ModelInfo.ModelInfo>, ClientError>
  /** The client derived from the contract, for the endpoints not wrapped here (account, callbacks). */
  readonly api: ApiClient
}

/**
 * Request parts the contract leaves to the handlers (the list's filters and cursor, the
 * query's `wait`, submit's Idempotency-Key header), added to the request of the call that
 * sets them with `Effect.locally`.
 */
const extraRequest = globalValue(
  Symbol.for("@mediagate/client/MediagateClient/extraRequest"),
  () => FiberRef.unsafeMake<(request: HttpClientRequest.HttpClientRequest) => HttpClientRequest.HttpClientRequest>((request) => request)
)

const withRequest = (f: (request: HttpClientRequest.HttpClientRequest) => HttpClientRequest.HttpClientRequest) =>
<A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.locally(effect, extraRequest, f)

const withParams = (params: UrlParams.Input) => withRequest(HttpClientRequest.appendUrlParams(params))

/** Longest hold a query may ask for (the server's limit). */
export const maxWaitSeconds = 60

/** The client `HttpApiClient.make` derives from the contract, with the key on every request. */
const derive = (options: ClientOptions) => {
  const key = typeof options.apiKey === "string" ? Redacted.make(options.apiKey) : options.apiKey
  return HttpApiClient.make(Api.MediagateApi, {
    baseUrl: options.baseUrl,
    transformClient: (client) =>
      client.pipe(
        HttpClient.mapRequestEffect((request) =>
          Effect.map(FiberRef.get(extraRequest), (extra) => HttpClientRequest.bearerToken(extra(request), Redacted.value(key)))
        )
      )
  })
}

/** Every endpoint of `Api.MediagateApi` as the contract derives it (`api.tasks.submit`, `api.account.account`, ...). */
export type ApiClient = Effect.Effect.Success<ReturnType<typeof derive>>

/** The mediagate client as a service. */
export class MediagateClient extends Context.Tag("@mediagate/client/MediagateClient")<MediagateClient, Client>() {}

const decodeTask = Schema.decodeUnknown(Schema.parseJson(Task.Task))
const decodeProgress = Schema.decodeUnknown(
  Schema.parseJson(Schema.Struct({ status: Task.Task.fields.status, progress: Schema.NullOr(Task.WireProgress) }))
)

/** An event of the stream as what it tells; none for an event of another name (a later server's). */
const update = (message: EventSourceMessage | "comment"): Effect.Effect<Option.Option<Update>, ClientError> => {
  if (message === "comment") return Effect.succeedSome({ _tag: "KeepAlive" })
  switch (message.event) {
    case "task":
      return decodeTask(message.data).pipe(Effect.map((task) => Option.some({ _tag: "Task", task } as const)), Effect.catchAll(refail))
    case "progress":
      return decodeProgress(message.data).pipe(
        Effect.map(({ progress, status }) => Option.some({ _tag: "Progress", status, progress } as const)),
        Effect.catchAll(refail)
      )
    default:
      return Effect.succeedNone
  }
}

/** The messages of a text/event-stream body, read with eventsource-parser (a parser per stream). */
const messages = <E>(text: Stream.Stream<string, E>): Stream.Stream<EventSourceMessage | "comment", E> =>
  Stream.suspend(() => {
    const parsed: Array<EventSourceMessage | "comment"> = []
    const parser = createParser({ onEvent: (message) => void parsed.push(message), onComment: () => void parsed.push("comment") })
    return Stream.mapConcat(text, (chunk) => {
      parser.feed(chunk)
      return parsed.splice(0)
    })
  })

/** Makes a client from `HttpApiClient.make(Api.MediagateApi)` on the HttpClient in context. */
export const make = (options: ClientOptions): Effect.Effect<Client, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const api = yield* derive(options)
    const http = yield* HttpClient.HttpClient
    const key = typeof options.apiKey === "string" ? Redacted.make(options.apiKey) : options.apiKey

    /**
     * The body of a submit (and of an estimate), checked with the contract's own decoder, as
     * the server runs it: a body it refuses would fail the client's encoding before any
     * request; here it fails as the server's 400 would.
     */
    const submitBody = <M extends ModelId>(model: M, input: InputOf<M>, submitOptions: SubmitOptions) =>
      Either.mapLeft(
        Api.decodeSubmitRequest({
          model,
          input,
          ...(submitOptions.callBackUrl === undefined ? {} : { callBackUrl: submitOptions.callBackUrl }),
          ...(submitOptions.callBackEvents === undefined ? {} : { callBackEvents: submitOptions.callBackEvents }),
          ...(submitOptions.userId === undefined ? {} : { user_id: submitOptions.userId })
        }),
        (error) => new MediagateError({ status: 400, code: 400, msg: error.message })
      )

    const upload = uploadTo(http, options.baseUrl, key)

    const submit = <M extends ModelId>(model: M, input: WithFiles<InputOf<M>>, submitOptions: SubmitOptions = {}) =>
      Effect.gen(function*() {
        // The uploads' URLs in place of the files: the input the model's schema takes.
        const uploaded = (yield* withUploads(model, input, upload)) as InputOf<M>
        const payload = yield* submitBody(model, uploaded, submitOptions)
        const idempotencyKey = submitOptions.idempotencyKey
        const answer = yield* api.tasks.submit({ payload, headers: {} }).pipe(
          idempotencyKey === undefined ? (effect) => effect : withRequest(HttpClientRequest.setHeader("idempotency-key", idempotencyKey)),
          Effect.catchAll(refail)
        )
        return answer.data.taskId
      }).pipe(Effect.withSpan("MediagateClient.submit", { attributes: { model } }))

    const estimate = <M extends ModelId>(model: M, input: InputOf<M>, estimateOptions: Omit<SubmitOptions, "idempotencyKey"> = {}) =>
      Effect.gen(function*() {
        const payload = yield* submitBody(model, input, estimateOptions)
        const answer = yield* api.tasks.estimate({ payload }).pipe(Effect.catchAll(refail))
        return answer.data
      }).pipe(Effect.withSpan("MediagateClient.estimate", { attributes: { model } }))

    const get = (taskId: string, getOptions: { readonly wait?: number } = {}) =>
      api.tasks.query({ path: { taskId }, urlParams: {} }).pipe(
        withParams(getOptions.wait === undefined || getOptions.wait <= 0 ? [] : [["wait", String(Math.min(maxWaitSeconds, Math.ceil(getOptions.wait)))]]),
        Effect.map((answer) => answer.data),
        Effect.catchAll(refail),
        Effect.withSpan("MediagateClient.get", { attributes: { taskId } })
      )

    const list = (listOptions: ListOptions = {}) =>
      api.tasks.list({ urlParams: {} }).pipe(
        withParams(listParams(listOptions)),
        Effect.map((answer): TaskPage => answer.data),
        Effect.catchAll(refail),
        Effect.withSpan("MediagateClient.list")
      )

    const cancel = (taskId: string) =>
      api.tasks.cancel({ path: { taskId } }).pipe(
        Effect.map((answer) => answer.data),
        Effect.catchAll(refail),
        Effect.withSpan("MediagateClient.cancel", { attributes: { taskId } })
      )

    const events = (taskId: string): Stream.Stream<Update, ClientError> =>
      Stream.unwrap(Effect.gen(function*() {
        const request = HttpClientRequest.get(`/api/v1/task/${encodeURIComponent(taskId)}/events`).pipe(
          HttpClientRequest.prependUrl(options.baseUrl.toString()),
          HttpClientRequest.bearerToken(Redacted.value(key)),
          HttpClientRequest.setHeader("accept", "text/event-stream")
        )
        const response = yield* http.execute(request).pipe(Effect.flatMap(HttpClientResponse.filterStatusOk), Effect.catchAll(refail))
        const type = response.headers["content-type"] ?? ""
        if (!type.toLowerCase().startsWith("text/event-stream")) {
          return yield* new TransportError({ message: `${request.url} answered ${type === "" ? "no Content-Type" : type}, not text/event-stream` })
        }
        return response.stream.pipe(
          Stream.catchAll(refail),
          Stream.decodeText(),
          messages,
          Stream.mapEffect(update),
          Stream.filterMap((found) => found)
        )
      })).pipe(Stream.withSpan("MediagateClient.events", { attributes: { taskId } }))

    const waitFor = (taskId: string, runOptions: RunOptions = {}) =>
      waitForEnd(taskId, get, runOptions, events).pipe(Effect.withSpan("MediagateClient.waitFor", { attributes: { taskId } }))

    const run = <M extends ModelId>(model: M, input: WithFiles<InputOf<M>>, runOptions: RunOptions & SubmitOptions = {}) =>
      Effect.flatMap(submit(model, input, runOptions), (taskId) => waitFor(taskId, runOptions)).pipe(
        Effect.withSpan("MediagateClient.run", { attributes: { model } })
      )

    const models = api.catalog.models().pipe(
      Effect.map((answer) => answer.data.models),
      Effect.catchAll(refail),
      Effect.withSpan("MediagateClient.models")
    )

    return { submit, estimate, get, list, cancel, run, waitFor, events, models, upload, api } satisfies Client
  })

/** The list's query parameters, as the server reads them. */
const listParams = (options: ListOptions): UrlParams.Input => {
  const time = (value: Date | string) => (typeof value === "string" ? value : value.toISOString())
  return [
    ...(options.limit === undefined ? [] : [["limit", String(options.limit)] as const]),
    ...(options.cursor === undefined ? [] : [["cursor", options.cursor] as const]),
    ...(options.status === undefined ? [] : [["status", typeof options.status === "string" ? options.status : options.status.join(",")] as const]),
    ...(options.model === undefined ? [] : [["model", options.model] as const]),
    ...(options.createdAfter === undefined ? [] : [["created_after", time(options.createdAfter)] as const]),
    ...(options.createdBefore === undefined ? [] : [["created_before", time(options.createdBefore)] as const])
  ]
}

/** The client as a layer. */
export const layer = (options: ClientOptions): Layer.Layer<MediagateClient, never, HttpClient.HttpClient> =>
  Layer.effect(MediagateClient, make(options))

/** The client from MEDIAGATE_URL (default http://127.0.0.1:8080) and MEDIAGATE_API_KEY. */
export const layerConfig: Layer.Layer<MediagateClient, ConfigError.ConfigError, HttpClient.HttpClient> =
  Layer.unwrapEffect(
    Effect.map(
      Config.all({
        baseUrl: Config.string("MEDIAGATE_URL").pipe(Config.withDefault("http://127.0.0.1:8080")),
        apiKey: Config.redacted("MEDIAGATE_API_KEY")
      }),
      layer
    )
  )
