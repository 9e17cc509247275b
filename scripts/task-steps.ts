/**
 * The Effect runtime's work for whole tasks in process: `npx tsx --conditions=@mediagate/source
 * scripts/task-steps.ts`. The API's HttpApp as a web handler over the memory backends and the
 * instant simulator (as `bench/http-inprocess.ts` has it, the tracer off), a loopback
 * receiver for the callbacks; 100 submits of the sync model (after 30 to warm up), each
 * taken by the engine to SUCCESS and its callback delivered. Counted over the whole runtime
 * (the requests, the engine, the deliverer, with op supervision on from the layers' start):
 * fibers started and runtime steps, per task (`TASK_STEPS_TOP=<n>`: also the n commonest
 * kinds of step).
 */
import { HttpApiBuilder, HttpApp, HttpMiddleware, HttpServerRequest } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { MediagateHttp } from "@mediagate/http"
import { Backends, Deployment } from "@mediagate/server"
import { Effect, Exit, FiberRef, Layer, Option, Redacted, Runtime, RuntimeFlags, RuntimeFlagsPatch, Scope, Supervisor } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

let counting = false
let fibers = 0
const kinds = new Map<string, number>()

/** Counts fibers and steps while `counting`; a step's kind is its op and its function's first characters. */
class Counting extends Supervisor.AbstractSupervisor<void> {
  override get value() {
    return Effect.void
  }
  override onStart() {
    if (counting) fibers++
  }
  override onEnd() {}
  override onEffect(_fiber: unknown, effect: unknown) {
    if (!counting) return
    const op = effect as { _op: string; effect_instruction_i0?: unknown; effect_instruction_i1?: unknown }
    const f = op.effect_instruction_i1 ?? op.effect_instruction_i0
    const kind = typeof f === "function" ? `${op._op} ${f.toString().replace(/\s+/g, " ").slice(0, 100)}` : op._op
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1)
  }
}

let received = 0
let arrived: () => void = () => {}
const receiver = Http.createServer((request, response) => {
  request.resume()
  request.on("end", () => {
    response.end("ok")
    received++
    arrived()
  })
})
await new Promise<void>((listening) => receiver.listen(0, "127.0.0.1", listening))
const base = "http://127.0.0.1:3000"
const key = "task-steps-key-0123456789abcdef0123"
const body = JSON.stringify({
  model: "alpha-image-2/text-to-image",
  input: { prompt: "a lighthouse", ratio: "1:1" },
  callBackUrl: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/callback`
})
const backends = Backends.memoryBackends({ publicUrl: base }, [{ id: "acct_steps", name: "steps", apiKey: Redacted.make(key), credits: 1e15 }])
const layer = Layer.mergeAll(MediagateHttp.layer, HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer, NodeHttpServer.layerContext).pipe(
  Layer.provideMerge(Deployment.services({ simulatorProfile: "instant", allowPrivateUrls: true, backends })),
  Layer.provideMerge(Deployment.edgeLimits({ rateLimit: Option.none() }))
)
const scope = Effect.runSync(Scope.make())
// Every fiber the layers fork (the engine's, the deliverer's) inherits the supervisor and the flag.
const built = await Effect.runPromise(
  Layer.toRuntime(layer).pipe(
    Scope.extend(scope),
    Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision)),
    Effect.supervised(new Counting())
  )
)
const runtime = Runtime.setFiberRef(Runtime.setFiberRef(built, HttpMiddleware.currentTracerDisabledWhen, () => true), FiberRef.currentTracerEnabled, false)
const app = await Runtime.runPromise(runtime)(MediagateHttp.httpApp)
const handle = HttpApp.toWebHandlerRuntime(runtime)(
  app.pipe(Effect.updateService(HttpServerRequest.HttpServerRequest, (request) => request.modify({ remoteAddress: "127.0.0.1" })))
)
const submit = async () => {
  const answer = await handle(new Request(`${base}/api/v1/task/submit`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body }))
  if (answer.status !== 200) throw new Error(`submit answered ${answer.status}: ${await answer.text()}`)
}
/** `n` submits one after the other, then every callback awaited. */
const tasks = async (n: number) => {
  const target = received + n
  for (let i = 0; i < n; i++) await submit()
  while (received < target) await new Promise<void>((resolve) => (arrived = resolve))
}

await tasks(30)
const n = 100
counting = true
await tasks(n)
counting = false
const steps = [...kinds.values()].reduce((sum, count) => sum + count, 0)
console.log(`per task (sync model, callback, memory): ${(fibers / n).toFixed(1)} fibers, ${(steps / n).toFixed(0)} steps`)
const top = Number(process.env["TASK_STEPS_TOP"] ?? "0")
for (const [kind, count] of [...kinds].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${(count / n).toFixed(1).padStart(7)}  ${kind}`)
await Effect.runPromise(Scope.close(scope, Exit.void))
receiver.close()
