/**
 * Replicate's predictions API, as its official client (`replicate` on npm) speaks it and its
 * HTTP reference describes it; `test/conformance/Replicate.conformance.test.ts` drives this
 * fake with that client.
 *
 * - `POST /v1/models/{owner}/{name}/predictions` with `{input}`, or `POST /v1/predictions`
 *   with `{version, input}`, answers a prediction `starting` (201). The body may also hold
 *   `webhook` and `webhook_events_filter`; anything else is 422, as is an input the model's
 *   schema refuses (`invalid_fields`, Replicate's shape), an unknown version; an unknown
 *   model is 404;
 * - `Prefer: wait` or `wait=N` (1 to 60) answers the prediction finished; with `dataUris`
 *   its files come as base64 `data:` URIs, which the official client's `run()` takes;
 * - each `GET /v1/predictions/{id}` moves it one step (processing, for `processing` gets,
 *   then its end: succeeded, failed, or `aborted`, a terminal status of the client's `Status`
 *   type), with its `logs` so far as one text (`logs`; tqdm lines, as models print them);
 *   `POST /v1/predictions/{id}/cancel` cancels it;
 * - result files are real (WebP, PNG, MP4) at `/files/{name}`, without a token like
 *   Replicate's CDN; outputs name `https://replicate.delivery/{name}` (see `Files.cdnFetch`);
 * - `GET /v1/webhooks/default/secret` answers the account's signing secret, and `complete`
 *   finishes a prediction and posts it to its webhook, signed in the Standard Webhooks scheme;
 *   `logged` posts a `logs` event (the prediction as it is) where the filter asks for one.
 *
 * `Authorization: Bearer <token>` is required (401 otherwise). A repeated `Idempotency-Key`
 * gets the prediction it made before.
 */
import { createHmac } from "node:crypto"
import * as Files from "../conformance/Files.js"
import * as InputSchema from "../conformance/InputSchema.js"
import * as FakeServer from "./FakeServer.js"

export interface Prediction {
  readonly id: string
  readonly model: string
  readonly version: string | null
  readonly input: Record<string, unknown>
  status: string
  gets: number
  cancelled: boolean
  /** Finished by a `Prefer: wait` submit of a fake with `dataUris`: its files are data: URIs. */
  inline: boolean
  readonly webhook: string | null
  readonly events: ReadonlyArray<string> | null
}

/** A model the fake runs: its input schema, its one version, and what it makes. */
export interface Model {
  readonly input: InputSchema.Schema
  readonly version: string
  readonly output: "images" | "video"
}

/** How a prediction ends: its output, a failure's error, or aborted. */
export type End = { readonly output: unknown } | { readonly error: string } | { readonly aborted: true }

const flux = (version: string): Model => ({
  input: {
    prompt: { type: "string", required: true },
    aspect_ratio: { type: "string", enum: ["1:1", "16:9", "21:9", "3:2", "2:3", "4:5", "5:4", "3:4", "4:3", "9:16", "9:21"] },
    num_outputs: { type: "integer", min: 1, max: 4 },
    seed: { type: "integer" },
    output_format: { type: "string", enum: ["webp"] },
    disable_safety_checker: { type: "boolean" }
  },
  version,
  output: "images"
})

/** The models the fake knows: Replicate's own, and `o/m`, the suites' stand-in image model. */
export const models: Readonly<Record<string, Model>> = {
  "black-forest-labs/flux-schnell": flux("f2ab8a5bfe79f02f0789a146cf5e73d2a4ff2684a98c2b303d1e1ff3814271db"),
  "black-forest-labs/flux-dev": flux("6e4a938f85952bdabcc15aa329178c4d681c52bf25a0342403287dc26944661d"),
  "o/m": flux("5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa"),
  "minimax/video-01": {
    input: { prompt: { type: "string", required: true }, first_frame_image: { type: "uri" }, prompt_optimizer: { type: "boolean" } },
    version: "c8bcc4751328608bb75043b3af7bed4eabcf1a6c0a478d50a4cf57fa04bd5101",
    output: "video"
  }
}

export interface Options {
  readonly token: string
  /** How a prediction ends, by its input (default: its model's files). */
  readonly end?: (prediction: Prediction) => End
  /** Answer the files of a prediction finished under `Prefer: wait` as `data:` URIs. */
  readonly dataUris?: boolean
  /** The account's webhook signing secret. */
  readonly webhookSecret?: string
  /** Models beside `models`. */
  readonly models?: Readonly<Record<string, Model>>
  /** Gets a prediction answers `processing` before it ends (default 1). */
  readonly processing?: number
  /** A prediction's `logs` so far (default ""). */
  readonly logs?: (prediction: Prediction) => string
}

/** Standard Webhooks headers for `body`, signed with `secret` (`whsec_<base64>`). */
export const signWebhook = (secret: string, id: string, body: string, timestampSeconds: number) => ({
  "webhook-id": id,
  "webhook-timestamp": String(timestampSeconds),
  "webhook-signature": `v1,${createHmac("sha256", Buffer.from(secret.replace(/^whsec_/, ""), "base64")).update(`${id}.${timestampSeconds}.${body}`).digest("base64")}`
})

/** Replicate's 422 for input its schema refuses. */
const invalidInput = (problems: ReadonlyArray<InputSchema.Problem>): FakeServer.Reply => {
  const fields = problems.map((problem) => ({ type: problem.type, field: problem.loc.join("."), description: problem.msg }))
  return {
    status: 422,
    body: { title: "Input validation failed", detail: fields.map((f) => `- ${f.field}: ${f.description}\n`).join(""), status: 422, invalid_fields: fields }
  }
}

const invalidRequest = (detail: string): FakeServer.Reply => ({ status: 422, body: { title: "Invalid request", detail, status: 422 } })

const terminal = ["succeeded", "failed", "canceled", "aborted"]

export const start = async (options: Options) => {
  const known = { ...models, ...options.models }
  const byVersion = new Map(Object.entries(known).map(([name, model]) => [model.version, name]))
  const secret = options.webhookSecret ?? "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
  const predictions = new Map<string, Prediction>()
  const byKey = new Map<string, string>()
  let next = 0

  /** The files a prediction makes: `num_outputs` WebPs, or an MP4. */
  const defaultEnd = (p: Prediction): End =>
    known[p.model]?.output === "video"
      ? { output: `https://replicate.delivery/${p.id}.mp4` }
      : { output: Array.from({ length: Number(p.input["num_outputs"] ?? 1) }, (_, i) => `https://replicate.delivery/out-${i}.webp`) }
  const endOf = (p: Prediction) => options.end?.(p) ?? defaultEnd(p)
  /** A file URL, or under `inline` its bytes as a data: URI. */
  const inline = (value: unknown): unknown =>
    typeof value === "string" && value.startsWith("https://replicate.delivery/") ? Files.dataUri(value.split("/").at(-1)!)
    : Array.isArray(value) ? value.map(inline)
    : value
  const view = (p: Prediction) => {
    const ended = p.status === "succeeded" || p.status === "failed" ? endOf(p) : {}
    const output = "output" in ended ? (p.inline ? inline(ended.output) : ended.output) : null
    return {
      id: p.id,
      model: p.model,
      version: p.version ?? known[p.model]!.version,
      input: p.input,
      logs: options.logs?.(p) ?? "",
      output,
      data_removed: false,
      error: "error" in ended ? ended.error : null,
      status: p.status,
      source: "api",
      created_at: "2026-01-01T00:00:00.000Z",
      ...(terminal.includes(p.status) ? { completed_at: "2026-01-01T00:00:02.000Z", metrics: { predict_time: 1.5 } } : {}),
      ...(p.webhook === null ? {} : { webhook: p.webhook, webhook_events_filter: p.events ?? ["start", "output", "logs", "completed"] }),
      urls: {
        get: `${server.url}/v1/predictions/${p.id}`,
        cancel: `${server.url}/v1/predictions/${p.id}/cancel`,
        web: `https://replicate.com/p/${p.id}`
      }
    }
  }
  const finish = (p: Prediction) => {
    const ended = endOf(p)
    p.status = "error" in ended ? "failed" : "aborted" in ended ? "aborted" : "succeeded"
  }

  const create = (request: FakeServer.Recorded, modelName: string | undefined): FakeServer.Reply => {
    let body: unknown
    try {
      body = FakeServer.json(request)
    } catch {
      return { status: 400, body: { title: "Bad request", detail: "The request body is not valid JSON", status: 400 } }
    }
    if (!InputSchema.isObject(body)) return invalidRequest("The request body must be a JSON object")
    const allowed = ["input", "webhook", "webhook_events_filter", "stream", ...(modelName === undefined ? ["version"] : [])]
    const extra = Object.keys(body).filter((name) => !allowed.includes(name))
    if (extra.length > 0) return invalidRequest(extra.map((name) => `- (root): Additional property ${name} is not allowed`).join("\n"))
    let model = modelName
    if (model === undefined) {
      if (typeof body["version"] !== "string") return invalidRequest("- version: Invalid type. Expected: string")
      model = byVersion.get(body["version"])
      if (model === undefined) return { status: 422, body: { title: "Invalid version or not permitted", detail: "The specified version does not exist (or perhaps you don't have permission to use it?)", status: 422 } }
    } else if (known[model] === undefined) {
      return { status: 404, body: { title: "Not found", detail: "The requested resource could not be found.", status: 404 } }
    }
    if (!InputSchema.isObject(body["input"])) return invalidRequest("- input: Invalid type. Expected: object")
    const problems = InputSchema.check(known[model]!.input, body["input"], ["input"])
    if (problems.length > 0) return invalidInput(problems)
    const webhook = body["webhook"]
    if (webhook !== undefined && (typeof webhook !== "string" || !/^https?:\/\/[^/]/.test(webhook))) return invalidRequest("- webhook: Does not match format 'uri'")
    const events = body["webhook_events_filter"]
    if (events !== undefined && (!Array.isArray(events) || events.some((e) => !["start", "output", "logs", "completed"].includes(e)))) {
      return invalidRequest("- webhook_events_filter: must be a list of start, output, logs, completed")
    }
    const prefer = request.headers.prefer
    const wait = typeof prefer === "string" ? /^wait(?:=(\d+))?$/.exec(prefer) : null
    if (typeof prefer === "string" && (wait === null || (wait[1] !== undefined && (Number(wait[1]) < 1 || Number(wait[1]) > 60)))) {
      return { status: 400, body: { title: "Invalid Prefer header", detail: "Prefer must be wait or wait=N, N from 1 to 60", status: 400 } }
    }
    const key = request.headers["idempotency-key"]
    const before = typeof key === "string" ? byKey.get(key) : undefined
    let prediction = before === undefined ? undefined : predictions.get(before)
    if (prediction === undefined) {
      const id = `pred${++next}`
      prediction = {
        id,
        model,
        version: typeof body["version"] === "string" ? body["version"] : null,
        input: body["input"],
        status: "starting",
        gets: 0,
        cancelled: false,
        inline: false,
        webhook: typeof webhook === "string" ? webhook : null,
        events: Array.isArray(events) ? events : null
      }
      predictions.set(id, prediction)
      if (typeof key === "string") byKey.set(key, id)
    }
    if (wait !== null && prediction.status === "starting") {
      finish(prediction)
      prediction.inline = options.dataUris === true
    }
    return { status: 201, body: view(prediction) }
  }

  const server = await FakeServer.start((request, url) => {
    const file = /^\/files\/([^/]+)$/.exec(url.pathname)
    if (file !== null && request.method === "GET") {
      const found = Files.file(file[1]!)
      return found === undefined ? { status: 404, body: { detail: "Not found." } } : { status: 200, body: found.bytes, headers: { "content-type": found.contentType } }
    }
    if (request.headers.authorization !== `Bearer ${options.token}`) {
      return { status: 401, body: { title: "Unauthenticated", detail: "You did not pass a valid authentication token", status: 401 } }
    }
    const onModel = /^\/v1\/models\/([^/]+\/[^/]+)\/predictions$/.exec(url.pathname)
    if (request.method === "POST" && (onModel !== null || url.pathname === "/v1/predictions")) return create(request, onModel?.[1])
    if (request.method === "GET" && url.pathname === "/v1/webhooks/default/secret") return { status: 200, body: { key: secret } }
    const one = /^\/v1\/predictions\/([^/]+)(\/cancel)?$/.exec(url.pathname)
    if (one !== null) {
      const prediction = predictions.get(one[1]!)
      if (prediction === undefined) return { status: 404, body: { title: "Not found", detail: "The requested resource could not be found.", status: 404 } }
      if (one[2] === "/cancel" && request.method === "POST") {
        if (!terminal.includes(prediction.status)) {
          prediction.cancelled = true
          prediction.status = "canceled"
        }
        return { status: 200, body: view(prediction) }
      }
      if (one[2] === undefined && request.method === "GET") {
        prediction.gets++
        if (prediction.status === "starting") prediction.status = "processing"
        else if (prediction.status === "processing" && prediction.gets > (options.processing ?? 1)) finish(prediction)
        return { status: 200, body: view(prediction) }
      }
      return { status: 405, body: { title: "Method not allowed", detail: `Method "${request.method}" not allowed.`, status: 405 } }
    }
    return undefined
  })

  /** Posts a prediction's `event` webhook, signed, when its filter asks for it; answers the status of that post. */
  const post = async (prediction: Prediction, event: string, messageId: string) => {
    if (prediction.webhook === null || !(prediction.events ?? ["start", "output", "logs", "completed"]).includes(event)) return undefined
    const body = JSON.stringify(view(prediction))
    const response = await fetch(prediction.webhook, {
      method: "POST",
      headers: { "content-type": "application/json", ...signWebhook(secret, messageId, body, Math.floor(Date.now() / 1000)) },
      body
    })
    return response.status
  }
  /** Finishes a prediction and posts it to its webhook, signed; answers the status of that post. */
  const complete = async (id: string) => {
    const prediction = predictions.get(id)!
    if (!terminal.includes(prediction.status)) finish(prediction)
    return post(prediction, "completed", `msg_${id}`)
  }
  let logEvents = 0
  /** Posts a running prediction's `logs` event to its webhook, signed; answers the status of that post. */
  const logged = (id: string) => post(predictions.get(id)!, "logs", `msg_${id}_logs_${++logEvents}`)
  return { ...server, predictions, complete, logged, webhookSecret: secret }
}
