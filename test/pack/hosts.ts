/**
 * Host applications that embed mediagate the way the README's "Embedding" section says:
 * an Express 5 app, a Fastify 5 app and a Hono app (through the web-standard handler),
 * each with a route of its own beside mediagate's. test/embedding.test.ts runs them in the
 * workspace; test/pack.test.ts compiles this file with `tsc` (skipLibCheck false) in a
 * scratch project that installed the packed tarballs, and runs it with plain node.
 */
import { createAdaptorServer } from "@hono/node-server"
import { MediagateHttp } from "@mediagate/http"
import { Backends, Deployment } from "@mediagate/server"
import { Redacted } from "effect"
import express from "express"
import Fastify from "fastify"
import { Hono } from "hono"
import type { Server } from "node:http"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"

/** The account every host serves. */
export interface HostOptions {
  readonly apiKey: string
  readonly webhookSecret: string
}

/** A running host: its base URL, its own route and answer, and how to stop it. */
export interface Host {
  readonly name: string
  readonly url: string
  /** The host's own route and what it answers. */
  readonly own: { readonly path: string; readonly body: string }
  readonly close: () => Promise<void>
}

/** The standard services over memory backends and the instant simulator, callbacks to loopback allowed (tests only). */
const services = ({ apiKey, webhookSecret }: HostOptions, publicUrl: string) =>
  Deployment.services({
    simulatorProfile: "instant",
    allowPrivateUrls: true,
    backends: Backends.memoryBackends({ publicUrl }, [
      { id: "acct_host", name: "host", apiKey: Redacted.make(apiKey), webhookSecret: Redacted.make(webhookSecret), credits: 100_000_000 }
    ])
  })

/**
 * `server` listening on 127.0.0.1 at a port the system chooses, and its URL. A host listens
 * before it builds mediagate's services, whose media URLs name the port; the app is attached
 * to the server after (no request comes before the URL is handed out).
 */
export const listening = async (server: Server) => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

const closeServer = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  })

/**
 * Express 5 with a global `express.json()` before mediagate: the body a client sends to
 * mediagate's paths is parsed by the host, and mediagate takes it from `request.body`.
 */
export const startExpress = async (options: HostOptions): Promise<Host> => {
  const { server, url } = await listening(createServer())
  const api = await MediagateHttp.makeNodeHandler(services(options, url))
  const app = express()
  app.use(express.json())
  app.get("/hello", (_request, response) => {
    response.json({ host: "express" })
  })
  app.use(api.express)
  server.on("request", app)
  return {
    name: "express",
    url,
    own: { path: "/hello", body: JSON.stringify({ host: "express" }) },
    close: async () => {
      await closeServer(server)
      await api.dispose()
    }
  }
}

/** Fastify 5: mediagate registered as a plugin beside a route of the host's that parses JSON itself. */
export const startFastify = async (options: HostOptions): Promise<Host> => {
  const { server, url } = await listening(createServer())
  const api = await MediagateHttp.makeNodeHandler(services(options, url))
  // Fastify on the listening server (its serverFactory), started with `ready` rather than `listen`.
  const app = Fastify({ serverFactory: (handler) => server.on("request", handler) })
  app.post("/echo", async (request) => ({ host: "fastify", got: request.body }))
  app.get("/hello", async () => ({ host: "fastify" }))
  await app.register(api.fastify)
  await app.ready()
  return {
    name: "fastify",
    url,
    own: { path: "/hello", body: JSON.stringify({ host: "fastify" }) },
    close: async () => {
      await app.close()
      await closeServer(server)
      await api.dispose()
    }
  }
}

/** Hono on @hono/node-server, with mediagate's web-standard handler for its paths. */
export const startHono = async (options: HostOptions): Promise<Host> => {
  const app = new Hono()
  const { server, url } = await listening(createAdaptorServer({ fetch: app.fetch }) as Server)
  const api = await MediagateHttp.makeWebHandler(services(options, url))
  app.get("/hello", (context) => context.json({ host: "hono" }))
  app.use((context, next) => (api.owns(context.req.path) ? api.handler(context.req.raw) : next()))
  return {
    name: "hono",
    url,
    own: { path: "/hello", body: JSON.stringify({ host: "hono" }) },
    close: async () => {
      await closeServer(server)
      await api.dispose()
    }
  }
}
