/**
 * What the console's browser suite (test/console.test.ts) and its screenshots
 * (scripts/console-screenshots.ts) run against: the standalone composition on 127.0.0.1 at a
 * free port, in memory, with an admin key given as configuration (as `MEDIAGATE_ADMIN_KEY`),
 * two accounts, a callback receiver on loopback, and real tasks run by the simulator: some
 * succeed, one fails with its callback refused by the receiver (410 Gone, so the deliverer
 * gives up at once, as when a customer's endpoint was down), one runs on for the console to
 * cancel.
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { MediagateHttp } from "@mediagate/http"
import { Backends, Deployment } from "@mediagate/server"
import { Effect, Layer, Option, Redacted } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/** The admin key the server is given (`MEDIAGATE_ADMIN_KEY`). */
export const adminKey = "console-admin-key-0123456789abcdef"

/** The customer key of the shop's account. */
export const shopKey = "mg_console_shop_key_0123456789"

/** The customer key of the second account. */
export const studioKey = "mg_console_studio_key_0123456789"

/** The standalone composition on 127.0.0.1 only, at a free port, with the simulator's `profile`. */
export const consoleServer = (profile: "instant" | "demo") =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      const port = server.address._tag === "TcpAddress" ? server.address.port : 0
      return MediagateHttp.serve.pipe(
        Layer.provide(Deployment.services({
          simulatorProfile: profile,
          // The callback receiver is on loopback.
          allowPrivateUrls: true,
          adminKey: Option.some(Redacted.make(adminKey)),
          backends: Backends.memoryBackends({ publicUrl: `http://127.0.0.1:${port}` }, [
            { id: "acct_shop", name: "Corner shop", apiKey: Redacted.make(shopKey), credits: 25_000_000 },
            { id: "acct_studio", name: "Studio North", apiKey: Redacted.make(studioKey), credits: 120_000_000 }
          ])
        }))
      )
    })
  ).pipe(Layer.provideMerge(NodeHttpServer.layer(() => Http.createServer(), { port: 0, host: "127.0.0.1" })))

/** The server's origin, `http://127.0.0.1:<port>`. */
export const origin = Effect.gen(function*() {
  const server = yield* HttpServer.HttpServer
  if (server.address._tag !== "TcpAddress") return yield* Effect.dieMessage("the test server has no TCP address")
  return `http://127.0.0.1:${server.address.port}`
})

/** One request the receiver got. */
export interface Delivery {
  readonly body: string
  readonly webhookId: string
  readonly answered: number
}

/**
 * A callback receiver on loopback: its first request is answered 410 Gone (the deliverer
 * gives up at once), every later one 204. `deliveries` lists what it got; `next(n)` resolves
 * when it has got `n`.
 */
export const receiver = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly deliveries: Array<Delivery>; readonly next: (count: number) => Promise<void>; readonly server: Http.Server }>((resume) => {
    const deliveries: Array<Delivery> = []
    const waiting: Array<{ count: number; resolve: () => void }> = []
    const server = Http.createServer((request, response) => {
      let body = ""
      request.on("data", (chunk) => (body += chunk))
      request.on("end", () => {
        const answered = deliveries.length === 0 ? 410 : 204
        response.writeHead(answered).end()
        deliveries.push({ body, webhookId: String(request.headers["webhook-id"]), answered })
        for (const wait of waiting.filter((wait) => deliveries.length >= wait.count)) wait.resolve()
      })
    })
    const next = (count: number) =>
      deliveries.length >= count ? Promise.resolve() : new Promise<void>((resolve) => void waiting.push({ count, resolve }))
    server.listen(0, "127.0.0.1", () =>
      resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, deliveries, next, server })))
  }),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

/** A request to the server's API with a key; the answer's status and JSON body. */
export const call = async (base: string, key: string, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  return { status: response.status, body: (await response.json()) as { code: number; msg: string; data?: any } }
}

const terminal = new Set(["SUCCESS", "FAILURE", "CANCELLED", "TIMEOUT"])

/** Waits until the task has ended (polling its query answer every 50 ms), at most `timeoutMs`. */
const ended = async (base: string, key: string, taskId: string, timeoutMs: number) => {
  const until = performance.now() + timeoutMs
  for (;;) {
    const answer = await call(base, key, "GET", `/api/v1/task/${taskId}`)
    if (terminal.has(answer.body.data?.status)) return answer.body.data.status as string
    if (performance.now() > until) throw new Error(`task ${taskId} did not end within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** The tasks the seed made, by what became of them. */
export interface Seeded {
  readonly scopedKeyId: string
  readonly succeeded: ReadonlyArray<string>
  readonly failed: string
  /** Submitted and never finishing (`[sim:timeout]`): running while the suite runs. */
  readonly running: string
}

/**
 * A scoped key for the second account, and real tasks through the customer API: four that succeed (two models, both accounts), one
 * that fails (`[sim:fail]`) with its callback to the receiver, and one that runs on
 * (`[sim:timeout]`). Answers when the failed task's callback has been refused once and the
 * other tasks have ended.
 */
export const seed = async (base: string, hook: { readonly url: string; readonly next: (count: number) => Promise<void> }): Promise<Seeded> => {
  const submit = async (key: string, model: string, prompt: string, extra: Record<string, unknown> = {}) => {
    const answer = await call(base, key, "POST", "/api/v1/task/submit", { model, input: { prompt }, ...extra })
    if (answer.body.code !== 0) throw new Error(`submit refused: ${answer.body.msg}`)
    return answer.body.data.taskId as string
  }
  // A scoped key, made as an operator makes one.
  const scoped = await call(base, adminKey, "POST", "/api/v1/admin/accounts/acct_studio/keys", {
    label: "mobile app",
    models: ["alpha-*"],
    monthly_cap_usd: "50",
    rate_limit: "10/s"
  })
  if (scoped.body.code !== 0) throw new Error(`key refused: ${scoped.body.msg}`)
  const succeeded = [
    await submit(shopKey, "alpha-image-2/text-to-image", "a lighthouse at dawn"),
    await submit(shopKey, "alpha-image-2/text-to-image", "a red bicycle"),
    await submit(studioKey, "beta-imagine/text-to-image-lite", "a paper crane"),
    await submit(studioKey, "alpha-image-2/text-to-image", "a bowl of lemons")
  ]
  const failed = await submit(shopKey, "alpha-image-2/text-to-image", "a storm at sea [sim:fail]", { callBackUrl: hook.url })
  const running = await submit(studioKey, "beta-imagine/text-to-image-lite", "a river that never ends [sim:timeout]")
  for (const [index, id] of succeeded.entries()) await ended(base, index < 2 ? shopKey : studioKey, id, 30_000)
  await ended(base, shopKey, failed, 30_000)
  await hook.next(1)
  return { scopedKeyId: scoped.body.data.info.id, succeeded, failed, running }
}
