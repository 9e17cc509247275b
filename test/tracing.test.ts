/**
 * Traces over OTLP (docs/operations.md, "Traces"): the standalone server runs as a child
 * process with OTEL_EXPORTER_OTLP_ENDPOINT naming a real OTLP/HTTP (JSON) receiver on
 * loopback; a submitted task's request and its engine steps arrive there as spans, and no
 * attribute carries the API key; Effect's metrics arrive at the same receiver. The suite waits on a real process: it polls what the
 * receiver collected until a deadline; nothing in it measures time.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { createServer, type Server as HttpServer } from "node:http"
import { setTimeout as pause } from "node:timers/promises"
import { awaitTerminal, killAll, type Server, startServer, stop, submit } from "./standalone-process.js"

const key = "tracing-test-key-3f9c1a"
const model = "alpha-image-2/text-to-image"

interface Span {
  readonly name: string
  readonly kind: number
  readonly attributes: Readonly<Record<string, string | number | boolean | undefined>>
  readonly service: string | undefined
}

/** An OTLP attribute's value (`{ stringValue }`, `{ intValue }`, ...). */
const valueOf = (value: Record<string, unknown> | undefined) =>
  value === undefined
    ? undefined
    : (value["stringValue"] ?? value["intValue"] ?? value["doubleValue"] ?? value["boolValue"]) as string | number | boolean | undefined

const attributes = (list: ReadonlyArray<{ key: string; value: Record<string, unknown> }> | undefined) =>
  Object.fromEntries((list ?? []).map(({ key, value }) => [key, valueOf(value)]))

const spans: Array<Span> = []
/** Every body the receiver was sent, as text, to look for the key anywhere in it. */
const bodies: Array<string> = []
const paths: Array<string> = []
let receiver: HttpServer
let server: Server | undefined
let port: number

beforeAll(async () => {
  receiver = createServer((request, response) => {
    let body = ""
    request.on("data", (chunk: Buffer) => (body += chunk.toString()))
    request.on("end", () => {
      paths.push(`${request.method} ${request.url} ${request.headers["content-type"]}`)
      bodies.push(body)
      if (request.url === "/v1/traces") {
        const parsed = JSON.parse(body) as { resourceSpans?: Array<any> }
        for (const resource of parsed.resourceSpans ?? []) {
          const service = valueOf(resource.resource?.attributes?.find((a: any) => a.key === "service.name")?.value) as string | undefined
          for (const scope of resource.scopeSpans ?? []) {
            for (const span of scope.spans ?? []) {
              spans.push({ name: span.name, kind: span.kind, attributes: attributes(span.attributes), service })
            }
          }
        }
      }
      response.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
  const { port: receiverPort } = receiver.address() as { port: number }
  server = await startServer({
    MEDIAGATE_API_KEY: key,
    MEDIAGATE_DATABASE_URL: "memory",
    MEDIAGATE_SIMULATOR_PROFILE: "instant",
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${receiverPort}`,
    OTEL_BSP_SCHEDULE_DELAY: "100",
    OTEL_METRIC_EXPORT_INTERVAL: "200"
  })
  port = server.port
}, 60_000)

afterAll(async () => {
  if (server !== undefined) await stop(server, "SIGTERM")
  killAll()
  await new Promise((resolve) => receiver.close(resolve))
})

/** Polls the collected spans until `found` answers something or the deadline passes. */
const eventually = async <A>(found: () => A | undefined, limitMs = 20_000): Promise<A | undefined> => {
  const until = Date.now() + limitMs
  for (;;) {
    const value = found()
    if (value !== undefined || Date.now() > until) return value
    await pause(100)
  }
}

describe("traces over OTLP/HTTP", () => {
  it("a span for the submit request and for each engine step, named by task and model; no key in any attribute", async () => {
    const taskId = await submit(port, key, model, "a lighthouse at dawn")
    const tasks = await awaitTerminal(port, key, [taskId], 20_000)
    expect(tasks.get(taskId)?.status).toBe("SUCCESS")

    const request = await eventually(() =>
      spans.find((span) => span.attributes["http.request.method"] === "POST" && span.attributes["url.path"] === "/api/v1/task/submit")
    )
    expect(request, `spans: ${JSON.stringify(spans.map((span) => span.name))}; requests: ${paths.join(", ")}`).toBeDefined()
    expect(request!.kind).toBe(2) // SPAN_KIND_SERVER
    expect(Number(request!.attributes["http.response.status_code"])).toBe(200)
    expect(request!.attributes["http.route"]).toBe("/api/v1/task/submit")
    expect(request!.service).toBe("mediagate")
    // The Authorization header is recorded redacted, never as sent.
    expect(request!.attributes["http.request.header.authorization"]).not.toContain(key)

    // The query's own route (`QueryRoute`) names its route as HttpApi's router does: a
    // plain query (its own route) and one with `?wait=1` (HttpApi's) say the same.
    const waited = await fetch(`http://127.0.0.1:${port}/api/v1/task/${taskId}?wait=1`, { headers: { authorization: `Bearer ${key}` } })
    expect(waited.status).toBe(200)
    const queries = await eventually(() => {
      const found = spans.filter((span) => span.attributes["http.request.method"] === "GET" && span.attributes["url.path"] === `/api/v1/task/${taskId}`)
      return found.some((span) => span.attributes["url.query"] === "wait=1") && found.some((span) => span.attributes["url.query"] === undefined)
        ? found
        : undefined
    })
    expect(queries, `requests: ${paths.join(", ")}`).toBeDefined()
    for (const query of queries!) expect(query.attributes["http.route"]).toBe("/api/v1/task/:taskId")

    const step = await eventually(() =>
      spans.find((span) => span.name === "Engine.step" && span.attributes["mediagate.task_id"] === taskId)
    )
    expect(step, `spans: ${JSON.stringify(spans.map((span) => span.name))}`).toBeDefined()
    expect(step!.attributes["mediagate.model"]).toBe(model)

    for (const span of spans) {
      for (const value of Object.values(span.attributes)) expect(String(value)).not.toContain(key)
    }
    for (const body of bodies) expect(body).not.toContain(key)
  }, 60_000)

  it("Effect's metrics go to /v1/metrics with the same endpoint", async () => {
    const exported = await eventually(() =>
      bodies.find((body) => body.includes("\"mediagate_tasks_submitted_total\"") && body.includes("resourceMetrics"))
    )
    expect(exported, `requests: ${paths.join(", ")}`).toBeDefined()
    expect(paths.some((path) => path.startsWith("POST /v1/metrics application/json"))).toBe(true)
  }, 30_000)
})
