/**
 * What every provider adapter shares: one JSON call over the host's `HttpClient`, and the
 * classification of its failures into the engine's classes (DESIGN.md, upstream errors):
 *
 * - connection errors, timeouts, 408, 425, 429 and 5xx are transient (`retryable`, with
 *   `Retry-After` when the provider sends one);
 * - 401 and 403 are permanent and logged as errors: the operator's key is wrong;
 * - 400 and 422 are INVALID_PARAMETERS, unless the provider says its content policy refused
 *   the request, which is CONTENT_MODERATION;
 * - 402 (the operator's provider account is out of credit) is permanent with no class and
 *   logged as an error: it is not the caller's INSUFFICIENT_POINTS;
 * - any other answer is permanent with no class.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { RetryAfter, type Task, UpstreamError } from "@mediagate/core"
import { Clock, Effect, Option } from "effect"

/** An answer of a provider: its status, headers and body (parsed JSON, or the text when it is not JSON). */
export interface Answer {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: unknown
}

/** One call to a provider. */
export interface Call {
  readonly method: "GET" | "POST" | "PUT" | "DELETE"
  readonly url: string
  readonly headers?: Readonly<Record<string, string>>
  /** Sent as JSON. */
  readonly body?: unknown
  /** Sent as multipart/form-data instead. */
  readonly form?: FormData
}

// Prose only ("safety checker", not "safety"): a parameter error naming `safety_tolerance` or
// `disable_safety_checker` is INVALID_PARAMETERS, not a refusal.
const contentPolicy = /content[ _-]?policy|safety (?:system|checker)|moderation|nsfw|flagged as sensitive|sensitive content/i

/**
 * Whether a provider's answer or error text says its content policy refused the request: the
 * one match of every adapter (a 400 or 422 here, a failed Replicate prediction's error).
 */
export const isContentPolicy = (body: unknown): boolean =>
  contentPolicy.test(typeof body === "string" ? body : JSON.stringify(body ?? ""))

/** The provider's own words for a failure, short: `detail`, `error.message`, `error`, `message`, or the text. */
export const describeBody = (body: unknown): string => {
  const pick = (value: unknown): string | undefined => {
    if (typeof value === "string") return value
    if (Array.isArray(value)) return value.map((item) => pick(item) ?? JSON.stringify(item)).join("; ")
    if (typeof value === "object" && value !== null) {
      const record = value as Record<string, unknown>
      return pick(record["detail"]) ?? pick(record["error"]) ?? pick(record["message"]) ?? pick(record["msg"])
    }
    return undefined
  }
  const text = pick(body) ?? (body === undefined || body === null ? "" : JSON.stringify(body))
  return text.length > 300 ? `${text.slice(0, 300)}...` : text
}

/** The engine's error for a provider answer that is not a success. */
export const classify = (provider: string, answer: Answer, now: number): UpstreamError => {
  const { body, status } = answer
  const said = describeBody(body)
  const message = `${provider} answered ${status}${said === "" ? "" : `: ${said}`}`
  if (status === 408 || status === 425 || status === 429 || status >= 500) {
    const after = RetryAfter.millis(answer.headers["retry-after"], now)
    return new UpstreamError({ message, reason: null, retryable: true, ...(after === undefined ? {} : { retryAfterMs: after }) })
  }
  if (status === 400 || status === 422) {
    return new UpstreamError({ message, reason: isContentPolicy(body) ? "CONTENT_MODERATION" : "INVALID_PARAMETERS", retryable: false })
  }
  return new UpstreamError({ message, reason: null, retryable: false })
}

/** Failures that the operator must fix (a wrong key, an empty provider account): logged as errors. */
const operatorFault = (status: number) => status === 401 || status === 403 || status === 402

/** A transient failure of the connection itself (refused, reset, DNS, a body that did not arrive). */
export const connectionError = (provider: string, cause: unknown): UpstreamError =>
  new UpstreamError({
    message: `${provider} could not be reached: ${cause instanceof Error ? cause.message : String(cause)}`,
    reason: null,
    retryable: true
  })

/**
 * Sends `call` and answers with the provider's 2xx answer; any other answer fails with its
 * classified `UpstreamError`. Needs the host's `HttpClient` (redirects are the client's).
 */
export const send = (provider: string, call: Call): Effect.Effect<Answer, UpstreamError, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    let request = HttpClientRequest.make(call.method)(call.url).pipe(
      HttpClientRequest.setHeaders({ accept: "application/json", ...call.headers })
    )
    if (call.body !== undefined) request = HttpClientRequest.bodyUnsafeJson(request, call.body)
    if (call.form !== undefined) request = HttpClientRequest.bodyFormData(request, call.form)
    const response = yield* client.execute(request).pipe(Effect.mapError((error) => connectionError(provider, error)))
    const text = yield* response.text.pipe(Effect.mapError((error) => connectionError(provider, error)))
    const answer: Answer = { status: response.status, headers: response.headers, body: parseJson(text) }
    if (response.status >= 200 && response.status < 300) return answer
    const now = yield* Clock.currentTimeMillis
    const error = classify(provider, answer, now)
    if (operatorFault(response.status)) {
      yield* Effect.logError(`${provider}: ${error.message}. Check the provider key and account of this deployment.`)
    }
    return yield* Effect.fail(error)
  }).pipe(Effect.scoped)

/** The bytes and content type at `url` (an input image to upload); failures are the provider call's. */
export const download = (provider: string, url: string) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const response = yield* client.execute(HttpClientRequest.get(url)).pipe(Effect.mapError((error) => connectionError(provider, error)))
    if (response.status < 200 || response.status >= 300) {
      return yield* Effect.fail(new UpstreamError({ message: `the input ${url} answered ${response.status}`, reason: "INVALID_PARAMETERS", retryable: false }))
    }
    const bytes = yield* response.arrayBuffer.pipe(Effect.mapError((error) => connectionError(provider, error)))
    return { bytes: new Uint8Array(bytes), contentType: response.headers["content-type"] ?? "application/octet-stream" }
  }).pipe(Effect.scoped)

const parseJson = (text: string): unknown => {
  if (text === "") return undefined
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** A field of a JSON object, if the value is an object. */
export const field = (value: unknown, name: string): unknown =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>)[name] : undefined

/** A string field, if present. */
export const stringField = (value: unknown, name: string): Option.Option<string> => {
  const found = field(value, name)
  return typeof found === "string" ? Option.some(found) : Option.none()
}

/** A provider answered 2xx with something we cannot read: permanent, no class, the provider's fault. */
export const malformed = (provider: string, what: string, body: unknown): UpstreamError =>
  new UpstreamError({
    message: `${provider} answered without ${what}: ${describeBody(body) || "(empty body)"}`,
    reason: null,
    retryable: false
  })

/** The result of a job from the files it produced. */
export const result = (job: Task.UpstreamJob, urls: ReadonlyArray<string>): Task.TaskResult => ({ type: job.output, urls })
