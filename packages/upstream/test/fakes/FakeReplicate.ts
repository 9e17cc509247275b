/**
 * Replicate's predictions API as its docs describe it: `POST /v1/models/{owner}/{name}/predictions`
 * (or `POST /v1/predictions` with a version) answers a prediction `starting`; each
 * `GET /v1/predictions/{id}` moves it one step (processing, then its end); `Prefer: wait`
 * answers it finished at once; `POST /v1/predictions/{id}/cancel`. `Authorization: Bearer
 * <token>` is required. A repeated `Idempotency-Key` gets the prediction it made before.
 */
import * as FakeServer from "./FakeServer.js"

export interface Prediction {
  readonly id: string
  readonly model: string
  readonly version: string | null
  readonly input: Record<string, unknown>
  status: string
  gets: number
  cancelled: boolean
}

export interface Options {
  readonly token: string
  /** How a prediction ends, by its input: its output, or a failure's error. */
  readonly end?: (prediction: Prediction) => { output: unknown } | { error: string }
}

export const start = async (options: Options) => {
  const predictions = new Map<string, Prediction>()
  const byKey = new Map<string, string>()
  let next = 0
  const view = (p: Prediction) => {
    const ended = p.status === "succeeded" || p.status === "failed" ? (options.end?.(p) ?? { output: ["https://replicate.delivery/out-0.webp"] }) : {}
    return {
      id: p.id,
      model: p.model,
      version: p.version,
      input: p.input,
      status: p.status,
      output: "output" in ended ? ended.output : null,
      error: "error" in ended ? ended.error : null,
      urls: { get: `${server.url}/v1/predictions/${p.id}`, cancel: `${server.url}/v1/predictions/${p.id}/cancel` }
    }
  }
  const finish = (p: Prediction) => {
    const ended = options.end?.(p) ?? { output: ["https://replicate.delivery/out-0.webp"] }
    p.status = "error" in ended ? "failed" : "succeeded"
  }
  const server = await FakeServer.start((request, url) => {
    if (request.headers.authorization !== `Bearer ${options.token}`) return { status: 401, body: { title: "Unauthenticated", detail: "You did not pass a valid authentication token", status: 401 } }
    const create = /^\/v1\/models\/([^/]+\/[^/]+)\/predictions$/.exec(url.pathname)
    if (request.method === "POST" && (create !== null || url.pathname === "/v1/predictions")) {
      const body = FakeServer.json(request)
      const key = request.headers["idempotency-key"]
      const known = typeof key === "string" ? byKey.get(key) : undefined
      let prediction = known === undefined ? undefined : predictions.get(known)
      if (prediction === undefined) {
        const id = `pred${++next}`
        prediction = { id, model: create?.[1] ?? "versioned", version: body.version ?? null, input: body.input, status: "starting", gets: 0, cancelled: false }
        predictions.set(id, prediction)
        if (typeof key === "string") byKey.set(key, id)
      }
      if (typeof request.headers.prefer === "string" && /^wait/.test(request.headers.prefer)) finish(prediction)
      return { status: 201, body: view(prediction) }
    }
    const one = /^\/v1\/predictions\/([^/]+)(\/cancel)?$/.exec(url.pathname)
    if (one !== null) {
      const prediction = predictions.get(one[1]!)
      if (prediction === undefined) return { status: 404, body: { detail: "Not found." } }
      if (one[2] === "/cancel" && request.method === "POST") {
        prediction.cancelled = true
        prediction.status = "canceled"
        return { status: 200, body: view(prediction) }
      }
      if (request.method === "GET") {
        if (prediction.status === "starting") prediction.status = "processing"
        else if (prediction.status === "processing") finish(prediction)
        return { status: 200, body: view(prediction) }
      }
    }
    return undefined
  })
  return { ...server, predictions }
}
