/**
 * A finished paid job is never run again (docs/decisions.md, "Result files"). The standalone
 * composition with its media rules routes alpha-image-2 to a relay gateway faked on loopback
 * (the relay protocol: submit, then query), whose job succeeds at once and whose result file
 * fails to download 1 time, 3 times, or every time. In each case exactly one submit reaches
 * the gateway: the engine copies the result again, never the job. 1 and 3 end SUCCESS with
 * our hosted URL serving the gateway's bytes; every time ends FAILURE at or before the
 * model's deadline (10 minutes), naming the reason and the gateway's job id. The engine's
 * time is the TestClock, moved on (a second, or to the task's next due time) once the
 * loopback exchanges in flight have finished.
 */
import { HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Ids, Metrics, Task, TaskStore } from "@mediagate/core"
import { MediagateHttp } from "@mediagate/http"
import { Relay, RoutesFile } from "@mediagate/upstream"
import { Backends, Deployment } from "@mediagate/server"
import { Clock, Duration, Effect, Layer, Metric, Option, Redacted, TestClock } from "effect"
import { readFileSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import { apiKey, testCredits } from "./support.js"

const png = readFileSync(join(import.meta.dirname, "../packages/media/test/fixtures/image-64x48.png"))

/** The model's deadline (alpha-image-2: 10 minutes). */
const deadline = 10 * 60_000

/** The gateway's state: submits and result downloads by job (the job id is the prompt), and each file's failures before it is served. */
interface Gateway {
  readonly base: string
  readonly submits: Map<string, number>
  readonly downloads: Map<string, number>
}

const failuresBeforeFile: ReadonlyMap<string, number> = new Map([["once.png", 1], ["thrice.png", 3], ["never.png", Number.POSITIVE_INFINITY]])

/** The relay gateway on loopback: a job succeeds as soon as it is submitted; its result is `/<job id>`. */
const gateway = Effect.acquireRelease(
  Effect.async<Gateway & { readonly server: Http.Server }>((resume) => {
    const submits = new Map<string, number>()
    const downloads = new Map<string, number>()
    const server = Http.createServer((request, response) => {
      const url = request.url ?? "/"
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const json = (body: unknown) => response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body))
      if (request.method === "POST" && url === "/api/v1/task/submit") {
        let body = ""
        request.on("data", (chunk) => (body += chunk))
        request.on("end", () => {
          const job = JSON.parse(body).input.prompt as string
          submits.set(job, (submits.get(job) ?? 0) + 1)
          json({ code: 0, msg: "success", data: { taskId: job } })
        })
        return
      }
      const query = /^\/api\/v1\/task\/([^/]+)$/.exec(url)
      if (query !== null) {
        const job = decodeURIComponent(query[1]!)
        return json({ code: 0, msg: "success", data: { taskId: job, status: "SUCCESS", result: { type: "image", urls: [`${base}/${job}`] } } })
      }
      const file = url.slice(1)
      const count = (downloads.get(file) ?? 0) + 1
      downloads.set(file, count)
      if (count <= (failuresBeforeFile.get(file) ?? 0)) return response.writeHead(500).end()
      response.writeHead(200, { "content-type": "image/png", "content-length": png.length }).end(png)
    })
    server.listen(0, "127.0.0.1", () =>
      resume(Effect.succeed({ base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, submits, downloads, server })))
  }),
  ({ server }) => Effect.promise(() => new Promise<void>((done) => server.close(() => done())))
)

/** The standalone composition with the media rules, alpha-image-2 routed to the gateway at `base`. */
const front = (base: string) =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      const publicUrl = `http://127.0.0.1:${server.address._tag === "TcpAddress" ? server.address.port : 0}`
      const routes = RoutesFile.expandRoutes([{ model: "alpha-image-2", targets: [{ provider: "relay", model: "alpha-image-2", input: Relay.defaultInput }] }], RoutesFile.routableModels())
      return MediagateHttp.serve.pipe(Layer.provideMerge(Deployment.services(
        {
          simulatorProfile: "instant",
          allowPrivateUrls: true,
          routing: {
            routes,
            unrouted: "fail",
            providers: {
              fal: Option.none(),
              replicate: Option.none(),
              openai: Option.none(),
              relay: Option.some({ baseUrl: base, key: "gateway-key", webhookSecret: Option.none() })
            }
          },
          mediaRules: { mediaBaseUrl: `${publicUrl}/media` },
          backends: Backends.memoryBackends({ publicUrl }, [{ id: "acct_test", name: "test", apiKey: Redacted.make(apiKey), credits: testCredits }]),
          // The engine wakes for its due times and the deliverer for its callbacks (there are
          // none); their periodic scans (the safety net) would only add TestClock sleepers.
          engine: { pollInterval: "10 minutes" },
          deliverer: { pollInterval: "10 minutes" }
        }
      )))
    })
  ).pipe(Layer.provideMerge(NodeHttpServer.layerTest))

/** Lets the loopback exchanges in flight move on (event-loop turns; no time passes). */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 30; i++) yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
})

/** Submits a job named `job` and moves the TestClock on until its task ends. */
const runToEnd = (job: string) =>
  Effect.gen(function*() {
    const store = yield* TaskStore.TaskStore
    const client = yield* HttpClient.HttpClient
    const submitted = yield* client.execute(HttpClientRequest.post("/api/v1/task/submit").pipe(
      HttpClientRequest.bodyUnsafeJson({ model: "alpha-image-2/text-to-image", input: { prompt: job } }),
      HttpClientRequest.bearerToken(apiKey)
    ))
    const id = Ids.TaskId.make(((yield* submitted.json) as { data: { taskId: string } }).data.taskId)
    for (let step = 0; step <= deadline / 1_000 + 60; step++) {
      yield* settle
      const task = Option.getOrThrow(yield* store.get(id))
      if (Task.isTerminal(task.status)) return task
      // A second at a time; straight to the task's due time when nothing of it is in flight.
      const now = yield* Clock.currentTimeMillis
      const idle = task.leaseOwner === null && task.dueAt !== null && task.dueAt > now + 1_000
      yield* TestClock.adjust(Duration.millis(idle ? task.dueAt! - now : 1_000))
    }
    return yield* Effect.dieMessage(`task of job ${job} did not end`)
  })

const resubmits = Effect.all({
  refused: Metric.value(Metrics.upstreamResubmitsOf("refused")),
  retried: Metric.value(Metrics.upstreamResubmitsOf("retried"))
})

describe("a finished job whose result does not download", () => {
  for (const [job, failures] of [["once.png", 1], ["thrice.png", 3]] as const) {
    it.scoped(`fails ${failures} time(s): one submit, the copy tried again, SUCCESS with our URL serving the same bytes`, () =>
      Effect.gen(function*() {
        const { base, downloads, submits } = yield* gateway
        yield* Effect.gen(function*() {
          const before = yield* resubmits
          const task = yield* runToEnd(job)
          expect(task.status).toBe("SUCCESS")
          expect(submits.get(job)).toBe(1)
          expect(downloads.get(job)).toBe(failures + 1)
          expect(yield* resubmits).toEqual(before)
          const [url] = task.result!.urls
          expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/media\/[0-9a-f]{32}\.png$/)
          expect(url!.startsWith(base)).toBe(false)
          const served = yield* Effect.flatMap(HttpClient.HttpClient, (client) => client.get(new URL(url!).pathname))
          expect(served.status).toBe(200)
          expect(Buffer.from(yield* served.arrayBuffer).equals(png)).toBe(true)
          // One attempt, run once, its copy failures counted on it.
          expect(task.attempts).toHaveLength(1)
          expect(task.attempts[0]).toMatchObject({ number: 1, upstreamId: job, outcome: "succeeded", copyFailures: failures })
        }).pipe(Effect.provide(front(base)))
      }), 60_000)
  }

  it.scoped("fails every time: one submit, FAILURE at or before the deadline naming the reason and the upstream job id", () =>
    Effect.gen(function*() {
      const { base, downloads, submits } = yield* gateway
      yield* Effect.gen(function*() {
        const before = yield* resubmits
        const task = yield* runToEnd("never.png")
        expect(task.status).toBe("FAILURE")
        expect(task.failureReason).toBeNull()
        expect(task.result).toBeNull()
        expect(task.errorMessage).toMatch(
          new RegExp(`^the result of upstream job never\\.png could not be copied before the deadline \\(\\d+ tries\\); the last failure: copying the result failed: ${base.replace(/\./g, "\\.")}/never\\.png: HTTP 500$`)
        )
        expect(task.updatedAt).toBeLessThanOrEqual(task.deadlineAt)
        expect(submits.get("never.png")).toBe(1)
        // Backed off: a handful of tries in 10 minutes, not one a second.
        const tries = downloads.get("never.png")!
        expect(tries).toBeGreaterThan(3)
        expect(tries).toBeLessThan(30)
        expect(task.attempts).toHaveLength(1)
        expect(task.attempts[0]).toMatchObject({ number: 1, upstreamId: "never.png", outcome: "failed", copyFailures: tries })
        expect(yield* resubmits).toEqual(before)
      }).pipe(Effect.provide(front(base)))
    }), 60_000)
})
