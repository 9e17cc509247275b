/**
 * The embedding example: the host's own route and mediagate's API on one node:http server.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Duration } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Net from "node:net"
import { Webhook } from "standardwebhooks"
import { start } from "../src/main.js"

const apiKey = "embed-test-key"
const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
let app: Awaited<ReturnType<typeof start>>

/** A callback receiver on loopback: resolves each POST it gets, in order. */
const received: Array<{ headers: Http.IncomingHttpHeaders; body: string }> = []
const waiters: Array<() => void> = []
const receiver = Http.createServer((request, response) => {
  let body = ""
  request.on("data", (chunk) => (body += chunk))
  request.on("end", () => {
    received.push({ headers: request.headers, body })
    response.writeHead(204).end()
    waiters.splice(0).forEach((wake) => wake())
  })
})
const nextCallback = (count: number) =>
  new Promise<void>((resolve) => (received.length >= count ? resolve() : waiters.push(() => received.length >= count && resolve())))

beforeAll(async () => {
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
  app = await start({ port: 0, host: "127.0.0.1", apiKey, simulatorProfile: "instant", webhookSecret, allowPrivateUrls: true })
})
afterAll(async () => {
  await app.close()
  receiver.closeAllConnections()
  await new Promise<void>((resolve) => receiver.close(() => resolve()))
})

const json = async (path: string, init: RequestInit = {}) => {
  const response = await fetch(`${app.url}${path}`, init)
  return { status: response.status, body: await response.json() as any }
}
const authorized = { authorization: `Bearer ${apiKey}` }

/** Lets the engine run without a timed sleep: one turn of the event loop per round. */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("embedding in an existing node:http server", () => {
  it("the host keeps its own routes", async () => {
    expect(await json("/health")).toEqual({ status: 200, body: { status: "ok", app: "host" } })
    const other = await fetch(`${app.url}/elsewhere`)
    expect(other.status).toBe(404)
    expect(await other.text()).toBe("host: no such page\n")
  })

  it("mediagate answers under /api/v1 with its envelope", async () => {
    expect(await json("/api/v1/task/abc")).toEqual({ status: 401, body: { code: 401, msg: "unauthorized" } })
    expect(await json("/api/v1/task/abc", { headers: authorized })).toEqual({
      status: 404,
      body: { code: 404, msg: "task not found" }
    })
  })

  it("a request Node itself refuses (headers over its limit) is answered in the envelope", async () => {
    const { port } = new URL(app.url)
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = Net.connect(Number(port), "127.0.0.1", () =>
        socket.write(`GET /api/v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`))
      let text = ""
      socket.on("data", (chunk) => (text += chunk))
      socket.on("close", () => resolve(text))
      socket.on("error", reject)
    })
    expect(answer.split("\r\n")[0]).toBe("HTTP/1.1 431 Request Header Fields Too Large")
    expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).toMatchObject({ code: 431 })
  })

  it("a task submitted through the host completes and its image is served", async () => {
    const submitted = await json("/api/v1/task/submit", {
      method: "POST",
      headers: { ...authorized, "content-type": "application/json" },
      body: JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "embedded", ratio: "4:3" } })
    })
    expect(submitted.status).toBe(200)
    const taskId = submitted.body.data.taskId as string
    let task: any
    for (let round = 0; round < 500; round++) {
      task = (await json(`/api/v1/task/${taskId}`, { headers: authorized })).body.data
      if (task.status === "SUCCESS") break
      await nextTurn()
    }
    expect(task.status).toBe("SUCCESS")
    const image = await fetch(task.result.urls[0])
    expect(image.status).toBe(200)
    expect(image.headers.get("content-type")).toBe("image/png")
    const bytes = new Uint8Array(await image.arrayBuffer())
    const view = new DataView(bytes.buffer)
    expect([view.getUint32(16), view.getUint32(20)]).toEqual([1024, 768])
  })

  it("the host's mediagate sends the finished task's callback, signed", async () => {
    const { port } = receiver.address() as AddressInfo
    const submitted = await json("/api/v1/task/submit", {
      method: "POST",
      headers: { ...authorized, "content-type": "application/json" },
      body: JSON.stringify({
        model: "dream-4",
        input: { prompt: "called back", resolution: "1k" },
        callBackUrl: `http://127.0.0.1:${port}/hooks/mediagate`
      })
    })
    expect(submitted.status).toBe(200)
    await nextCallback(1)
    const callback = received[0]!
    const verified = new Webhook(webhookSecret).verify(callback.body, {
      "webhook-id": String(callback.headers["webhook-id"]),
      "webhook-timestamp": String(callback.headers["webhook-timestamp"]),
      "webhook-signature": String(callback.headers["webhook-signature"])
    }) as { code: number; data: { taskId: string; status: string } }
    expect(verified.code).toBe(0)
    expect(verified.data.taskId).toBe(submitted.body.data.taskId)
    expect(verified.data.status).toBe("SUCCESS")
  })

  // Real time on a real socket, a few hundred milliseconds: the deadlines are what is tested.
  it("a client that sends its body or its headers a byte at a time is answered 408 in the envelope", async () => {
    const slow = await start({
      port: 0,
      host: "127.0.0.1",
      apiKey,
      simulatorProfile: "instant",
      timeouts: { headers: Duration.millis(300), body: Duration.millis(300) }
    })
    /** Sends `head`, then `drip` a byte every 50 ms, until the server closes the connection. */
    const slowly = (head: string, drip: string) =>
      new Promise<string>((resolve) => {
        const socket = Net.connect(Number(new URL(slow.url).port), "127.0.0.1")
        const received: Array<Buffer> = []
        let sent = 0
        const ticker = setInterval(() => sent < drip.length && socket.writable && socket.write(drip[sent++]!), 50)
        const giveUp = setTimeout(() => socket.destroy(), 5_000)
        socket.on("data", (chunk) => received.push(chunk))
        socket.on("error", () => {})
        socket.on("close", () => {
          clearInterval(ticker)
          clearTimeout(giveUp)
          resolve(Buffer.concat(received).toString("utf8"))
        })
        socket.write(head)
      })
    try {
      const body = JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: `a slow kite ${"x".repeat(100)}` } })
      const bodyAnswer = await slowly(
        `POST /api/v1/task/submit HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
        body
      )
      expect(bodyAnswer.split("\r\n")[0]).toBe("HTTP/1.1 408 Request Timeout")
      expect(JSON.parse(bodyAnswer.split("\r\n\r\n")[1]!)).toEqual({ code: 408, msg: "the request body took too long to arrive" })
      const headersAnswer = await slowly("GET /api/v1/account HTTP/1.1\r\n", `Host: x\r\nAuthorization: Bearer ${apiKey}\r\nX-Slow: ${"y".repeat(100)}\r\n\r\n`)
      expect(headersAnswer.split("\r\n")[0]).toBe("HTTP/1.1 408 Request Timeout")
      expect(headersAnswer).toContain('"code":408')
      // Nothing was created by the submit that did not arrive.
      const listed = await fetch(`${slow.url}/api/v1/tasks`, { headers: authorized })
      expect(((await listed.json()) as { data: { tasks: Array<unknown> } }).data.tasks).toEqual([])
    } finally {
      await slow.close()
    }
  })
})
