/**
 * verifyCallback, a receiver's check of a callback: on callbacks captured from real
 * deliveries (the deliverer against a loopback receiver), against the `standardwebhooks`
 * library both ways, and in the receiver example of docs/callbacks.md, run as written.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "@effect/vitest"
import { StandardWebhooks, Task, TaskStore } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { NodeOutbound, NodeResolver } from "@mediagate/media"
import { MemoryAccounts, MemoryTaskStore } from "@mediagate/store-memory"
import { Effect, Either, Layer, Redacted, TestClock } from "effect"
import { readFileSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { Webhook } from "standardwebhooks"
import { Deliverer, verifyCallback, Webhooks } from "../src/index.js"

const secret = Webhooks.secretFromHex("8899aabbccddeeff00112233445566778899aabbccddeeff")
const otherSecret = Webhooks.secretFromHex("0123456789abcdef0123456789abcdef0123456789abcdef")

type Captured = { readonly headers: Http.IncomingHttpHeaders; readonly body: string }
const captured: Array<Captured> = []
let base = ""
const receiver = Http.createServer((request, response) => {
  let body = ""
  request.on("data", (chunk) => (body += chunk))
  request.on("end", () => {
    captured.push({ headers: request.headers, body })
    response.writeHead(204).end()
  })
})
beforeAll(() =>
  new Promise<void>((resolve) =>
    receiver.listen(0, "127.0.0.1", () => {
      base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`
      resolve()
    })
  ))
afterAll(() => {
  receiver.closeAllConnections()
  return new Promise<void>((resolve) => receiver.close(() => resolve()))
})

const deliverer = Deliverer.layer().pipe(
  Layer.provideMerge(MemoryTaskStore.layer),
  Layer.provide(MemoryAccounts.layer([{ id: "acct_test", name: "t", apiKey: Redacted.make("k"), webhookSecret: Redacted.make(secret) }])),
  Layer.provide(NodeOutbound.layer({ allowPrivate: true }).pipe(Layer.provide(NodeResolver.layer)))
)

/**
 * A task that ended at `now` (epoch ms; the wall clock by default, so that the library's own
 * check of the timestamp, which reads the wall clock, passes), delivered for real: the
 * request as the receiver got it.
 */
const delivered = (now = Date.now()) =>
  // The clock is set before the deliverer starts: set after, it would run the deliverer's
  // 1-second scan once for every second in between.
  Effect.zipRight(TestClock.setTime(now), deliverOne(now))

const deliverOne = (now: number) =>
  Effect.gen(function*() {
    const store = yield* TaskStore.TaskStore
    const n = captured.length
    const task = Testing.record({
      id: `0190c8a4-0000-7000-8000-${String(n).padStart(12, "0")}`,
      status: "SUCCESS",
      dueAt: null,
      result: { type: "image", urls: ["https://cdn.example/a.png"] },
      callBackUrl: `${base}/hook`
    })
    yield* store.create(task, [{ id: `msg_verify${n}`, taskId: task.id, url: task.callBackUrl!, createdAt: now }])
    yield* TestClock.adjust("1 second")
    for (let turn = 0; captured.length === n; turn++) {
      if (turn > 2_000) return yield* Effect.dieMessage("the callback did not arrive")
      yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
    }
    const request = captured[n]!
    return { task, request, at: Number(request.headers["webhook-timestamp"]) * 1000 }
  }).pipe(Effect.provide(deliverer), Effect.scoped)

const reasonOf = (result: Either.Either<unknown, { readonly reason: string }>) =>
  Either.match(result, { onLeft: (error) => error.reason, onRight: () => "accepted" })

describe("verifyCallback", () => {
  it.effect("accepts a genuine callback captured from a real delivery and answers its task, whatever form the headers and body take", () =>
    Effect.gen(function*() {
      const { at, request, task } = yield* delivered(1_900_000_000_000)
      expect(at).toBeGreaterThanOrEqual(1_900_000_000_000)
      expect(at).toBeLessThanOrEqual(1_900_000_001_000)
      expect(verifyCallback(secret, request.headers, request.body, { now: at })).toEqual(Either.right(Task.toWire(task)))
      const fetchHeaders = new Headers(Object.entries(request.headers).map(([name, value]): [string, string] => [name, String(value)]))
      expect(Either.getOrThrow(verifyCallback(secret, fetchHeaders, Buffer.from(request.body), { now: at }))).toEqual(Task.toWire(task))
      const capitalised = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name.toUpperCase(), value]))
      expect(reasonOf(verifyCallback(secret, capitalised, request.body, { now: at }))).toBe("accepted")
      // On the Clock in context: the TestClock stands at most a second after the delivery.
      expect(yield* Webhooks.verifyCallbackEffect(secret, request.headers, request.body)).toEqual(Task.toWire(task))
    }))

  it.effect("refuses a tampered body, a wrong secret, a timestamp 6 minutes old or ahead, and says why", () =>
    Effect.gen(function*() {
      const { at, request } = yield* delivered(1_900_000_000_000)
      const check = (changes: { headers?: Record<string, unknown>; body?: string; now?: number; secret?: string | ReadonlyArray<string> }) =>
        verifyCallback(
          changes.secret ?? secret,
          { ...request.headers, ...changes.headers } as Http.IncomingHttpHeaders,
          changes.body ?? request.body,
          { now: changes.now ?? at }
        )
      expect(reasonOf(check({ body: request.body.replace("SUCCESS", "FAILURE") }))).toBe("BadSignature")
      expect(reasonOf(check({ body: `${request.body} ` }))).toBe("BadSignature")
      const wrong = check({ secret: otherSecret })
      expect(Either.isLeft(wrong) && [wrong.left.reason, wrong.left.message]).toEqual(["BadSignature", "no signature matches the secret"])
      expect(reasonOf(check({ headers: { "webhook-id": "msg_other" } }))).toBe("BadSignature")
      expect(reasonOf(check({ now: at + 6 * 60_000 }))).toBe("TooOld")
      expect(reasonOf(check({ now: at - 6 * 60_000 }))).toBe("TooNew")
      expect(reasonOf(check({ now: at + 5 * 60_000 }))).toBe("accepted")
      expect(reasonOf(check({ now: at - 5 * 60_000 }))).toBe("accepted")
      expect(reasonOf(verifyCallback(secret, request.headers, request.body, { now: at + 6 * 60_000, tolerance: "10 minutes" }))).toBe("accepted")
      const missing = check({ headers: { "webhook-signature": undefined } })
      expect(Either.isLeft(missing) && [missing.left.reason, missing.left.message]).toEqual(["MissingHeader", "missing header webhook-signature"])
      expect(reasonOf(check({ headers: { "webhook-timestamp": "yesterday" } }))).toBe("InvalidTimestamp")
      // Only v1 signatures count.
      const signature = String(request.headers["webhook-signature"])
      expect(reasonOf(check({ headers: { "webhook-signature": signature.replace("v1,", "v2,") } }))).toBe("BadSignature")
      // Genuine, but not a mediagate callback.
      const id = String(request.headers["webhook-id"])
      const seconds = at / 1000
      const foreign = { ...request.headers, "webhook-signature": Webhooks.sign(secret, id, seconds, "{\"hello\":1}") }
      expect(reasonOf(verifyCallback(secret, foreign, "{\"hello\":1}", { now: at }))).toBe("InvalidBody")
    }))

  it("during a rotation either secret passes against the two signatures; several secrets may be given", () => {
    const body = JSON.stringify({ code: 0, msg: "ok", data: Task.toWire(Testing.record({ id: "0190c8a4-0000-7000-8000-0000000000aa" })) })
    const headers = {
      "webhook-id": "msg_rotation",
      "webhook-timestamp": "1900000000",
      "webhook-signature": `${Webhooks.sign(otherSecret, "msg_rotation", 1_900_000_000, body)} ${Webhooks.sign(secret, "msg_rotation", 1_900_000_000, body)}`
    }
    const now = 1_900_000_000_000
    expect(reasonOf(verifyCallback(secret, headers, body, { now }))).toBe("accepted")
    expect(reasonOf(verifyCallback(otherSecret, headers, body, { now }))).toBe("accepted")
    const third = Webhooks.secretFromHex("ff".repeat(24))
    expect(reasonOf(verifyCallback([third, secret], headers, body, { now }))).toBe("accepted")
    expect(reasonOf(verifyCallback([third], headers, body, { now }))).toBe("BadSignature")
    expect(reasonOf(verifyCallback([], headers, body, { now }))).toBe("BadSignature")
  })

  it.effect("agrees with the standardwebhooks library both ways", () =>
    Effect.gen(function*() {
      const { request, task } = yield* delivered()
      const library = new Webhook(secret)
      const asStrings = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, String(value)]))
      // A real delivery of ours, checked by the library (against the wall clock).
      expect(library.verify(request.body, asStrings)).toEqual(JSON.parse(request.body))
      expect(() => library.verify(request.body.replace("SUCCESS", "FAILURE"), asStrings)).toThrow("No matching signature found")
      // The library's signature over the delivery's own id, timestamp and body, checked by
      // ours. The timestamp is the header's (the deliverer's clock, the test clock here), not
      // the wall clock read again: the two can fall in different seconds.
      const seconds = Number(request.headers["webhook-timestamp"])
      const timestamp = new Date(seconds * 1000)
      const now = seconds * 1000
      const theirs = { ...asStrings, "webhook-signature": library.sign(String(request.headers["webhook-id"]), timestamp, request.body) }
      expect(verifyCallback(secret, theirs, request.body, { now })).toEqual(Either.right(Task.toWire(task)))
      expect(reasonOf(verifyCallback(otherSecret, theirs, request.body, { now }))).toBe("BadSignature")
      // Ours from our signer for a message of the library's making, and back.
      const ours = Webhooks.sign(secret, "msg_both", Math.floor(now / 1000), request.body)
      expect(ours).toBe(library.sign("msg_both", timestamp, request.body))
    }))

  it("agrees with the standardwebhooks library during a rotation, both ways", () => {
    const body = JSON.stringify({ code: 0, msg: "ok", data: Task.toWire(Testing.record({ id: "0190c8a4-0000-7000-8000-0000000000ab" })) })
    // The library checks the timestamp against the wall clock: the message is signed at it.
    const now = Date.now()
    const seconds = Math.floor(now / 1000)
    const timestamp = new Date(seconds * 1000)
    const headers = (signature: string) => ({ "webhook-id": "msg_rotated", "webhook-timestamp": String(seconds), "webhook-signature": signature })
    // Ours, as the deliverer sends it during a rotation (the current secret first), checked by
    // the library under either secret, and refused under a third.
    const ours = headers(`${Webhooks.sign(secret, "msg_rotated", seconds, body)} ${Webhooks.sign(otherSecret, "msg_rotated", seconds, body)}`)
    expect(new Webhook(secret).verify(body, ours)).toEqual(JSON.parse(body))
    expect(new Webhook(otherSecret).verify(body, ours)).toEqual(JSON.parse(body))
    expect(() => new Webhook(Webhooks.secretFromHex("ee".repeat(24))).verify(body, ours)).toThrow("No matching signature found")
    // The library's, one per secret, checked by ours under the receiver's current and previous secrets.
    const theirs = headers(`${new Webhook(otherSecret).sign("msg_rotated", timestamp, body)} ${new Webhook(secret).sign("msg_rotated", timestamp, body)}`)
    expect(reasonOf(verifyCallback([secret, otherSecret], theirs, body, { now }))).toBe("accepted")
    expect(reasonOf(verifyCallback(otherSecret, headers(new Webhook(otherSecret).sign("msg_rotated", timestamp, body)), body, { now }))).toBe("accepted")
    expect(reasonOf(verifyCallback(secret, headers(new Webhook(otherSecret).sign("msg_rotated", timestamp, body)), body, { now }))).toBe("BadSignature")
  })

  it("the deliverer's signer (node:crypto) and the receiver's check (core, @noble/hashes) agree, for secrets read leniently", () => {
    let seed = 5
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_= ."
    const now = 1_900_000_000_000
    for (let i = 0; i < 300; i++) {
      const key = Array.from({ length: 1 + Math.floor(next() * 90) }, () => alphabet[Math.floor(next() * alphabet.length)]).join("")
      const signing = i % 2 === 0 ? `whsec_${key}` : key
      const body = Array.from({ length: Math.floor(next() * 300) }, () => String.fromCharCode(32 + Math.floor(next() * 400))).join("")
      const signature = Webhooks.sign(signing, `msg_${i}`, now / 1000, body)
      expect(signature, JSON.stringify(signing)).toBe(StandardWebhooks.sign(signing, `msg_${i}`, now / 1000, body))
      const headers = { "webhook-id": `msg_${i}`, "webhook-timestamp": String(now / 1000), "webhook-signature": signature }
      // A secret with no key bytes signs nothing a receiver can check: refused, never accepted.
      expect(StandardWebhooks.verify(signing, headers, body, now), JSON.stringify(signing)).toBe(Buffer.from(key, "base64").length > 0)
    }
  })
})

describe("docs/callbacks.md", () => {
  const fixture = new URL("./fixtures/callback-receiver.ts", import.meta.url)
  const marker = "<!-- the receiver below is packages/scheduler/test/fixtures/callback-receiver.ts, run by its test -->"

  it("shows the receiver example exactly as it is tested", () => {
    const docs = readFileSync(new URL("../../../docs/callbacks.md", import.meta.url), "utf8")
    const block = docs.split(marker)[1]?.match(/^\s*```ts\n([\s\S]*?)```/)?.[1]
    expect(block).toBe(readFileSync(fixture, "utf8"))
  })

  it.effect("its receiver accepts a real callback, stores its task and answers 204; a tampered one is 400", () =>
    Effect.gen(function*() {
      const { request, task } = yield* delivered()
      const log = vi.spyOn(console, "log").mockImplementation(() => {})
      const warn = vi.spyOn(console, "warn").mockImplementation(() => {})
      process.env["MEDIAGATE_WEBHOOK_SECRET"] = secret
      process.env["PORT"] = "0"
      const example = yield* Effect.promise(() => import(fixture.href) as Promise<typeof import("./fixtures/callback-receiver.js")>)
      yield* Effect.addFinalizer(() =>
        Effect.promise(() => new Promise<void>((resolve) => example.server.close(() => resolve()))).pipe(
          Effect.zipRight(Effect.sync(() => {
            log.mockRestore()
            warn.mockRestore()
          }))
        )
      )
      if (!example.server.listening) yield* Effect.async<void>((resume) => void example.server.once("listening", () => resume(Effect.void)))
      const url = `http://127.0.0.1:${(example.server.address() as AddressInfo).port}/`
      const post = (body: string) =>
        Effect.promise(() =>
          fetch(url, {
            method: "POST",
            headers: Object.fromEntries(Object.entries(request.headers).flatMap(([name, value]) => name.startsWith("webhook-") || name === "content-type" ? [[name, String(value)]] : [])),
            body
          }).then((response) => response.status)
        )
      expect(yield* post(request.body)).toBe(204)
      expect(example.tasks.get(task.id)).toEqual(Task.toWire(task))
      expect(log).toHaveBeenCalledWith(`task ${task.id} ended SUCCESS`, ["https://cdn.example/a.png"])
      expect(yield* post(request.body.replace("a.png", "b.png"))).toBe(400)
      expect(warn).toHaveBeenCalledWith("callback refused (BadSignature): no signature matches the secret")
      expect(example.tasks.size).toBe(1)
    }).pipe(Effect.scoped))
})
