/**
 * The embedding example: the host's own route and mediagate's API on one node:http server.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { start } from "../src/main.js"

const apiKey = "embed-test-key"
let app: Awaited<ReturnType<typeof start>>

beforeAll(async () => {
  app = await start({ port: 0, host: "127.0.0.1", apiKey, simulatorProfile: "instant" })
})
afterAll(async () => {
  await app.close()
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
})
