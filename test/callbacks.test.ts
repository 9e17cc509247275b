/**
 * Callbacks end to end on the real clock: a task submitted with callBackUrl ends, and a
 * receiver on loopback gets the query answer, verified by the `standardwebhooks` library
 * (signature and timestamp). The test waits for the receiver, it does not sleep.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { Webhook } from "standardwebhooks"
import { apiKey, testServer, webhookSecret } from "./support.js"

/** A receiver that resolves with the first request it gets. */
const receiver = Effect.acquireRelease(
  Effect.async<{ url: string; first: Promise<{ headers: Http.IncomingHttpHeaders; body: string }>; server: Http.Server }>((resume) => {
    let deliver: (value: { headers: Http.IncomingHttpHeaders; body: string }) => void = () => {}
    const first = new Promise<{ headers: Http.IncomingHttpHeaders; body: string }>((resolve) => (deliver = resolve))
    const server = Http.createServer((request, response) => {
      let body = ""
      request.on("data", (chunk) => (body += chunk))
      request.on("end", () => {
        response.writeHead(204).end()
        deliver({ headers: request.headers, body })
      })
    })
    server.listen(0, "127.0.0.1", () =>
      resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, first, server })))
  }),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

describe("callbacks", () => {
  it.live("a finished task's callback reaches the receiver, signed, with the query answer as body", () =>
    Effect.gen(function*() {
      const hook = yield* receiver
      const client = yield* HttpClient.HttpClient
      const submitted = yield* client.execute(
        HttpClientRequest.post("/api/v1/task/submit").pipe(
          HttpClientRequest.bearerToken(apiKey),
          HttpClientRequest.bodyText(JSON.stringify({
            model: "alpha-image-2/text-to-image",
            input: { prompt: "with a callback" },
            callBackUrl: hook.url
          }), "application/json")
        )
      ).pipe(Effect.flatMap((response) => response.json))
      const taskId = (submitted as any).data.taskId as string
      const { body, headers } = yield* Effect.promise(() => hook.first)
      const payload = new Webhook(webhookSecret).verify(body, {
        "webhook-id": String(headers["webhook-id"]),
        "webhook-timestamp": String(headers["webhook-timestamp"]),
        "webhook-signature": String(headers["webhook-signature"])
      }) as any
      expect(payload.code).toBe(0)
      expect(payload.data.taskId).toBe(taskId)
      expect(payload.data.status).toBe("SUCCESS")
      expect(String(headers["webhook-id"])).toMatch(/^msg_[0-9a-f]{24}$/)
      const query = yield* client.execute(
        HttpClientRequest.get(`/api/v1/task/${taskId}`).pipe(HttpClientRequest.bearerToken(apiKey))
      ).pipe(Effect.flatMap((response) => response.json))
      expect(payload).toEqual(query)
    }).pipe(Effect.provide(testServer({ profile: "instant", allowPrivateUrls: true })), Effect.scoped))
})
