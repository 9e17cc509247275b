/**
 * `npm run bench:http-inprocess`: the CPU a request costs in the HTTP pipeline, in process,
 * without sockets or a client in another process: the API's HttpApp (`MediagateHttp.httpApp`,
 * the standalone server's, the tracer off as the standalone has it without trace export)
 * served as a web handler (`Request` in, `Response` out) over the memory backends and the
 * instant simulator, `BENCH_CONCURRENCY` (default 50) requests at a time.
 *
 * Per kind of request (`BENCH_KINDS`, default all, comma-separated): `query` (a task of the
 * caller in SUCCESS), `healthz`, `unknown` (an authenticated GET of a path under /api/v1/
 * no route takes), `submit` (the same body each time; the engine takes each task to
 * SUCCESS in the same process, so its CPU counts too) and `models`. Each kind runs
 * `BENCH_ROUNDS` (default 5) rounds of `BENCH_REQUESTS` (default 20,000) requests; printed:
 * the best round's CPU per request (`process.cpuUsage`, user + system, µs) and its
 * requests a second. `BENCH_TRACER=1` leaves the platform's per-request span and the use
 * cases' spans on (as an embedding host's handler has them without a tracer of its own). `--cpu-prof` on node (`node --cpu-prof --import tsx ...`)
 * gives the profile of the whole run.
 *
 * `BENCH_COUNT=1`: instead of the CPU rounds, per request of each kind (200, one at a time,
 * after 50 to warm up), the Effect fibers forked and the runtime's steps in the request's
 * fiber and those it forks (`scripts/effect-counts.ts`); the engine's work for a submit runs
 * in the engine's own fibers and is not counted.
 */
import { HttpApiBuilder, HttpApp, HttpMiddleware, HttpServerRequest } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { MediagateHttp } from "@mediagate/http"
import { Backends, Deployment } from "@mediagate/server"
import { Effect, FiberRef, Layer, ManagedRuntime, Option, Redacted, Runtime } from "effect"
import { performance } from "node:perf_hooks"
import * as EffectCounts from "../scripts/effect-counts.js"

const env = (name: string, fallback: string) => process.env[name] ?? fallback
const concurrency = Number(env("BENCH_CONCURRENCY", "50"))
const rounds = Number(env("BENCH_ROUNDS", "5"))
const requests = Number(env("BENCH_REQUESTS", "20000"))
const kinds = env("BENCH_KINDS", "query,healthz,unknown,models,submit").split(",").map((kind) => kind.trim()).filter((kind) => kind !== "")
const tracer = env("BENCH_TRACER", "0") === "1"
const counting = env("BENCH_COUNT", "0") === "1"
const base = "http://127.0.0.1:3000"
const key = "bench-inprocess-key-0123456789abcdef"
const submitBody = JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse", ratio: "1:1" } })

const backends = Backends.memoryBackends({ publicUrl: base }, [
  { id: "acct_bench", name: "bench", apiKey: Redacted.make(key), credits: 1e15 }
])
const requirements = Deployment.services({ simulatorProfile: "instant", allowPrivateUrls: true, backends }).pipe(
  Layer.merge(Deployment.edgeLimits({ rateLimit: Option.none() }))
)
const runtime = ManagedRuntime.make(
  Layer.mergeAll(MediagateHttp.layer, HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer, NodeHttpServer.layerContext).pipe(
    Layer.provideMerge(requirements)
  )
)
const app = await runtime.runPromise(MediagateHttp.httpApp)
const built = await runtime.runtime()
const counter = await runtime.runPromise(EffectCounts.make)
const handle = HttpApp.toWebHandlerRuntime(
  // As the standalone server without trace export: no request span, the use cases' spans off (Telemetry.ts).
  tracer ? built : Runtime.setFiberRef(Runtime.setFiberRef(built, HttpMiddleware.currentTracerDisabledWhen, () => true), FiberRef.currentTracerEnabled, false)
)(
  // The client's address, as node:http gives it to the standalone server: the limit on failed authentications applies.
  (counting ? counter.counted(app) : app).pipe(
    Effect.updateService(HttpServerRequest.HttpServerRequest, (request) => request.modify({ remoteAddress: "127.0.0.1" }))
  ) as HttpApp.Default<never, never>
)

const authorization = `Bearer ${key}`
const get = (path: string) => () => handle(new Request(`${base}${path}`, { headers: { authorization } }))
const post = (path: string, body: string) => () =>
  handle(new Request(`${base}${path}`, { method: "POST", headers: { authorization, "content-type": "application/json" }, body }))

const submitted = await (await post("/api/v1/task/submit", submitBody)()).json() as { data: { taskId: string } }
const taskId = submitted.data.taskId
// The instant simulator ends the task within a few turns of the event loop.
for (let tries = 0;; tries++) {
  const task = await (await get(`/api/v1/task/${taskId}`)()).json() as { data: { status: string } }
  if (task.data.status === "SUCCESS") break
  if (tries > 1_000) throw new Error(`task ${taskId} did not reach SUCCESS: ${task.data.status}`)
  await new Promise((resolve) => setImmediate(resolve))
}

const makers: Record<string, () => Promise<Response>> = {
  query: get(`/api/v1/task/${taskId}`),
  healthz: get("/healthz"),
  unknown: get("/api/v1/nothing-here"),
  models: get("/api/v1/models"),
  submit: post("/api/v1/task/submit", submitBody)
}
const expected: Record<string, number> = { query: 200, healthz: 200, unknown: 404, models: 200, submit: 200 }

/** One round: `requests` requests, `concurrency` at a time; CPU and wall time. */
const round = async (make: () => Promise<Response>, status: number) => {
  let next = 0
  let wrong = 0
  const worker = async () => {
    while (next < requests) {
      next++
      const response = await make()
      await response.arrayBuffer()
      if (response.status !== status) wrong++
    }
  }
  const cpu = process.cpuUsage()
  const started = performance.now()
  await Promise.all(Array.from({ length: concurrency }, worker))
  const elapsed = performance.now() - started
  const used = process.cpuUsage(cpu)
  return { cpuMicros: (used.user + used.system) / requests, perSecond: requests / (elapsed / 1000), wrong }
}

/** The counts per request of `make`'s kind, one request at a time. */
const count = async (make: () => Promise<Response>) => {
  for (let i = 0; i < 50; i++) await (await make()).arrayBuffer()
  counter.start()
  for (let i = 0; i < 200; i++) await (await make()).arrayBuffer()
  const counts = counter.stop()
  return `${(counts.fibers / 200).toFixed(1)} fibers, ${(counts.steps / 200).toFixed(0)} steps per request`
}

if (counting) {
  console.log(`in process, one at a time, tracer ${tracer ? "on" : "off"}`)
  for (const kind of kinds) console.log(`${kind.padEnd(8)} ${await count(makers[kind]!)}`)
  await runtime.dispose()
  process.exit(0)
}

console.log(`in process, ${concurrency} at a time, ${rounds} rounds of ${requests}, tracer ${tracer ? "on" : "off"}`)
for (const kind of kinds) {
  const make = makers[kind]
  if (make === undefined) throw new Error(`unknown kind ${kind}; one of ${Object.keys(makers).join(", ")}`)
  const results = []
  for (let i = 0; i < rounds; i++) results.push(await round(make, expected[kind]!))
  const best = results.reduce((a, b) => (b.cpuMicros < a.cpuMicros ? b : a))
  const wrong = results.reduce((sum, r) => sum + r.wrong, 0)
  console.log(
    `${kind.padEnd(8)} ${best.cpuMicros.toFixed(1).padStart(7)} µs CPU/request (rounds: ${results.map((r) => r.cpuMicros.toFixed(0)).join(" ")})  ${
      best.perSecond.toFixed(0)
    } req/s${wrong > 0 ? `  ${wrong} unexpected statuses` : ""}`
  )
}
await runtime.dispose()
