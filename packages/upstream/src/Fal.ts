/**
 * fal's queue API (https://docs.fal.ai/model-endpoints/queue):
 *
 * - submit `POST {base}/{model_id}` with the input as JSON and `Authorization: Key <key>`;
 *   the answer carries `request_id` (and status, response and cancel URLs);
 * - status `GET {base}/{app}/requests/{id}/status`: `IN_QUEUE`, `IN_PROGRESS` or `COMPLETED`;
 * - result `GET {base}/{app}/requests/{id}`: images as `images[].url` (or `image.url`), a
 *   video as `video.url`; a job that failed answers here with its error (422 and its
 *   `detail`, a content-policy refusal among them);
 * - cancel `PUT {base}/{app}/requests/{id}/cancel`.
 *
 * `{app}` is the model id's first two segments (`fal-ai/flux` of `fal-ai/flux/dev`), as fal
 * addresses requests. Every submit carries the attempt's key as `Idempotency-Key`; whether
 * fal honours it is fal's. Webhooks (`fal_webhook`) are not used yet: jobs are polled.
 */
import { Ids, type Upstream } from "@mediagate/core"
import { Effect, Option } from "effect"
import * as ProviderHttp from "./ProviderHttp.js"
import type { Provider, ProviderJob } from "./Router.js"

export interface Options {
  /** fal's API key (`FAL_KEY`). */
  readonly key: string
  /** Default `https://queue.fal.run`. */
  readonly baseUrl?: string
  /** The provider's name in routes. Default `fal`. */
  readonly name?: string
}

/** The app of a model id, by which fal addresses its requests. */
export const appOf = (model: string) => model.split("/").slice(0, 2).join("/")

/** The files of a fal result: `images[].url`, `image.url` or `video.url`. */
export const filesOf = (body: unknown): ReadonlyArray<string> => {
  const images = ProviderHttp.field(body, "images")
  if (Array.isArray(images)) return images.flatMap((image) => Option.toArray(ProviderHttp.stringField(image, "url")))
  for (const name of ["video", "image"]) {
    const url = ProviderHttp.stringField(ProviderHttp.field(body, name), "url")
    if (Option.isSome(url)) return [url.value]
  }
  return []
}

export const make = (options: Options): Provider => {
  const name = options.name ?? "fal"
  const base = (options.baseUrl ?? "https://queue.fal.run").replace(/\/+$/, "")
  const headers = { authorization: `Key ${options.key}` }
  const requestUrl = (job: ProviderJob, id: string) => `${base}/${appOf(job.model)}/requests/${encodeURIComponent(id)}`

  const fetchResult = (id: string, job: ProviderJob) =>
    Effect.gen(function*() {
      const answer = yield* ProviderHttp.send(name, { method: "GET", url: requestUrl(job, id), headers })
      const files = filesOf(answer.body)
      if (files.length === 0) return yield* Effect.fail(ProviderHttp.malformed(name, "images or a video", answer.body))
      return ProviderHttp.result(job.job, files)
    })

  return {
    name,
    submit: (job, input, context) =>
      Effect.gen(function*() {
        const answer = yield* ProviderHttp.send(name, {
          method: "POST",
          url: `${base}/${job.model}`,
          headers: { ...headers, "idempotency-key": context.idempotencyKey },
          body: input
        })
        const id = ProviderHttp.stringField(answer.body, "request_id")
        if (Option.isNone(id)) return yield* Effect.fail(ProviderHttp.malformed(name, "a request_id", answer.body))
        return { _tag: "Accepted", upstreamId: Ids.UpstreamId.make(id.value) } satisfies Upstream.SubmitOutcome
      }),
    poll: (upstreamId, job) =>
      Effect.gen(function*() {
        const answer = yield* ProviderHttp.send(name, { method: "GET", url: `${requestUrl(job, upstreamId)}/status`, headers })
        const status = ProviderHttp.stringField(answer.body, "status")
        if (Option.isNone(status)) return yield* Effect.fail(ProviderHttp.malformed(name, "a status", answer.body))
        if (status.value !== "COMPLETED") return { _tag: "Running" } satisfies Upstream.PollOutcome
        const result = yield* fetchResult(upstreamId, job)
        return { _tag: "Completed", result } satisfies Upstream.PollOutcome
      }),
    cancel: (upstreamId, job) =>
      ProviderHttp.send(name, { method: "PUT", url: `${requestUrl(job, upstreamId)}/cancel`, headers }).pipe(Effect.asVoid)
  }
}
