/**
 * fal's queue API as its docs describe it: `POST /{model_id}` answers `request_id` and the
 * request URLs; `GET /{app}/requests/{id}/status` answers IN_QUEUE, then IN_PROGRESS, then
 * COMPLETED (one step per status call); `GET /{app}/requests/{id}` the result, or the job's
 * error (422 with `detail`); `PUT /{app}/requests/{id}/cancel`. `Authorization: Key <key>` is
 * required (401 otherwise). A repeated `Idempotency-Key` gets the request it made before.
 * A submit's `fal_webhook` is kept; `sendWebhook` posts fal's signed webhook there (ED25519
 * over request id, user id, timestamp and the body's SHA-256), with the key this fake
 * publishes at `/.well-known/jwks.json`.
 */
import { createHash, generateKeyPairSync, sign } from "node:crypto"
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

export interface Options {
  readonly key: string
  /** What a finished job answers, by its input (default: one image per `num_images`). */
  readonly result?: (job: Job) => FakeServer.Reply
  /** Status calls before COMPLETED (default 2: IN_QUEUE, IN_PROGRESS; Infinity: until `complete`). */
  readonly steps?: number
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

export const start = async (options: Options) => {
  const jobs = new Map<string, Job>()
  const byKey = new Map<string, string>()
  let next = 0
  const server = await FakeServer.start((request, url) => {
    if (url.pathname === "/.well-known/jwks.json") return { status: 200, body: jwks }
    if (request.headers.authorization !== `Key ${options.key}`) return { status: 401, body: { detail: "Invalid key" } }
    const requestPath = /^\/(.+?)\/requests\/([^/]+)(\/status|\/cancel)?$/.exec(url.pathname)
    if (requestPath !== null) {
      const [, app, id, action] = requestPath
      const job = jobs.get(id!)
      if (job === undefined || job.app !== app) return { status: 404, body: { detail: "Request not found" } }
      if (action === "/cancel" && request.method === "PUT") {
        job.cancelled = true
        return { status: 202, body: { status: "CANCELLATION_REQUESTED" } }
      }
      if (action === "/status" && request.method === "GET") {
        const step = job.statusCalls++
        const steps = options.steps ?? 2
        const status = job.done || step >= steps ? "COMPLETED" : step === 0 ? "IN_QUEUE" : "IN_PROGRESS"
        return { status: 200, body: { status, request_id: id, ...(status === "IN_QUEUE" ? { queue_position: 0 } : {}), response_url: `${server.url}/${app}/requests/${id}` } }
      }
      if (action === undefined && request.method === "GET") {
        return options.result?.(job) ?? {
          status: 200,
          body: { images: Array.from({ length: Number(job.input["num_images"] ?? 1) }, (_, i) => ({ url: `https://fal.media/files/${id}-${i}.png`, width: 64, height: 64 })) }
        }
      }
    }
    if (request.method === "POST") {
      const model = url.pathname.slice(1)
      const key = request.headers["idempotency-key"]
      const known = typeof key === "string" ? byKey.get(key) : undefined
      const id = known ?? `req-${++next}`
      if (known === undefined) {
        jobs.set(id, {
          app: model.split("/").slice(0, 2).join("/"),
          model,
          input: FakeServer.json(request),
          statusCalls: 0,
          cancelled: false,
          done: false,
          webhook: url.searchParams.get("fal_webhook")
        })
        if (typeof key === "string") byKey.set(key, id)
      }
      const app = jobs.get(id)!.app
      const base = `${server.url}/${app}/requests/${id}`
      return { status: 200, body: { request_id: id, response_url: base, status_url: `${base}/status`, cancel_url: `${base}/cancel`, queue_position: 0 } }
    }
    return undefined
  })
  /** Finishes a job and posts fal's signed webhook to its `fal_webhook`; answers the status of that post. */
  const complete = async (id: string) => {
    const job = jobs.get(id)!
    job.done = true
    if (job.webhook === null) return undefined
    const body = JSON.stringify({ request_id: id, gateway_request_id: id, status: "OK", payload: { images: [{ url: "https://fal.media/files/0.png" }] } })
    const response = await fetch(job.webhook, {
      method: "POST",
      headers: { "content-type": "application/json", ...signWebhook(id, body, Math.floor(Date.now() / 1000)) },
      body
    })
    return response.status
  }
  return { ...server, jobs, complete, jwksUrl: `${server.url}/.well-known/jwks.json` }
}
