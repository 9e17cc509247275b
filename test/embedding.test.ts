/**
 * mediagate embedded in the servers Node apps live in, inside the workspace: Express 5,
 * Fastify 5 and Hono (web-standard handler), each with a route of its own
 * (test/pack/hosts.ts, the same hosts test/pack.test.ts runs from the packed tarballs).
 * Through each: the host's route, a 404 naming the full path, submit, the events stream,
 * the query, the result file and the signed callback. Then what hosts get wrong: Express's
 * mount path, a body parser that ran first (parsed body used; consumed body named as the
 * cause), Fastify's own JSON errors kept off mediagate's paths.
 */
import { HeldRequests, MediagateHttp } from "@mediagate/http"
import { Backends, Deployment } from "@mediagate/server"
import { Layer, Redacted } from "effect"
import express from "express"
import Fastify from "fastify"
import { Hono } from "hono"
import { createAdaptorServer } from "@hono/node-server"
import type { Server } from "node:http"
import { createServer } from "node:http"
import { afterEach, describe, expect, it } from "vitest"
import { exercise } from "./pack/exercise.js"
import type { Host, HostOptions } from "./pack/hosts.js"
import { listening, startExpress, startFastify, startHono } from "./pack/hosts.js"

const apiKey = "mg_embed_key_0123456789"
const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
const auth = { authorization: `Bearer ${apiKey}` }

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const started = async (start: (options: HostOptions) => Promise<Host>) => {
  const host = await start({ apiKey, webhookSecret })
  cleanups.push(host.close)
  return host
}

describe("the frameworks, as the README mounts them", () => {
  for (const [name, start] of [["Express 5", startExpress], ["Fastify 5", startFastify], ["Hono (web handler)", startHono]] as const) {
    it(`${name}: own route, 404 with the path, submit, events, query, file, signed callback`, { timeout: 60_000 }, async () => {
      const host = await started(start)
      const seen = await exercise(host.url, { apiKey, webhookSecret, own: host.own })
      expect(seen.events.at(-1)).toBe("SUCCESS")
      expect(seen.file.contentType).toBe("image/png")
      expect(seen.callback).toBe(`${seen.taskId} SUCCESS`)
      // The docs page, the playground, the console, the OpenAPI document and health are mediagate's too.
      for (const path of ["/docs", "/playground", "/console", "/openapi.json", "/healthz"]) {
        expect([path, (await fetch(`${host.url}${path}`)).status]).toEqual([path, 200])
      }
    })
  }
})

/** The standard services over memory backends, the instant simulator and one account, for a host at `publicUrl`. */
const hostServices = (publicUrl: string) =>
  Deployment.services({
    simulatorProfile: "instant",
    backends: Backends.memoryBackends({ publicUrl }, [
      { id: "acct_host", name: "host", apiKey: Redacted.make(apiKey), credits: 100_000_000 }
    ])
  })

/** A bare Express app around the node handler, built by `build`. */
const expressApp = async (build: (app: express.Express, api: MediagateHttp.NodeHandler) => void) => {
  const { server, url } = await listening(createServer())
  const api = await MediagateHttp.makeNodeHandler(
    hostServices(url)
  )
  const app = express()
  build(app, api)
  server.on("request", app)
  cleanups.push(async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
    await api.dispose()
  })
  return url
}

const submit = (url: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${url}/api/v1/task/submit`, { method: "POST", headers: { ...auth, "content-type": "application/json", ...headers }, body }).then(
    async (response) => ({ status: response.status, body: await response.json() as { code: number; msg: string; data?: { taskId: string } } })
  )

const prompt = JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse" } })

describe("what a host gets wrong", () => {
  it("Express: mounted under a path it strips (app.use('/api/v1', api.handler)), mediagate still sees the whole path", async () => {
    const url = await expressApp((app, api) => {
      app.use(["/api/v1", "/media"], api.handler)
    })
    const answer = await submit(url, prompt)
    expect(answer.status).toBe(200)
    expect((await fetch(`${url}/api/v1/task/${answer.body.data!.taskId}`, { headers: auth })).status).toBe(200)
    // The 404 names the path as the client sent it, not what Express left of it.
    expect(await (await fetch(`${url}/api/v1/nope`, { headers: auth })).json()).toEqual({ code: 404, msg: "not found: /api/v1/nope" })
  })

  it("Express: mediagate before the body parser reads its own body, and broken JSON is its own 400 envelope", async () => {
    const url = await expressApp((app, api) => {
      app.use(api.express)
      app.use(express.json())
      app.post("/echo", (request, response) => {
        response.json(request.body)
      })
    })
    expect((await submit(url, prompt)).status).toBe(200)
    expect(await submit(url, "{ not json")).toEqual({ status: 400, body: { code: 400, msg: "request body is not valid JSON" } })
    // The host's own route still gets its parsed body.
    const echoed = await fetch(`${url}/echo`, { method: "POST", headers: { "content-type": "application/json" }, body: "{\"a\":1}" })
    expect(await echoed.json()).toEqual({ a: 1 })
  })

  it("Express: a body the host's express.text() or express.raw() read is replayed as it was", async () => {
    for (const parser of [express.text({ type: "*/*" }), express.raw({ type: "*/*" })]) {
      const url = await expressApp((app, api) => {
        app.use(parser)
        app.use(api.express)
      })
      const answer = await submit(url, prompt)
      expect(answer.status).toBe(200)
      expect(answer.body.data!.taskId).toMatch(/^[0-9a-f-]{36}$/)
    }
  })

  it("a body the host read and kept nothing of is a 400 naming the likely cause, not 'request body is required'", async () => {
    const url = await expressApp((app, api) => {
      // A host middleware that drains the body and keeps nothing.
      app.use((request, _response, next) => {
        request.resume()
        request.on("end", () => next())
      })
      app.use(api.express)
    })
    const answer = await submit(url, prompt)
    expect(answer.status).toBe(400)
    expect(answer.body.msg).toContain("the request body was read by the host server before mediagate saw it")
    expect(answer.body.msg).toContain("express.json()")
  })

  it("Fastify: the host's JSON parser stays on its routes; mediagate's paths get their own envelope for broken JSON", async () => {
    const { server, url } = await listening(createServer())
    const api = await MediagateHttp.makeNodeHandler(
      hostServices(url)
    )
    const app = Fastify({ serverFactory: (handler) => server.on("request", handler) })
    app.post("/echo", async (request) => request.body)
    await app.register(api.fastify)
    await app.ready()
    cleanups.push(async () => {
      await app.close()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await api.dispose()
    })
    expect(await submit(url, "{ not json")).toEqual({ status: 400, body: { code: 400, msg: "request body is not valid JSON" } })
    // A content type Fastify has no parser for: mediagate's answer, not Fastify's 415.
    expect(await submit(url, prompt, { "content-type": "text/plain" })).toEqual({
      status: 400,
      body: { code: 400, msg: "Content-Type must be application/json" }
    })
    const echoed = await fetch(`${url}/echo`, { method: "POST", headers: { "content-type": "application/json" }, body: "{\"a\":1}" })
    expect(await echoed.json()).toEqual({ a: 1 })
    // The 405 of a known path comes from mediagate, not Fastify.
    const wrong = await fetch(`${url}/api/v1/task/submit`, { method: "PUT", headers: auth })
    expect(wrong.status).toBe(405)
    expect(wrong.headers.get("allow")).toBe("POST")
  })

  it("the web handler: a known remote address reaches the failed-authentication limit", async () => {
    // Nothing listens: the requests go to the handler itself.
    const api = await MediagateHttp.makeWebHandler(
      hostServices("http://127.0.0.1")
    )
    cleanups.push(api.dispose)
    const wrongKey = () =>
      api.handler(new Request("http://127.0.0.1/api/v1/account", { headers: { authorization: `Bearer mg_wrong_${Math.random()}` } }), { remoteAddress: "127.0.0.9" })
    const statuses: Array<number> = []
    for (let i = 0; i < 40; i++) statuses.push((await wrongKey()).status)
    expect(statuses[0]).toBe(401)
    expect(statuses).toContain(429)
    // Another address is not limited.
    const other = await api.handler(new Request("http://127.0.0.1/api/v1/account", { headers: { authorization: `Bearer mg_wrong` } }), { remoteAddress: "127.0.0.10" })
    expect(other.status).toBe(401)
    expect(api.owns("/api/v1/task/x")).toBe(true)
    expect(api.owns("/hello")).toBe(false)
  })

  it("Hono: an events stream the client abandons gives its held place back (cap 2 per key, 6 streams in turn)", { timeout: 60_000 }, async () => {
    const app = new Hono()
    const { server, url } = await listening(createAdaptorServer({ fetch: app.fetch }) as Server)
    const api = await MediagateHttp.makeWebHandler(
      Deployment.services({
        simulatorProfile: "realistic",
        backends: Backends.memoryBackends({ publicUrl: url }, [
          { id: "acct_host", name: "host", apiKey: Redacted.make(apiKey), credits: 100_000_000 }
        ])
      }).pipe(Layer.merge(HeldRequests.layer({ perKey: 2, total: 10 })))
    )
    app.use((context, next) => (api.owns(context.req.path) ? api.handler(context.req.raw) : next()))
    cleanups.push(async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await api.dispose()
    })
    const { taskId } = (await submit(url, JSON.stringify({ model: "beta-imagine/text-to-video", input: { prompt: "a long walk" } }))).body.data!
    for (let round = 0; round < 6; round++) {
      const abort = new AbortController()
      const response = await fetch(`${url}/api/v1/task/${taskId}/events`, { headers: auth, signal: abort.signal })
      expect([round, response.status]).toEqual([round, 200])
      const reader = response.body!.getReader()
      await reader.read()
      abort.abort()
      await reader.cancel().catch(() => {})
      // The place comes back when the server sees the connection go; give it a moment.
      for (let tries = 0; tries < 50; tries++) {
        const probe = await fetch(`${url}/api/v1/task/${taskId}?wait=1`, { headers: auth })
        await probe.arrayBuffer()
        if (probe.status === 200) break
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
  })
})
