/**
 * An existing node:http application with routes of its own that mounts the mediagate API.
 * mediagate's paths (under /api/v1/, /media/, /webhooks/, and /docs, /openapi.json,
 * /healthz, /readyz) go to mediagate; everything else stays the host's.
 */
import { MediagateHttp, RequestTimeouts } from "@mediagate/http"
import { Backends, Deployment } from "@mediagate/server"
import { Layer, Redacted } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** Options of the host application. */
export interface HostOptions {
  readonly port: number
  readonly host: string
  readonly apiKey: string
  readonly simulatorProfile?: "instant" | "demo" | "realistic"
  /** The `whsec_` secret that signs the account's callbacks; unsigned without one. */
  readonly webhookSecret?: string
  /** Accept callback and media URLs on private addresses (development and tests only). */
  readonly allowPrivateUrls?: boolean
  /** The account's starting credits in micro-USD (default 10,000,000: $10). */
  readonly credits?: number
  /** How long a client may take to send a request's headers and its body (default 10 s each). */
  readonly timeouts?: RequestTimeouts.Settings
}

/** Starts the host application; resolves once it listens. */
export const start = async (options: HostOptions) => {
  // A client that sends its request slowly is answered 408 past these deadlines: Node's for
  // the headers, set here before the server listens, and mediagate's for the body.
  const timeouts = options.timeouts ?? RequestTimeouts.defaults
  const server = RequestTimeouts.applyTo(Http.createServer(), timeouts)
  await new Promise<void>((resolve) => server.listen(options.port, options.host, resolve))
  const { port } = server.address() as AddressInfo
  const publicUrl = `http://${options.host}:${port}`
  // Where mediagate keeps tasks, accounts, credits and files: in memory. The host's account
  // starts with $10 (micro-USD); a task's price is held when it is accepted and charged only
  // when it succeeds.
  const backends = Backends.memoryBackends({ publicUrl }, [{
    id: "acct_host",
    name: "host",
    apiKey: Redacted.make(options.apiKey),
    ...(options.webhookSecret === undefined ? {} : { webhookSecret: Redacted.make(options.webhookSecret) }),
    credits: options.credits ?? 10_000_000
  }])
  // The standard services over them: the simulator, the built-in moderation rules, callbacks,
  // the engine and the deliverer.
  const services = Deployment.services({
    simulatorProfile: options.simulatorProfile ?? "demo",
    allowPrivateUrls: options.allowPrivateUrls ?? false,
    backends
  }).pipe(Layer.merge(RequestTimeouts.layer(timeouts)))
  // Given the host's server, requests Node itself refuses (431, a malformed request line)
  // are answered in mediagate's envelope too.
  const api = await MediagateHttp.makeNodeHandler(services, { server })

  server.on("request", (request, response) => {
    // mediagate's paths (the API, result files, webhooks, docs, health: `api.owns`) go to it.
    if (api.owns(request.url ?? "/")) return api.handler(request, response)
    const path = (request.url ?? "/").split("?")[0]!
    // The host's own routes.
    if (request.method === "GET" && path === "/health") {
      response.writeHead(200, { "content-type": "application/json" })
      return response.end(JSON.stringify({ status: "ok", app: "host" }))
    }
    response.writeHead(404, { "content-type": "text/plain" })
    response.end("host: no such page\n")
  })

  return {
    url: publicUrl,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      // Stops the engine, the deliverer and the settlement sweep, and takes the envelope for
      // Node's own errors off the server.
      await api.dispose()
    }
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const app = await start({
    port: Number(process.env["PORT"] ?? 3000),
    host: "127.0.0.1",
    apiKey: process.env["MEDIAGATE_API_KEY"] ?? "host-demo-key"
  })
  console.log(`host app on ${app.url}: GET /health is the host's, /api/v1/* is mediagate's`)
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => void app.close().then(() => process.exit(0)))
  }
}
