/**
 * fal's queue API, as its official client (`@fal-ai/client`) speaks it and its docs describe
 * it; `test/conformance/Fal.conformance.test.ts` drives this fake with that client.
 *
 * - `POST /{endpoint}` (`?fal_webhook=<url>` the only query) submits the input, checked
 *   against the endpoint's schema (422 with Pydantic's `detail[]` for an unknown field, a
 *   wrong type, a value out of range; 404 for an unknown endpoint), and answers `request_id`,
 *   `status: IN_QUEUE` and the request's `response_url`, `status_url` and `cancel_url`;
 * - requests are addressed by the endpoint's app, as the client's `parseEndpointId` makes it:
 *   two segments (`fal-ai/flux`), three in the `workflows/` and `comfy/` namespaces. Any other
 *   prefix is 404, as it is at fal;
 * - `GET /{app}/requests/{id}/status` answers IN_QUEUE, then IN_PROGRESS, then COMPLETED
 *   (one step per call), with the fields of the client's `QueueStatus`: while queued its
 *   `queue_position` (the requests ahead, counting down to 0 over `queued` calls), then its
 *   `logs` as fal's `RequestLog`s (`message`, `level`, `source`, `timestamp`) when the query
 *   asks `?logs=1`, an empty list otherwise, as the client's `logs: false` gets;
 * - `GET /{app}/requests/{id}` the result (`x-fal-request-id` set): images with
 *   `has_nsfw_concepts` (a prompt with `nsfw` flags every image; `first-nsfw` only the first),
 *   or a video; `result` replaces it (a job's error, 422 with `detail`);
 * - `PUT /{app}/requests/{id}/cancel`: 202 `CANCELLATION_REQUESTED`, or 400
 *   `ALREADY_COMPLETED` once the job has finished;
 * - result files are real (PNG, MP4) at `/files/{name}`, without a key like fal's CDN; the
 *   URLs in results name `https://fal.media/files/{name}` (see `Files.cdnFetch`).
 *
 * `Authorization: Key <key>` is required (401 otherwise). A repeated `Idempotency-Key` gets
 * the request it made before. A submit's `fal_webhook` is kept; `complete` posts fal's signed
 * webhook there (ED25519 over request id, user id, timestamp and the body's SHA-256, the body
 * the client's `WebHookResponse`), with the key this fake publishes at `/.well-known/jwks.json`.
 */
import { createHash, generateKeyPairSync, sign } from "node:crypto"
import * as Files from "../conformance/Files.js"
import * as InputSchema from "../conformance/InputSchema.js"
import * as FakeServer from "./FakeServer.js"

export interface Job {
  readonly app: string
  readonly model: string
  readonly input: Record<string, unknown>
  statusCalls: number
  cancelled: boolean
  /** Finished whatever the status calls (`complete`). */
  done: boolean
  webhook: string | null
}

/** An endpoint the fake runs: its input schema and what it makes. */
export interface Endpoint {
  readonly input: InputSchema.Schema
  readonly output: "image" | "video"
}

const imageSize: InputSchema.Field = {
  type: "oneOf",
  options: [
    { type: "string", enum: ["square_hd", "square", "portrait_4_3", "portrait_16_9", "landscape_4_3", "landscape_16_9"] },
    { type: "object", fields: { width: { type: "integer", min: 1, max: 14142, required: true }, height: { type: "integer", min: 1, max: 14142, required: true } } }
  ]
}

const flux: InputSchema.Schema = {
  prompt: { type: "string", required: true },
  image_size: imageSize,
  num_inference_steps: { type: "integer", min: 1, max: 50 },
  seed: { type: "integer" },
  guidance_scale: { type: "number", min: 1, max: 20 },
  sync_mode: { type: "boolean" },
  num_images: { type: "integer", min: 1, max: 4 },
  enable_safety_checker: { type: "boolean" }
}

/** The endpoints the fake knows (fal's own ids; the workflow is one of an account's own). */
export const endpoints: Readonly<Record<string, Endpoint>> = {
  "fal-ai/flux/dev": { input: flux, output: "image" },
  "fal-ai/flux/schnell": { input: flux, output: "image" },
  "fal-ai/kling-video/v2/master/text-to-video": {
    input: {
      prompt: { type: "string", required: true },
      negative_prompt: { type: "string" },
      duration: { type: "string", enum: ["5", "10"] },
      aspect_ratio: { type: "string", enum: ["16:9", "9:16", "1:1"] },
      cfg_scale: { type: "number", min: 0, max: 1 }
    },
    output: "video"
  },
  "workflows/acme/poster-pipeline": {
    input: { prompt: { type: "string", required: true }, num_images: { type: "integer", min: 1, max: 4 } },
    output: "image"
  }
}

export interface Options {
  readonly key: string
  /** What a finished job answers, by its input (default: see `defaultResult`). */
  readonly result?: (job: Job, id: string) => FakeServer.Reply
  /** Status calls before COMPLETED (default `queued` + 1: IN_QUEUE, then IN_PROGRESS once; Infinity: until `complete`). */
  readonly steps?: number
  /** Endpoints beside `endpoints`. */
  readonly endpoints?: Readonly<Record<string, Endpoint>>
  /** Status calls answered IN_QUEUE, the first of `steps` (default 1, at queue position 0). */
  readonly queued?: number
  /** The lines a job has logged by its `step`th IN_PROGRESS status call (from 0); default none. */
  readonly logs?: (job: Job, step: number) => ReadonlyArray<string>
}

/** fal's `RequestLog` of a line, its timestamp a second per line. */
const requestLog = (message: string, i: number) => ({
  message,
  level: "INFO",
  source: "USER",
  timestamp: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString()
})

/** The app of an endpoint id, as the official client's `parseEndpointId` makes it. */
export const appOf = (endpoint: string) => {
  const parts = endpoint.split("/")
  return parts.slice(0, ["workflows", "comfy"].includes(parts[0]!) ? 3 : 2).join("/")
}

/** fal's signing key pair, as the fake's JWKS publishes its public half. */
const keys = generateKeyPairSync("ed25519")
const jwks = { keys: [{ ...keys.publicKey.export({ format: "jwk" }), kid: "fake-1", use: "sig" }] }

/** fal's webhook signature headers for `body`, signed with `privateKey` (the fake's own by default). */
export const signWebhook = (requestId: string, body: string, timestampSeconds: number, privateKey = keys.privateKey) => {
  const content = [requestId, "user-1", String(timestampSeconds), createHash("sha256").update(body).digest("hex")].join("\n")
  return {
    "x-fal-webhook-request-id": requestId,
    "x-fal-webhook-user-id": "user-1",
    "x-fal-webhook-timestamp": String(timestampSeconds),
    "x-fal-webhook-signature": sign(null, Buffer.from(content), privateKey).toString("hex")
  }
}

/** What a finished job makes: `num_images` PNGs (with `has_nsfw_concepts`), or an MP4. */
export const defaultResult = (job: Job, id: string, output: Endpoint["output"]): FakeServer.Reply => {
  if (output === "video") {
    const name = `${id}.mp4`
    return { status: 200, body: { video: { url: `https://fal.media/files/${name}`, content_type: "video/mp4", file_name: name, file_size: Files.file(name)!.bytes.length } } }
  }
  const prompt = String(job.input["prompt"] ?? "")
  const count = Number(job.input["num_images"] ?? 1)
  const images = Array.from({ length: count }, (_, i) => ({ url: `https://fal.media/files/${id}-${i}.png`, width: 64, height: 64, content_type: "image/png" }))
  const flagged = images.map((_, i) => prompt.includes("nsfw") && !(prompt.includes("first-nsfw") && i > 0))
  return { status: 200, body: { images, timings: { inference: 0.5 }, seed: 42, has_nsfw_concepts: flagged, prompt } }
}

const validation = (detail: ReadonlyArray<InputSchema.Problem>): FakeServer.Reply => ({ status: 422, body: { detail } })

export const start = async (options: Options) => {
  const known = { ...endpoints, ...options.endpoints }
  const jobs = new Map<string, Job>()
  const byKey = new Map<string, string>()
  let next = 0
  const queued = options.queued ?? 1
  const steps = options.steps ?? queued + 1
  const finished = (job: Job) => job.done || job.statusCalls > steps
  const resultOf = (job: Job, id: string) => options.result?.(job, id) ?? defaultResult(job, id, known[job.model]?.output ?? "image")
  const urls = (app: string, id: string) => {
    const base = `${server.url}/${app}/requests/${id}`
    return { response_url: base, status_url: `${base}/status`, cancel_url: `${base}/cancel` }
  }

  const server = await FakeServer.start((request, url) => {
    if (url.pathname === "/.well-known/jwks.json") return { status: 200, body: jwks }
    const file = /^\/files\/([^/]+)$/.exec(url.pathname)
    if (file !== null && request.method === "GET") {
      const found = Files.file(file[1]!)
      return found === undefined ? { status: 404, body: { detail: "Not Found" } } : { status: 200, body: found.bytes, headers: { "content-type": found.contentType } }
    }
    if (request.headers.authorization !== `Key ${options.key}`) return { status: 401, body: { detail: "Invalid key" } }
    const priority = request.headers["x-fal-queue-priority"]
    if (priority !== undefined && priority !== "normal" && priority !== "low") {
      return validation([{ loc: ["header", "x-fal-queue-priority"], msg: "Input should be 'normal' or 'low'", type: "enum" }])
    }
    const requestPath = /^\/(.+?)\/requests\/([^/]+)(\/status|\/cancel)?$/.exec(url.pathname)
    if (requestPath !== null) {
      const [, app, id, action] = requestPath
      const job = jobs.get(id!)
      if (job === undefined || job.app !== app) return { status: 404, body: { detail: "Request not found" } }
      if (action === "/cancel") {
        if (request.method !== "PUT") return { status: 405, body: { detail: "Method Not Allowed" } }
        if (finished(job)) return { status: 400, body: { status: "ALREADY_COMPLETED" } }
        job.cancelled = true
        return { status: 202, body: { status: "CANCELLATION_REQUESTED" } }
      }
      if (request.method !== "GET") return { status: 405, body: { detail: "Method Not Allowed" } }
      if (action === "/status") {
        const logs = url.searchParams.get("logs")
        if (logs !== null && logs !== "0" && logs !== "1") return validation([{ loc: ["query", "logs"], msg: "Input should be 0 or 1", type: "enum" }])
        const step = job.statusCalls++
        const status = job.done || step >= steps ? "COMPLETED" : step < queued ? "IN_QUEUE" : "IN_PROGRESS"
        const lines = logs === "1" && status === "IN_PROGRESS" ? options.logs?.(job, step - queued) ?? [] : []
        // The client's QueueStatus: a queue position while queued, logs after (an empty list when not asked for).
        return {
          status: 200,
          body: {
            status,
            request_id: id,
            ...urls(app!, id!),
            ...(status === "IN_QUEUE" ? { queue_position: queued - 1 - step } : { logs: lines.map(requestLog) }),
            ...(status === "COMPLETED" ? { metrics: { inference_time: 0.5 } } : {})
          }
        }
      }
      const reply = resultOf(job, id!)
      return { ...reply, headers: { ...reply.headers, "x-fal-request-id": id! } }
    }
    if (request.method !== "POST") return undefined
    const model = url.pathname.slice(1)
    const endpoint = known[model]
    if (endpoint === undefined) return { status: 404, body: { detail: `Application '${appOf(model)}' not found` } }
    const unknownQuery = [...url.searchParams.keys()].filter((name) => name !== "fal_webhook")
    if (unknownQuery.length > 0) return validation(unknownQuery.map((name) => ({ loc: ["query", name], msg: "Extra inputs are not permitted", type: "extra_forbidden" })))
    const webhook = url.searchParams.get("fal_webhook")
    if (webhook !== null && !/^https?:\/\/[^/]/.test(webhook)) return validation([{ loc: ["query", "fal_webhook"], msg: "Input should be a valid URL", type: "url_parsing" }])
    let input: unknown
    try {
      input = FakeServer.json(request)
    } catch {
      return validation([{ loc: ["body"], msg: "JSON decode error", type: "json_invalid" }])
    }
    if (!InputSchema.isObject(input)) return validation([{ loc: ["body"], msg: "Input should be a valid dictionary", type: "dict_type" }])
    const problems = InputSchema.check(endpoint.input, input)
    if (problems.length > 0) return validation(problems)
    const key = request.headers["idempotency-key"]
    const before = typeof key === "string" ? byKey.get(key) : undefined
    const id = before ?? `req-${++next}`
    if (before === undefined) {
      jobs.set(id, { app: appOf(model), model, input, statusCalls: 0, cancelled: false, done: false, webhook })
      if (typeof key === "string") byKey.set(key, id)
    }
    return { status: 200, body: { status: "IN_QUEUE", request_id: id, ...urls(jobs.get(id)!.app, id), queue_position: Math.max(0, queued - 1 - jobs.get(id)!.statusCalls) } }
  })

  /** The webhook fal posts for a finished job: the client's `WebHookResponse`, OK with the result or ERROR. */
  const webhookBody = (id: string) => {
    const reply = resultOf(jobs.get(id)!, id)
    return reply.status === 200
      ? { request_id: id, gateway_request_id: id, status: "OK", payload: reply.body }
      : { request_id: id, gateway_request_id: id, status: "ERROR", error: `Invalid status code: ${reply.status}`, payload: reply.body }
  }
  /** Finishes a job and posts fal's signed webhook to its `fal_webhook`; answers the status of that post. */
  const complete = async (id: string) => {
    const job = jobs.get(id)!
    job.done = true
    if (job.webhook === null) return undefined
    const body = JSON.stringify(webhookBody(id))
    const response = await fetch(job.webhook, {
      method: "POST",
      headers: { "content-type": "application/json", ...signWebhook(id, body, Math.floor(Date.now() / 1000)) },
      body
    })
    return response.status
  }
  return { ...server, jobs, complete, jwksUrl: `${server.url}/.well-known/jwks.json` }
}
