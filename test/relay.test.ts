/**
 * Two real processes: a mediagate in front whose routes file sends alpha-image-2 and
 * beta-imagine to a relay upstream, and a second mediagate behind it on the simulator. A
 * task submitted to the front completes with a file made by the one behind, its callback
 * arrives signed, an unrouted model fails with a message, and killing the front mid-flight
 * loses nothing. Waits on real processes, so it polls with short pauses; nothing in it
 * measures time.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { onTestFinished } from "vitest"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as pause } from "node:timers/promises"
import { api, awaitTerminal, killAll, startServer, stop, submit } from "./standalone-process.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-relay-"))
const frontKey = "front-key-0123456789"
const backKey = "back-key-0123456789"
const callbacks: Array<{ headers: Http.IncomingHttpHeaders; body: any }> = []
let receiver: Http.Server

let backPort: number

const routes = join(dir, "routes.json")
writeFileSync(routes, JSON.stringify({
  routes: [
    { model: "alpha-image-2", targets: [{ provider: "relay", model: "alpha-image-2" }] },
    { model: "beta-imagine", targets: [{ provider: "relay", model: "beta-imagine" }] }
  ]
}, null, 2))

const startFront = () =>
  startServer({
    MEDIAGATE_API_KEY: frontKey,
    MEDIAGATE_DATABASE_URL: `sqlite:${join(dir, "front.db")}`,
    MEDIAGATE_MEDIA_DIR: join(dir, "front-media"),
    MEDIAGATE_ROUTES: routes,
    MEDIAGATE_RELAY_URL: `http://127.0.0.1:${backPort}`,
    MEDIAGATE_RELAY_KEY: backKey,
    // The callback receiver is on loopback.
    MEDIAGATE_ALLOW_PRIVATE_URLS: "true",
    MEDIAGATE_LEASE: "2s"
  })

beforeAll(async () => {
  receiver = Http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      callbacks.push({ headers: request.headers, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) })
      response.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
  backPort = (await startServer({
    MEDIAGATE_API_KEY: backKey,
    MEDIAGATE_DATABASE_URL: "memory",
    MEDIAGATE_SIMULATOR_PROFILE: "demo"
  })).port
}, 60_000)

afterAll(async () => {
  killAll()
  await new Promise<void>((resolve) => receiver.close(() => resolve()))
  rmSync(dir, { recursive: true, force: true })
})

describe("relay: mediagate in front of mediagate", () => {
  it("a task submitted to the front completes with a file made behind it, and its callback arrives", { timeout: 90_000 }, async () => {
    const front = await startFront()
    onTestFinished(() => stop(front, "SIGTERM").then(() => undefined))
    expect(front.output()).toContain(`upstream: routes from ${routes}; other models: fail`)
    const { port } = receiver.address() as AddressInfo
    const answer = await api(front.port, frontKey, "/api/v1/task/submit", {
      method: "POST",
      body: JSON.stringify({ model: "alpha-image-2/text-to-image", callBackUrl: `http://127.0.0.1:${port}/hook`, input: { prompt: "a relayed lighthouse", n: 2, ratio: "1:1" } })
    })
    expect(answer.status).toBe(200)
    const taskId = answer.body.data.taskId as string
    const task = (await awaitTerminal(front.port, frontKey, [taskId], 60_000)).get(taskId)!
    expect(task.status).toBe("SUCCESS")
    expect(task.result.urls).toHaveLength(2)
    // alpha-image-2's results are hosted by the service itself (spec section 2): the front
    // copied the file made behind it into its own storage.
    expect(task.result.urls[0]).toContain(`${front.url}/media/`)
    expect(task.attempts).toMatchObject([{ attempt: 1, provider: "relay:alpha-image-2", outcome: "succeeded" }])
    // The task behind has the client's input, and the file is a real PNG.
    const behind = await api(backPort, backKey, `/api/v1/task/${task.attempts[0].upstream_id}`)
    expect(behind.body.data).toMatchObject({ status: "SUCCESS", input: { model: "alpha-image-2/text-to-image", prompt: "a relayed lighthouse", n: 2, ratio: "1:1" } })
    const file = new Uint8Array(await (await fetch(task.result.urls[0])).arrayBuffer())
    expect(Array.from(file.slice(1, 4))).toEqual([0x50, 0x4e, 0x47])
    // The callback chain: the front signs and delivers its own callback.
    // Its body is the query answer (the envelope).
    for (let i = 0; i < 50 && !callbacks.some((c) => c.body.data?.taskId === taskId); i++) await pause(100)
    const callback = callbacks.find((c) => c.body.data?.taskId === taskId)!
    expect(callback.body).toMatchObject({ code: 0, data: { taskId, status: "SUCCESS", result: { urls: task.result.urls } } })
    expect(callback.headers["webhook-signature"]).toMatch(/^v1,/)

    // A model without a route fails with a message naming it.
    const unrouted = await submit(front.port, frontKey, "canvas-2.0", "no route")
    const failed = (await awaitTerminal(front.port, frontKey, [unrouted], 30_000)).get(unrouted)!
    expect(failed).toMatchObject({ status: "FAILURE", failure_reason: null })
    expect(failed.error).toMatch(/^no provider is configured for model canvas-2\.0/)
  })

  it("the front killed mid-flight loses nothing: after a restart its tasks finish, each relayed once", { timeout: 120_000 }, async () => {
    const before = (await api(backPort, backKey, "/api/v1/tasks?limit=100")).body.data.tasks.length as number
    let front = await startFront()
    onTestFinished(() => stop(front, "SIGTERM").then(() => undefined))
    const ids: Array<string> = []
    for (let i = 0; i < 6; i++) ids.push(await submit(front.port, frontKey, i % 2 === 0 ? "alpha-image-2/text-to-image" : "beta-imagine/text-to-video", `killed ${i}`))
    // Wait until every task was handed to the server behind, then kill the front.
    for (let i = 0; i < 100; i++) {
      const states = await Promise.all(ids.map((id) => api(front.port, frontKey, `/api/v1/task/${id}`)))
      if (states.every((s) => s.body.data.attempts[0]?.upstream_id)) break
      await pause(100)
    }
    front.child.kill("SIGKILL")
    await front.exited
    front = await startFront()
    const tasks = await awaitTerminal(front.port, frontKey, ids, 90_000)
    expect(ids.map((id) => [tasks.get(id)?.status, tasks.get(id)?.error ?? null])).toEqual(ids.map(() => ["SUCCESS", null]))
    const after = (await api(backPort, backKey, "/api/v1/tasks?limit=100")).body.data.tasks.length as number
    expect(after - before).toBe(ids.length)
  })
})
