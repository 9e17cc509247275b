/**
 * What the server answers without a key outside /api/v1/: the landing answer, liveness,
 * readiness (and why it is not ready), the public OpenAPI copy; unknown paths stay 404.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import type { TaskStore } from "@mediagate/core"
import { Docs, Health } from "@mediagate/http"
import type { Context } from "effect"
import { Effect, Fiber, Layer, Option, TestClock } from "effect"
import { readFileSync } from "node:fs"
import { apiKey, testServer } from "./support.js"

const get = (path: string, key: string | null = null) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const request = HttpClientRequest.get(path)
    const response = yield* client.execute(key === null ? request : request.pipe(HttpClientRequest.bearerToken(key)))
    return { status: response.status, headers: response.headers, body: yield* response.json }
  })

/** A task store whose every call fails as a database that went away does: a defect. */
const brokenStore = new Proxy({}, {
  get: () => () => Effect.die(new Error("connection refused"))
}) as Context.Tag.Service<TaskStore.TaskStore>

describe("public paths", () => {
  it.layer(testServer())((it) => {
    it.effect("GET / names the service, its version and where to go, without a key", () =>
      Effect.gen(function*() {
        const answer = yield* get("/")
        expect(answer.status).toBe(200)
        expect(answer.body).toEqual({
          name: "mediagate",
          version: Docs.version,
          links: { docs: "/docs", playground: "/playground", console: "/console", openapi: "/openapi.json", api: "/api/v1/", models: "/api/v1/models", health: "/healthz", ready: "/readyz" }
        })
        const manifest = JSON.parse(readFileSync(new URL("../packages/http/package.json", import.meta.url), "utf8")) as { version: string }
        expect(Docs.version).toBe(manifest.version)
      }))

    it.effect("/metrics is the envelope's 404 while metrics are off (the default)", () =>
      Effect.gen(function*() {
        const answer = yield* get("/metrics")
        expect([answer.status, answer.body]).toEqual([404, { code: 404, msg: "not found: /metrics" }])
      }))

    it.effect("/healthz answers 200 while serving, without a key", () =>
      Effect.gen(function*() {
        const answer = yield* get("/healthz")
        expect([answer.status, answer.body]).toEqual([200, { code: 0, msg: "ok", data: { status: "up" } }])
        expect(answer.headers["cache-control"]).toBe("no-store")
      }))

    it.effect("/readyz answers 200 with the store and the engine checks when both are well (the standard composition's engine)", () =>
      Effect.gen(function*() {
        const answer = yield* get("/readyz")
        expect([answer.status, answer.body]).toEqual([200, {
          code: 0,
          msg: "ok",
          data: {
            status: "ready",
            checks: [{ name: "store", ok: true, message: "reachable; schema migrated" }, { name: "engine", ok: true, message: "running" }]
          }
        }])
      }))

    it.effect("the OpenAPI document is public at /openapi.json and still behind the key under /api/v1/", () =>
      Effect.gen(function*() {
        const open = yield* get("/openapi.json")
        const keyed = yield* get("/api/v1/openapi.json", apiKey)
        expect(open.status).toBe(200)
        expect(open.body).toEqual(keyed.body)
        expect((open.body as { info: { title: string; version: string } }).info).toMatchObject({ title: "mediagate", version: Docs.version })
        expect(yield* get("/api/v1/openapi.json")).toMatchObject({ status: 401, body: { code: 401, msg: "unauthorized" } })
      }))

    it.effect("unknown paths are still the envelope 404, and a wrong method on a public path is 405", () =>
      Effect.gen(function*() {
        expect(yield* get("/nope")).toMatchObject({ status: 404, body: { code: 404, msg: "not found: /nope" } })
        expect(yield* get("/healthz/x")).toMatchObject({ status: 404, body: { code: 404, msg: "not found: /healthz/x" } })
        const client = yield* HttpClient.HttpClient
        const posted = yield* client.execute(HttpClientRequest.post("/readyz"))
        expect([posted.status, posted.headers["allow"], yield* posted.json]).toEqual([
          405,
          "GET",
          { code: 405, msg: "method POST is not allowed here; use GET" }
        ])
      }))
  })

  it.effect("/readyz answers 503 naming the check that failed, in the envelope", () =>
    Effect.gen(function*() {
      const answer = yield* get("/readyz")
      expect([answer.status, answer.body]).toEqual([503, {
        code: 503,
        msg: "not ready: engine (not running)",
        data: {
          status: "not_ready",
          checks: [{ name: "store", ok: true, message: "reachable; schema migrated" }, { name: "engine", ok: false, message: "not running" }]
        }
      }])
      expect((yield* get("/healthz")).status).toBe(200)
    }).pipe(Effect.provide(testServer({ engineStatus: { running: Effect.succeed(false) } }))))

  it.effect("a host's own Readiness replaces the default checks", () =>
    Effect.gen(function*() {
      const answer = yield* get("/readyz")
      expect([answer.status, (answer.body as { msg: string }).msg]).toEqual([503, "not ready: queue (backlog too long)"])
    }).pipe(Effect.provide(testServer().pipe(Layer.provide(Health.layer([{ name: "queue", run: Effect.fail("backlog too long") }]))))))
})

describe("readiness checks", () => {
  it.effect("a store that fails its read fails the store check with the reason", () =>
    Effect.gen(function*() {
      const results = yield* Health.runCheck(Health.storeCheck(brokenStore))
      expect(results).toEqual({ name: "store", ok: false, message: "connection refused" })
    }))

  it.effect("a store that does not answer fails the store check after the time limit", () =>
    Effect.gen(function*() {
      const hanging = { ...brokenStore, get: () => Effect.never } as Context.Tag.Service<TaskStore.TaskStore>
      const fiber = yield* Effect.fork(Health.runCheck(Health.storeCheck(hanging)))
      yield* TestClock.adjust("1999 millis")
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.join(fiber)).toEqual({ name: "store", ok: false, message: "did not answer within 2s" })
    }))

  it.effect("without a task store in context the default readiness is not ready and says why", () =>
    Effect.gen(function*() {
      const readiness = Health.make(yield* Health.defaultChecks)
      expect(yield* readiness.check).toEqual([
        { name: "store", ok: false, message: "no TaskStore in the HTTP layer's context; provide Health.Readiness" }
      ])
    }))
})
