/**
 * fal's queue API (https://docs.fal.ai/model-endpoints/queue):
 *
 * - submit `POST {base}/{model_id}` with the input as JSON and `Authorization: Key <key>`;
 *   the answer carries `request_id` (and status, response and cancel URLs);
 * - status `GET {base}/{app}/requests/{id}/status?logs=1`: `IN_QUEUE` (with `queue_position`,
 *   the requests ahead), `IN_PROGRESS` (with `logs`, every line so far as `{message, level,
 *   source, timestamp}`, which `?logs=1` asks for as the client's `status({ logs: true })`
 *   does) or `COMPLETED`. A running job's progress is its queue position, then its log
 *   messages, with a percent where a progress-bar line states one (`Progress`);
 * - result `GET {base}/{app}/requests/{id}`: images as `images[].url` (or `image.url`), a
 *   video as `video.url`; a job that failed answers here with its error (422 and its
 *   `detail`, a content-policy refusal among them);
 * - cancel `PUT {base}/{app}/requests/{id}/cancel`.
 *
 * `{app}` is derived from the model id as the official client does (`parseEndpointId` in
 * `@fal-ai/client`): the first two segments (`fal-ai/flux` of `fal-ai/flux/dev`), but three
 * for the `workflows/` and `comfy/` namespaces (`workflows/acme/poster-pipeline`), and a
 * legacy `<owner number>-<app>` id becomes `<owner number>/<app>`. Every submit carries the
 * attempt's key as `Idempotency-Key`; whether fal honours it is fal's.
 *
 * Image results carry `has_nsfw_concepts`, one flag per image (fal's safety checker, which
 * blacks out what it flags): flagged images are dropped, and a result whose every image is
 * flagged fails the attempt with CONTENT_MODERATION (docs/decisions.md, Providers and
 * routing). Result URLs that are `data:` URIs (a route's input with `sync_mode`) are refused:
 * a client never gets a data: URI as a result URL.
 *
 * Webhooks: with a webhook URL the submit adds `?fal_webhook=<url>`. fal signs each webhook
 * with ED25519 over `<request id>\n<user id>\n<timestamp>\n<hex SHA-256 of the body>`
 * (`X-Fal-Webhook-Request-Id`, `-User-Id`, `-Timestamp`, `-Signature` in hex), with keys
 * published as a JWKS (`jwksUrl`, fetched once a day); a timestamp more than 5 minutes
 * from now is refused.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Ids, type Upstream, UpstreamError } from "@mediagate/core"
import { Clock, Effect, Option } from "effect"
import { createHash, createPublicKey, type KeyObject, verify } from "node:crypto"
import * as Progress from "./ProgressParsing.js"
import * as ProviderHttp from "./ProviderHttp.js"
import type { Provider, ProviderJob } from "./Router.js"

export interface Options {
  /** fal's API key (`FAL_KEY`). */
  readonly key: string
  /** Default `https://queue.fal.run`. */
  readonly baseUrl?: string
  /** The provider's name in routes. Default `fal`. */
  readonly name?: string
  /** Where fal publishes its webhook keys. Default `https://rest.alpha.fal.ai/.well-known/jwks.json`. */
  readonly jwksUrl?: string
}

/** How long fetched webhook keys are used before fetching them again. */
const keysFor = 24 * 3_600_000

/** The ED25519 public keys of a JWKS (`kty` OKP, `crv` Ed25519, `x` base64url). */
export const jwksKeys = (jwks: unknown): ReadonlyArray<KeyObject> => {
  const keys = ProviderHttp.field(jwks, "keys")
  if (!Array.isArray(keys)) return []
  return keys.flatMap((key) => {
    const x = ProviderHttp.stringField(key, "x")
    if (Option.isNone(x)) return []
    try {
      return [createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: x.value }, format: "jwk" })]
    } catch {
      return []
    }
  })
}

/** What fal signs for a webhook. */
export const signedContent = (requestId: string, userId: string, timestamp: string, body: Uint8Array) =>
  Buffer.from([requestId, userId, timestamp, createHash("sha256").update(body).digest("hex")].join("\n"), "utf8")

/** Namespaces whose apps have three segments (`ENDPOINT_NAMESPACES` of the official client). */
const namespaces: ReadonlyArray<string> = ["workflows", "comfy"]

/** A model id as fal's URLs name it: a legacy `<owner number>-<app>` id becomes `<owner number>/<app>`. */
export const endpointOf = (model: string) => {
  if (model.includes("/")) return model
  const legacy = /^([0-9]+)-([a-zA-Z0-9-]+)$/.exec(model)
  return legacy === null ? model : `${legacy[1]}/${legacy[2]}`
}

/** The app of a model id, by which fal addresses its requests (`parseEndpointId` of the official client). */
export const appOf = (model: string) => {
  const parts = endpointOf(model).split("/")
  return parts.slice(0, namespaces.includes(parts[0]!) ? 3 : 2).join("/")
}

/** The files of a fal result: `images[].url`, `image.url` or `video.url`; `flagged[i]` when image i was flagged NSFW. */
export const filesOf = (body: unknown): { readonly urls: ReadonlyArray<string>; readonly flagged: number } => {
  const images = ProviderHttp.field(body, "images")
  if (Array.isArray(images)) {
    const nsfw = ProviderHttp.field(body, "has_nsfw_concepts")
    const flags: ReadonlyArray<unknown> = Array.isArray(nsfw) ? nsfw : []
    const kept = images.filter((_, i) => flags[i] !== true)
    return {
      urls: kept.flatMap((image) => Option.toArray(ProviderHttp.stringField(image, "url"))),
      flagged: images.length - kept.length
    }
  }
  for (const name of ["video", "image"]) {
    const url = ProviderHttp.stringField(ProviderHttp.field(body, name), "url")
    if (Option.isSome(url)) return { urls: [url.value], flagged: 0 }
  }
  return { urls: [], flagged: 0 }
}

/**
 * What a status answer says of a job not yet done: its `queue_position` (fal counts from 0,
 * next to run; the task's place is 1-based, so 1 is added), its `logs` messages.
 */
export const progressOf = (status: unknown) => {
  const logs = ProviderHttp.field(status, "logs")
  const lines = Array.isArray(logs)
    ? logs.flatMap((log) => Option.match(ProviderHttp.stringField(log, "message"), { onNone: () => [], onSome: Progress.linesOf }))
    : []
  const place = Progress.position(ProviderHttp.field(status, "queue_position"))
  return Progress.fromLogs(place === undefined ? undefined : place + 1, lines)
}

export const make = (options: Options): Provider => {
  const name = options.name ?? "fal"
  const base = (options.baseUrl ?? "https://queue.fal.run").replace(/\/+$/, "")
  const headers = { authorization: `Key ${options.key}` }
  const requestUrl = (job: ProviderJob, id: string) => `${base}/${appOf(job.model)}/requests/${encodeURIComponent(id)}`

  const fetchResult = (id: string, job: ProviderJob) =>
    Effect.gen(function*() {
      const answer = yield* ProviderHttp.send(name, { method: "GET", url: requestUrl(job, id), headers })
      const { flagged, urls } = filesOf(answer.body)
      if (urls.length === 0 && flagged > 0) {
        return yield* Effect.fail(
          new UpstreamError({ message: `${name}: the safety checker flagged every image (has_nsfw_concepts)`, reason: "CONTENT_MODERATION", retryable: false })
        )
      }
      if (urls.length === 0) return yield* Effect.fail(ProviderHttp.malformed(name, "images or a video", answer.body))
      if (urls.some((url) => url.startsWith("data:"))) {
        return yield* Effect.fail(
          new UpstreamError({ message: `${name} answered data: URIs, not file URLs (does the route's input set sync_mode?)`, reason: null, retryable: false })
        )
      }
      if (flagged > 0) yield* Effect.logWarning(`${name}: ${flagged} flagged image(s) of request ${id} dropped (has_nsfw_concepts)`)
      return ProviderHttp.result(job.job, urls)
    })

  const jwksUrl = options.jwksUrl ?? "https://rest.alpha.fal.ai/.well-known/jwks.json"
  let keys: { readonly keys: ReadonlyArray<KeyObject>; readonly until: number } | undefined
  const webhookKeys = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    if (keys !== undefined && keys.until > now) return keys.keys
    const client = yield* HttpClient.HttpClient
    const jwks = yield* HttpClient.filterStatusOk(client).execute(HttpClientRequest.get(jwksUrl)).pipe(
      Effect.flatMap((response) => response.json),
      Effect.scoped
    )
    const found = jwksKeys(jwks)
    if (found.length === 0) return yield* Effect.fail(new Error(`no ED25519 key in ${jwksUrl}`))
    keys = { keys: found, until: now + keysFor }
    return found
  })

  return {
    name,
    submit: (job, input, context) =>
      Effect.gen(function*() {
        const webhook = context.webhookUrl === undefined ? "" : `?fal_webhook=${encodeURIComponent(context.webhookUrl)}`
        const answer = yield* ProviderHttp.send(name, {
          method: "POST",
          url: `${base}/${endpointOf(job.model)}${webhook}`,
          headers: { ...headers, "idempotency-key": context.idempotencyKey },
          body: input
        })
        const id = ProviderHttp.stringField(answer.body, "request_id")
        if (Option.isNone(id)) return yield* Effect.fail(ProviderHttp.malformed(name, "a request_id", answer.body))
        return { _tag: "Accepted", upstreamId: Ids.UpstreamId.make(id.value) } satisfies Upstream.SubmitOutcome
      }),
    poll: (upstreamId, job) =>
      Effect.gen(function*() {
        const answer = yield* ProviderHttp.send(name, { method: "GET", url: `${requestUrl(job, upstreamId)}/status?logs=1`, headers })
        const status = ProviderHttp.stringField(answer.body, "status")
        if (Option.isNone(status)) return yield* Effect.fail(ProviderHttp.malformed(name, "a status", answer.body))
        if (status.value !== "COMPLETED") return Progress.running(progressOf(answer.body))
        const result = yield* fetchResult(upstreamId, job)
        return { _tag: "Completed", result } satisfies Upstream.PollOutcome
      }),
    cancel: (upstreamId, job) =>
      ProviderHttp.send(name, { method: "PUT", url: `${requestUrl(job, upstreamId)}/cancel`, headers }).pipe(Effect.asVoid),
    verifyWebhook: ({ body, headers: sent }) =>
      Effect.gen(function*() {
        const requestId = sent["x-fal-webhook-request-id"]
        const userId = sent["x-fal-webhook-user-id"]
        const timestamp = sent["x-fal-webhook-timestamp"]
        const signature = sent["x-fal-webhook-signature"]
        if (requestId === undefined || userId === undefined || timestamp === undefined || signature === undefined) return false
        if (!/^\d+$/.test(timestamp) || !/^[0-9a-f]+$/i.test(signature)) return false
        const now = yield* Clock.currentTimeMillis
        if (Math.abs(now - Number(timestamp) * 1000) > 5 * 60 * 1000) return false
        const content = signedContent(requestId, userId, timestamp, body)
        const bytes = Buffer.from(signature, "hex")
        return (yield* webhookKeys).some((key) => verify(null, content, key, bytes))
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning(`${name}: webhook keys could not be fetched from ${jwksUrl}`, cause).pipe(Effect.as(false)))
      )
  }
}
