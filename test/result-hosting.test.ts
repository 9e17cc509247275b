/**
 * Result hosting when the upstream's file will not come (spec section 2: alpha-image-2 and
 * beta-imagine results are hosted by the service). The standalone composition with its
 * media rules, on a loopback server, routes both models to a relay gateway faked on
 * loopback (the relay protocol: submit, then query), whose results point at a file server
 * that fails as each test asks. The job runs once: a copy that fails once is tried again
 * (the copy, never the job) and the task succeeds with our URL; a copy that keeps failing
 * ends the task FAILURE at its deadline with the reason and the upstream's job id, never
 * SUCCESS with the upstream's URL; a file we do not serve fails it at once. The engine's
 * retry delays are shortened to milliseconds and the deadline to a second, so the test runs
 * on the real clock and waits for the task, it does not sleep. (test/result-copy.test.ts
 * counts the same on the TestClock.) A Replicate output given as a `data:` URI under
 * `Prefer: wait` (dream-4 routed to the Replicate fake) is typed by its bytes: a PNG declared
 * `application/octet-stream`, `text/plain` or nothing is hosted as image/png; bytes we do not
 * serve fail the task saying so.
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { MediagateHttp } from "@mediagate/http"
import { Relay, RoutesFile } from "@mediagate/upstream"
import { Backends, Deployment } from "@mediagate/server"
import { Duration, Effect, Layer, LogLevel, Logger, Option, Redacted } from "effect"
import { readFileSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import * as FakeReplicate from "../packages/upstream/test/fakes/FakeReplicate.js"
import { apiKey, client, testCredits } from "./support.js"

const png = readFileSync(join(import.meta.dirname, "../packages/media/test/fixtures/image-64x48.png"))

/** How often each result file has been asked for, and how many times each answers 500 before the file. */
const asked = new Map<string, number>()
/** Jobs submitted to the gateway, by name (the prompt). */
const submits = new Map<string, number>()
const failuresBeforeFile = new Map<string, number>([["/flaky.png", 1], ["/broken.png", Number.POSITIVE_INFINITY]])

/** The file server the gateway's results point at, and the gateway itself (one task per result path). */
const loopback = Effect.acquireRelease(
  Effect.async<{ readonly base: string; readonly server: Http.Server }>((resume) => {
    const server = Http.createServer((request, response) => {
      const url = request.url ?? "/"
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const json = (body: unknown) => response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body))
      if (request.method === "POST" && url === "/api/v1/task/submit") {
        let body = ""
        request.on("data", (chunk) => (body += chunk))
        request.on("end", () => {
          const name = JSON.parse(body).input.prompt as string
          submits.set(name, (submits.get(name) ?? 0) + 1)
          json({ code: 0, msg: "success", data: { taskId: name } })
        })
        return
      }
      const query = /^\/api\/v1\/task\/([^/]+)$/.exec(url)
      if (query !== null) {
        return json({ code: 0, msg: "success", data: { taskId: query[1], status: "SUCCESS", result: { type: "image", urls: [`${base}/${decodeURIComponent(query[1]!)}`] } } })
      }
      const count = (asked.get(url) ?? 0) + 1
      asked.set(url, count)
      if (count <= (failuresBeforeFile.get(url) ?? 0)) return response.writeHead(500).end()
      if (url === "/notes.txt") return response.writeHead(200, { "content-type": "text/plain" }).end("not a picture")
      response.writeHead(200, { "content-type": "image/png", "content-length": png.length }).end(png)
    })
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server })))
  }),
  ({ server }) => Effect.promise(() => new Promise<void>((done) => server.close(() => done())))
)

/**
 * The standalone composition with the media rules, both models routed to the gateway at
 * `gateway`; with `replicate`, dream-4 routed to the Replicate at that address (`Prefer: wait`).
 */
const frontServer = (gateway: string, deadlines: Readonly<Record<string, Duration.DurationInput>> = {}, replicate?: string) =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      const publicUrl = `http://127.0.0.1:${server.address._tag === "TcpAddress" ? server.address.port : 0}`
      const routes = RoutesFile.expandRoutes([
        { model: "alpha-image-2", targets: [{ provider: "relay", model: "alpha-image-2", input: Relay.defaultInput }] },
        { model: "beta-imagine", targets: [{ provider: "relay", model: "beta-imagine", input: Relay.defaultInput }] },
        ...(replicate === undefined ? [] : [{ model: "dream-4", targets: [{ provider: "replicate", model: "o/m", input: (job: { readonly prompt: string }) => ({ prompt: job.prompt }) }] }])
      ], RoutesFile.routableModels())
      return MediagateHttp.serve.pipe(Layer.provide(Deployment.services(
        {
          simulatorProfile: "instant",
          allowPrivateUrls: true,
          routing: {
            routes,
            unrouted: "fail",
            providers: {
              fal: Option.none(),
              replicate: replicate === undefined
                ? Option.none()
                : Option.some({ token: "r8_token", baseUrl: Option.some(replicate), wait: Option.some(60), webhookSecret: Option.none() }),
              openai: Option.none(),
              relay: Option.some({ baseUrl: gateway, key: "gateway-key", webhookSecret: Option.none() })
            }
          },
          mediaRules: { mediaBaseUrl: `${publicUrl}/media` },
          deadlines,
          backends: Backends.memoryBackends({ publicUrl }, [{ id: "acct_test", name: "test", apiKey: Redacted.make(apiKey), credits: testCredits }]),
          // Milliseconds instead of seconds between retries; the number of retries is the default.
          engine: { retry: { baseDelay: 5, maxDelay: 20 } }
        }
      )))
    })
  ).pipe(
    Layer.provideMerge(NodeHttpServer.layerTest),
    // Each failed copy is a warning; a copy failing for a second on the real clock is dozens.
    Layer.provide(Logger.minimumLogLevel(LogLevel.Error))
  )

const api = client()

/** Submits with the result file's name as the prompt (the gateway's task id) and answers the task once it ended. */
const run = (model: string, input: Record<string, unknown>, file: string) =>
  Effect.gen(function*() {
    const taskId = yield* api.submitId({ model, input: { ...input, prompt: file } })
    for (;;) {
      const task = (yield* api.query(taskId)).body.data
      if (["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"].includes(task.status)) return task
      yield* Effect.yieldNow()
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
  })

describe("result hosting", () => {
  it.live("a copy that fails once is retried: the task succeeds with our URL, which serves the file", () =>
    Effect.gen(function*() {
      const { base } = yield* loopback
      yield* Effect.gen(function*() {
        const task = yield* run("alpha-image-2/text-to-image", {}, "flaky.png")
        expect(task.status).toBe("SUCCESS")
        const [url] = task.result!.urls
        expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/media\/[0-9a-f]{32}\.png$/)
        expect(url!.startsWith(base)).toBe(false)
        expect(asked.get("/flaky.png")).toBe(2)
        expect(submits.get("flaky.png")).toBe(1)
        expect(task.attempts).toMatchObject([{ attempt: 1, upstream_id: "flaky.png", outcome: "succeeded" }])
        const served = yield* Effect.promise(() => fetch(url!))
        expect(served.status).toBe(200)
        expect(Buffer.from(yield* Effect.promise(() => served.arrayBuffer())).equals(png)).toBe(true)
      }).pipe(Effect.provide(frontServer(base)))
    }).pipe(Effect.scoped), 30_000)

  it.live("a copy that keeps failing ends the task FAILURE at its deadline with the reason and the job's id, never with the upstream's URL; the job ran once", () =>
    Effect.gen(function*() {
      const { base } = yield* loopback
      yield* Effect.gen(function*() {
        for (const [model, input] of [["alpha-image-2/text-to-image", {}], ["beta-imagine/text-to-image-pro", {}], ["beta-imagine/text-to-video", { duration: 6 }]] as const) {
          asked.delete("/broken.png")
          submits.delete("broken.png")
          const task = yield* run(model, input, "broken.png")
          // No class the client could act on (spec: failure_reason null), and the reason in `error`.
          expect(task).toMatchObject({ status: "FAILURE", result: null, failure_reason: null })
          // The last try failed, or (on a loaded machine) was still running when the deadline came.
          expect(task.error).toMatch(
            new RegExp(
              `^the result of upstream job broken\\.png could not be copied before the deadline \\(\\d+ tries\\); the last failure: (copying the result failed: ${
                base.replace(/\./g, "\\.")
              }/broken\\.png: HTTP 500|the deadline passed while the result was being copied)$`
            )
          )
          expect(submits.get("broken.png")).toBe(1)
          expect(asked.get("/broken.png")).toBeGreaterThan(2)
          // Ended at its deadline (on the real clock, give or take a step; the TestClock suite is exact).
          expect(Date.parse(task.updated_at) - Date.parse(task.created_at)).toBeLessThan(2_000)
          expect(JSON.stringify(task)).not.toContain(`${base}/broken.png"`)
        }
      }).pipe(Effect.provide(frontServer(base, { "alpha-image-2": "1 second", "beta-imagine": "1 second" })))
    }).pipe(Effect.scoped), 30_000)

  it.live("a result that is not a file we serve ends the task FAILURE at once, naming the job; the job ran once", () =>
    Effect.gen(function*() {
      const { base } = yield* loopback
      yield* Effect.gen(function*() {
        const task = yield* run("alpha-image-2/text-to-image", {}, "notes.txt")
        expect(task).toMatchObject({ status: "FAILURE", result: null, failure_reason: null })
        expect(task.error).toBe(`the result of upstream job notes.txt cannot be copied: the result ${base}/notes.txt is not an image or video we serve (application/octet-stream)`)
        expect(asked.get("/notes.txt")).toBe(1)
        expect(submits.get("notes.txt")).toBe(1)
      }).pipe(Effect.provide(frontServer(base)))
    }).pipe(Effect.scoped), 30_000)
})

/** What the fake Replicate answers, under `Prefer: wait`, for a prompt: one data: output of the given media type and bytes. */
const dataOutputs: Readonly<Record<string, string>> = {
  octet: `data:application/octet-stream;base64,${png.toString("base64")}`,
  untyped: `data:;base64,${png.toString("base64")}`,
  plain: `data:text/plain;base64,${png.toString("base64")}`,
  text: `data:application/octet-stream;base64,${Buffer.from("not a picture").toString("base64")}`
}

describe("a Replicate output as a data: URI", () => {
  let replicate: Awaited<ReturnType<typeof FakeReplicate.start>>
  beforeAll(async () => {
    replicate = await FakeReplicate.start({ token: "r8_token", dataUris: true, end: (p) => ({ output: [dataOutputs[p.input["prompt"] as string]!] }) })
  })
  afterAll(() => replicate.close())

  /** Runs dream-4 on the fake Replicate, the prompt naming its output. */
  const replicated = (prompt: string) =>
    Effect.gen(function*() {
      const { base } = yield* loopback
      return yield* run("dream-4", {}, prompt).pipe(Effect.provide(frontServer(base, {}, replicate.url)))
    }).pipe(Effect.scoped)

  for (const prompt of ["octet", "untyped", "plain"]) {
    it.live(`declared ${dataOutputs[prompt]!.slice(0, dataOutputs[prompt]!.indexOf(";"))} with a PNG's bytes: hosted as image/png by its bytes, the task succeeds`, () =>
      Effect.gen(function*() {
        const { base } = yield* loopback
        yield* Effect.gen(function*() {
          const task = yield* run("dream-4", {}, prompt)
          expect(task).toMatchObject({ status: "SUCCESS", error: null })
          const [url] = task.result!.urls
          expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/media\/[0-9a-f]{32}\.png$/)
          const served = yield* Effect.promise(() => fetch(url!))
          expect(served.headers.get("content-type")).toBe("image/png")
          expect(Buffer.from(yield* Effect.promise(() => served.arrayBuffer())).equals(png)).toBe(true)
        }).pipe(Effect.provide(frontServer(base, {}, replicate.url)))
      }).pipe(Effect.scoped), 30_000)
  }

  it.live("bytes that are no file we serve end the task FAILURE, saying what the bytes are", () =>
    Effect.gen(function*() {
      const task = yield* replicated("text")
      expect(task).toMatchObject({ status: "FAILURE", result: null })
      expect(task.error).toContain("replicate: a data: output declared application/octet-stream is not an image, video or audio file we serve (its bytes are application/octet-stream)")
    }), 30_000)
})
