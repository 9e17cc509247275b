/**
 * `npm run bench:callbacks`: how long a finished task's callback takes to arrive, end to
 * end, as a user of the standalone composition sees it: the memory store, the instant
 * simulator, a loopback callback receiver, tasks submitted over HTTP one at a time. For each
 * task: submit answered -> callback received (wall clock, this process). Prints p50, p90
 * and p99 in milliseconds and writes them into docs/benchmarks.md.
 */
import { Backends } from "@mediagate/server"
import { bindNow, layer as standalone } from "@mediagate/example-standalone-server/Server"
import type { LayerConfig } from "@mediagate/example-standalone-server/Server"
import { Duration, Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { writeSection } from "../scripts/benchmarks-doc.js"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { performance } from "node:perf_hooks"

const tasks = Number(process.env["BENCH_TASKS"] ?? 100)
const key = "bench-callback-key"

const listen = (server: Http.Server) =>
  new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)))

const main = async () => {
  // The receiver notes when each task's callback arrived.
  const arrived = new Map<string, number>()
  const waiting = new Map<string, () => void>()
  const receiver = Http.createServer((request, response) => {
    let body = ""
    request.on("data", (chunk) => (body += chunk))
    request.on("end", () => {
      const taskId = JSON.parse(body).data.taskId as string
      arrived.set(taskId, performance.now())
      response.writeHead(204).end()
      waiting.get(taskId)?.()
    })
  })
  const receiverPort = await listen(receiver)

  // Bound first, on a port the system chooses: the services are built with URLs that name it.
  const scope = Effect.runSync(Scope.make())
  const { listening, port } = await Effect.runPromise(Scope.extend(bindNow({ port: 0, host: "127.0.0.1" }), scope))
  const config: LayerConfig = {
    port,
    host: "127.0.0.1",
    publicUrl: `http://127.0.0.1:${port}`,
    apiKey: Option.some(key),
    allowPrivateUrls: true,
    upstream: "simulator",
    simulatorProfile: "instant",
    databaseUrl: "memory",
    mediaDir: "./data/media",
    lease: Duration.seconds(15),
    shutdownGrace: Duration.seconds(10)
  }
  const backends = Backends.memoryBackends(config, [{ id: "acct_bench", name: "bench", apiKey: Redacted.make(key), credits: 1_000_000_000_000 }])
  const stop = Effect.runFork(Layer.launch(standalone(config, backends, listening)))
  // Wait until the server answers.
  for (;;) {
    const ok = await fetch(`${config.publicUrl}/api/v1/models`, { headers: { authorization: `Bearer ${key}` } }).then(() => true, () => false)
    if (ok) break
    await new Promise((resolve) => setImmediate(resolve))
  }

  const latencies: Array<number> = []
  for (let i = 0; i < tasks; i++) {
    const response = await fetch(`${config.publicUrl}/api/v1/task/submit`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "alpha-image-2/text-to-image",
        input: { prompt: `bench ${i}`, ratio: "1:1" },
        callBackUrl: `http://127.0.0.1:${receiverPort}/cb`
      })
    })
    const submitted = performance.now()
    const taskId = ((await response.json()) as { data: { taskId: string } }).data.taskId
    if (!arrived.has(taskId)) await new Promise<void>((resolve) => waiting.set(taskId, resolve))
    latencies.push(arrived.get(taskId)! - submitted)
  }
  await Effect.runPromise(stop.interruptAsFork(stop.id()))
  await Effect.runPromise(Scope.close(scope, Exit.void))
  receiver.close()

  latencies.sort((a, b) => a - b)
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(1)
  const table = [
    "| tasks | p50 (ms) | p90 (ms) | p99 (ms) |",
    "|---|---|---|---|",
    `| ${tasks} | ${at(0.5)} | ${at(0.9)} | ${at(0.99)} |`
  ].join("\n")
  console.log(table)

  const section = [
    "<!-- bench:callbacks:start -->",
    "## Submit to callback",
    "",
    "Command: `npm run bench:callbacks` (`BENCH_TASKS`, default 100). The standalone composition",
    "in-process on the memory store with the instant simulator; alpha-image-2 tasks submitted over",
    "HTTP one at a time, each with a `callBackUrl` on a loopback receiver; each figure is the time",
    "from the submit answer to the callback's arrival at the receiver.",
    "",
    table,
    "<!-- bench:callbacks:end -->"
  ].join("\n")
  writeSection(section)
  process.exit(0)
}

void main()
