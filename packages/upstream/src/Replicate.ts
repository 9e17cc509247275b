/**
 * Replicate predictions (https://replicate.com/docs/reference/http):
 *
 * - submit `POST {base}/v1/models/{owner}/{name}/predictions` with `{input}`, or, for a model
 *   id with a version (`owner/name:version`), `POST {base}/v1/predictions` with
 *   `{version, input}`; `Authorization: Bearer <token>`; with `wait`, `Prefer: wait=N` asks
 *   Replicate to hold the answer up to N seconds, so a short job comes back finished;
 * - a prediction is `starting`, `processing`, `succeeded`, `failed`, `canceled` or `aborted`
 *   (the official client's `Status`; `aborted` ends it like `canceled`); `output` is a URL or a
 *   list of URLs; `error` says why it failed;
 * - under `Prefer: wait` an output may be a base64 `data:` URI (the official client's `run()`
 *   takes `https:` or `data:`): it is decoded, at most `maxDataBytes`, typed by its bytes
 *   (the declared type, often application/octet-stream, is not trusted) and stored in the
 *   MediaStore, so the task returns our URL, never a data: URI (docs/decisions.md); a
 *   prediction that ended at submit but whose outputs could not be stored for a while is
 *   answered as accepted and polled, never created again;
 * - status `GET {base}/v1/predictions/{id}`; cancel `POST {base}/v1/predictions/{id}/cancel`.
 *   A prediction still `starting` or `processing` reports its `logs` (one text, every line
 *   so far) as its progress, with a percent where a progress-bar line states one
 *   (`Progress`, the rule of the official client's `parseProgressFromLogs`). Replicate gives
 *   no queue position. `metrics.predict_time` comes only with the end, so it is no progress.
 *
 * A failed prediction whose error says the content policy refused it (NSFW, the safety
 * checker, flagged as sensitive: `ProviderHttp.isContentPolicy`, every adapter's one match) is
 * CONTENT_MODERATION; other failures are permanent with no class. Every submit carries the attempt's key as
 * `Idempotency-Key`; whether Replicate honours it is Replicate's.
 *
 * Webhooks: with a webhook URL the prediction is created with `webhook` and
 * `webhook_events_filter: ["completed"]` (`webhookEvents`: a `logs` event, which Replicate
 * sends up to twice a second, wakes the task for a poll each time, so it is asked for only
 * when the host says so: `MEDIAGATE_REPLICATE_WEBHOOK_EVENTS` in the standalone server).
 * Replicate signs them in the Standard Webhooks scheme with the account's webhook secret
 * (`webhookSecret`, or fetched once from `GET /v1/webhooks/default/secret`).
 */
import { Ids, MediaProbe, MediaStore, StandardWebhooks, type Task, type Upstream, UpstreamError } from "@mediagate/core"
import { Clock, Effect, Option } from "effect"
import * as Progress from "./ProgressParsing.js"
import * as ProviderHttp from "./ProviderHttp.js"
import type { Provider, ProviderJob } from "./Router.js"

/** The events Replicate sends a prediction's webhook for (its `webhook_events_filter`), in its order. */
export const webhookEvents = ["start", "output", "logs", "completed"] as const

/** One of `webhookEvents`. */
export type WebhookEvent = typeof webhookEvents[number]

export interface Options {
  /** Replicate's API token (`REPLICATE_API_TOKEN`). */
  readonly token: string
  /** Default `https://api.replicate.com`. */
  readonly baseUrl?: string
  /** Seconds Replicate may hold a submit for a short job to finish (`Prefer: wait`), 1 to 60; none by default. */
  readonly wait?: number
  /** The provider's name in routes. Default `replicate`. */
  readonly name?: string
  /** The account's webhook signing secret (`whsec_...`); fetched from Replicate when not given. */
  readonly webhookSecret?: string
  /**
   * Where `data:` outputs are stored (`makeWithStore` takes the deployment's). Without it a
   * `data:` output fails the attempt: it is never returned as a result URL.
   */
  readonly media?: MediaStore.MediaStore["Type"]
  /** The largest `data:` output decoded, in bytes. Default 32 MiB. */
  readonly maxDataBytes?: number
  /**
   * The events a prediction's webhook is sent for. Default `["completed"]`. Each genuine
   * webhook wakes its task for a poll: `logs` (at most twice a second while a model prints)
   * makes the task's progress follow the logs, at the price of that many polls.
   */
  readonly webhookEvents?: ReadonlyArray<WebhookEvent>
}

/** What a prediction not yet ended says of its job: its `logs`, as lines. */
export const progressOf = (prediction: unknown) => {
  const logs = ProviderHttp.field(prediction, "logs")
  return Progress.fromLogs(undefined, typeof logs === "string" ? Progress.linesOf(logs) : [])
}

/** The files of a prediction's output: a URL, or a list of them. */
export const filesOf = (output: unknown): ReadonlyArray<string> =>
  typeof output === "string" ? [output] : Array.isArray(output) ? output.filter((item): item is string => typeof item === "string") : []

/** A `data:` URI's media type and bytes; none when it is not one, or larger than `limit` bytes (`tooLarge`). */
export const decodeDataUri = (
  uri: string,
  limit: number
): Option.Option<{ readonly contentType: string; readonly bytes: Uint8Array } | "tooLarge"> => {
  const match = /^data:([^,;]*)((?:;[^,;]*)*),(.*)$/s.exec(uri)
  if (match === null) return Option.none()
  const base64 = match[2]!.split(";").includes("base64")
  const data = match[3]!
  // Checked before decoding, so a huge answer is never held twice.
  if ((base64 ? Math.floor(data.length * 3 / 4) : data.length) > limit + 3) return Option.some("tooLarge")
  let bytes: Uint8Array
  try {
    bytes = base64 ? new Uint8Array(Buffer.from(data, "base64")) : new Uint8Array(Buffer.from(decodeURIComponent(data), "utf8"))
  } catch {
    return Option.none()
  }
  if (bytes.length > limit) return Option.some("tooLarge")
  return Option.some({ contentType: (match[1]! || "text/plain").toLowerCase(), bytes })
}

/** The extension the MediaStore serves a content type under. */
const extensionOf = (contentType: string) =>
  Object.entries(MediaStore.contentTypes).find(([, type]) => type === contentType)?.[0]

/** The adapter, storing `data:` outputs in the deployment's MediaStore. */
export const makeWithStore = (options: Omit<Options, "media">): Effect.Effect<Provider, never, MediaStore.MediaStore> =>
  Effect.map(MediaStore.MediaStore, (media) => make({ ...options, media }))

/** The adapter; give it `media` (or use `makeWithStore`) to accept `data:` outputs. */
export const make = (options: Options): Provider => {
  const name = options.name ?? "replicate"
  const base = (options.baseUrl ?? "https://api.replicate.com").replace(/\/+$/, "")
  const headers = { authorization: `Bearer ${options.token}` }
  const maxDataBytes = options.maxDataBytes ?? 32 * 1024 * 1024
  const permanent = (message: string) => new UpstreamError({ message: `${name}: ${message}`, reason: null, retryable: false })

  /** An output's URL: itself, or for a `data:` URI the URL of its bytes stored in the MediaStore. */
  const hosted = (url: string): Effect.Effect<string, UpstreamError> => {
    if (!url.startsWith("data:")) return Effect.succeed(url)
    const decoded = decodeDataUri(url, maxDataBytes)
    if (Option.isNone(decoded)) return Effect.fail(permanent("an output is a data: URI that cannot be decoded"))
    if (decoded.value === "tooLarge") return Effect.fail(permanent(`a data: output is larger than ${maxDataBytes} bytes`))
    // The type comes from the bytes, as for a file fetched from a URL: a declared type
    // (application/octet-stream, text/plain, none) says nothing a picture's first bytes do not.
    const declared = decoded.value.contentType
    const { bytes } = decoded.value
    const contentType = MediaProbe.contentType(bytes)
    const extension = extensionOf(contentType)
    if (extension === undefined) {
      return Effect.fail(
        permanent(`a data: output declared ${declared.slice(0, 64)} is not an image, video or audio file we serve (its bytes are ${contentType})`)
      )
    }
    if (options.media === undefined) return Effect.fail(permanent("a data: output cannot be hosted: this adapter was made without a MediaStore"))
    return options.media.put({ bytes, contentType, extension }).pipe(
      Effect.mapError((error) => new UpstreamError({ message: `storing ${name}'s output failed: ${error.message}`, reason: null, retryable: true }))
    )
  }

  /** What a prediction says about its job. */
  const outcome = (job: Task.UpstreamJob, prediction: unknown): Effect.Effect<Upstream.PollOutcome, UpstreamError> => {
    const status = ProviderHttp.stringField(prediction, "status")
    if (Option.isNone(status)) return Effect.fail(ProviderHttp.malformed(name, "a status", prediction))
    switch (status.value) {
      case "succeeded": {
        const files = filesOf(ProviderHttp.field(prediction, "output"))
        return files.length === 0
          ? Effect.fail(ProviderHttp.malformed(name, "output URLs", prediction))
          : Effect.forEach(files, hosted).pipe(Effect.map((urls) => ({ _tag: "Completed", result: ProviderHttp.result(job, urls) })))
      }
      case "failed": {
        const error = ProviderHttp.describeBody(ProviderHttp.field(prediction, "error")) || "the prediction failed"
        return Effect.fail(
          new UpstreamError({ message: `${name}: ${error}`, reason: ProviderHttp.isContentPolicy(error) ? "CONTENT_MODERATION" : null, retryable: false })
        )
      }
      case "canceled":
      case "aborted":
        return Effect.fail(permanent(`the prediction was ${status.value}`))
      default:
        return Effect.succeed(Progress.running(progressOf(prediction)))
    }
  }

  const predictionUrl = (id: string) => `${base}/v1/predictions/${encodeURIComponent(id)}`

  let secret = options.webhookSecret
  const webhookSecret = secret !== undefined
    ? Effect.succeed(secret)
    : ProviderHttp.send(name, { method: "GET", url: `${base}/v1/webhooks/default/secret`, headers }).pipe(
      Effect.flatMap((answer) => {
        const key = ProviderHttp.stringField(answer.body, "key")
        return Option.isSome(key) ? Effect.sync(() => (secret = key.value)) : Effect.fail(ProviderHttp.malformed(name, "a webhook secret", answer.body))
      })
    )

  return {
    name,
    submit: (job: ProviderJob, input, context) =>
      Effect.gen(function*() {
        const [model, version] = job.model.split(":") as [string, string | undefined]
        const answer = yield* ProviderHttp.send(name, {
          method: "POST",
          url: version === undefined ? `${base}/v1/models/${model}/predictions` : `${base}/v1/predictions`,
          headers: {
            ...headers,
            "idempotency-key": context.idempotencyKey,
            ...(options.wait === undefined ? {} : { prefer: `wait=${options.wait}` })
          },
          body: {
            ...(version === undefined ? {} : { version }),
            input,
            ...(context.webhookUrl === undefined ? {} : { webhook: context.webhookUrl, webhook_events_filter: options.webhookEvents ?? ["completed"] })
          }
        })
        const id = ProviderHttp.stringField(answer.body, "id")
        if (Option.isNone(id)) return yield* Effect.fail(ProviderHttp.malformed(name, "a prediction id", answer.body))
        // The prediction exists now and is paid for: a transient failure after this (its data:
        // output not stored, the MediaStore down) must not create another. It is answered as
        // accepted, and the poll reads the prediction again.
        const now = yield* outcome(job.job, answer.body).pipe(
          Effect.catchIf((error) => error.retryable, (error) =>
            Effect.as(
              Effect.logWarning(`${name}: prediction ${id.value} ended at submit, but ${error.message}; polling it`),
              { _tag: "Running" } as const
            ))
        )
        return now._tag === "Completed"
          ? ({ _tag: "Completed", result: now.result } satisfies Upstream.SubmitOutcome)
          : ({ _tag: "Accepted", upstreamId: Ids.UpstreamId.make(id.value) } satisfies Upstream.SubmitOutcome)
      }),
    poll: (upstreamId, job) =>
      ProviderHttp.send(name, { method: "GET", url: predictionUrl(upstreamId), headers }).pipe(
        Effect.flatMap((answer) => outcome(job.job, answer.body))
      ),
    cancel: (upstreamId) => ProviderHttp.send(name, { method: "POST", url: `${predictionUrl(upstreamId)}/cancel`, headers }).pipe(Effect.asVoid),
    verifyWebhook: (webhook) =>
      Effect.gen(function*() {
        const key = secret ?? (yield* webhookSecret)
        return StandardWebhooks.verify(key, webhook.headers, webhook.body, yield* Clock.currentTimeMillis)
      }).pipe(Effect.catchAll((error) => Effect.logWarning(`${name}: the webhook secret could not be fetched: ${error.message}`).pipe(Effect.as(false))))
  }
}
