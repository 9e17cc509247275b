import { afterEach, describe, expect, it } from "@effect/vitest"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { holdEarlyRequests } from "../src/Server.js"

let http: Server | undefined
afterEach(() => {
  http?.closeAllConnections()
  http?.close()
})

const listening = async () => {
  http = createServer()
  const waiting = holdEarlyRequests(http)
  await new Promise<void>((done) => http!.listen(0, "127.0.0.1", done))
  return { http, waiting, url: `http://127.0.0.1:${(http.address() as AddressInfo).port}` }
}

/** Until `condition` holds, one turn of the event loop at a time. */
const until = async (condition: () => boolean) => {
  while (!condition()) await new Promise((done) => setImmediate(done))
}

describe("holdEarlyRequests", () => {
  it("a request that came before the handler is answered by it once it is attached", async () => {
    const { http, url, waiting } = await listening()
    const answer = fetch(`${url}/healthz`).then((response) => response.text())
    await until(() => waiting() === 1)
    http.on("request", (request, response) => response.end(`handled ${request.url}`))
    expect(await answer).toBe("handled /healthz")
    expect(waiting()).toBe(0)
  })

  it("once the handler is attached, requests go to it alone", async () => {
    const { http, url, waiting } = await listening()
    http.on("request", (request, response) => response.end(`handled ${request.url}`))
    expect(http.listenerCount("request")).toBe(1)
    expect(await fetch(`${url}/a`).then((response) => response.text())).toBe("handled /a")
    expect(waiting()).toBe(0)
  })
})
