/**
 * Who may call what, over a real loopback server: a table over every path and method of
 * `/openapi.json` (read from the document, so a new endpoint is covered by itself). On every
 * admin path a customer key is 403, no key or an unknown key 401, an admin key neither; on
 * every customer path an admin key is 403, never taken for a customer's. Failed admin sign-ins
 * are limited per address, apart from (and stricter than) the customer API's.
 */
import { describe, expect, it } from "@effect/vitest"
import { AdminAuthentication, Auth, AuthFailures } from "@mediagate/http"
import { Duration, Effect, Layer, Option } from "effect"
import { adminKey, documented } from "./admin-support.js"
import type { Answer } from "./support.js"
import { apiKey, client, testServer } from "./support.js"

const unknownTask = "0190c8a4-0000-7000-8000-000000000000"

const api = client()

interface Operation {
  readonly path: string
  readonly method: string
  /** The path with its parameters filled in. */
  readonly url: string
}

/** Every operation of the public OpenAPI document. */
const operations = Effect.gen(function*() {
  const document = (yield* api.call("GET", "/openapi.json", { key: null })).body as { paths: Record<string, Record<string, unknown>> }
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.keys(item).map((method): Operation => ({
      path,
      method,
      url: path.replace("{taskId}", unknownTask).replace("{accountId}", "acct_test").replace("{keyId}", "key_none").replace("{adminKeyId}", "adk_none")
    }))
  )
})

const isAdmin = (operation: Operation) => operation.path.startsWith("/api/v1/admin/")

/** A request to an operation with `key` (null: none); a body of `{}` where it takes one. */
const send = (operation: Operation, key: string | null) =>
  api.call(operation.method.toUpperCase() as "GET" | "POST", operation.url, {
    key,
    ...(operation.method === "post" ? { body: {} } : {})
  })

const expectEnvelope = (operation: Operation, answer: Answer, code: number, msg: string) =>
  expect({ operation: `${operation.method} ${operation.path}`, status: answer.status, body: answer.body }).toEqual({
    operation: `${operation.method} ${operation.path}`,
    status: code,
    body: { code, msg }
  })

/** The server with the admin key, and no limit on failed sign-ins (the table sends many wrong keys). */
const server = testServer({ adminKey }).pipe(
  Layer.provide(Layer.mergeAll(AuthFailures.layer(Option.none()), AuthFailures.layerAdmin(Option.none())))
)

describe("admin authentication", () => {
  it.effect("every admin path: a customer key is 403, no key or an unknown key 401, the admin key neither", () =>
    Effect.gen(function*() {
      const admin = (yield* operations).filter(isAdmin)
      // accounts, keys, secrets, credits, tasks, admin keys, audit: at least the admin API's own 17.
      expect(admin.length).toBeGreaterThanOrEqual(17)
      for (const operation of admin) {
        // Each answer is one the document declares for the operation, with a body its schema takes.
        const declared = documented(operation.path, operation.method as "get" | "post")
        expectEnvelope(operation, yield* Effect.flatMap(send(operation, apiKey), declared), 403, AdminAuthentication.customerKeyMessage)
        expectEnvelope(operation, yield* Effect.flatMap(send(operation, null), declared), 401, "unauthorized")
        expectEnvelope(operation, yield* send(operation, "mg_not_a_key_000000000000"), 401, "unauthorized")
        const answer = yield* Effect.flatMap(send(operation, adminKey), declared)
        expect({ operation: `${operation.method} ${operation.path}`, status: answer.status }).not.toMatchObject({ status: 401 })
        expect({ operation: `${operation.method} ${operation.path}`, status: answer.status }).not.toMatchObject({ status: 403 })
        // In the envelope whatever it answered.
        expect(answer.status < 500).toBe(true)
        expect(answer.body.code).toBe(answer.status === 200 ? 0 : answer.status)
      }
    }).pipe(Effect.provide(server)))

  it.effect("every customer path: the admin key is 403, never taken for a customer's key", () =>
    Effect.gen(function*() {
      const customer = (yield* operations).filter((operation) => !isAdmin(operation) && operation.path.startsWith("/api/v1/"))
      expect(customer.length).toBeGreaterThanOrEqual(10)
      // The OpenAPI document under /api/v1/ and the 405 routes ask for a customer key too.
      const extra: Array<Operation> = [
        { path: "/api/v1/openapi.json", method: "get", url: "/api/v1/openapi.json" },
        { path: "/api/v1/task/submit", method: "get", url: "/api/v1/task/submit" },
        { path: "/api/v1/nowhere", method: "get", url: "/api/v1/nowhere" }
      ]
      for (const operation of customer) {
        const answer = yield* Effect.flatMap(send(operation, adminKey), documented(operation.path, operation.method as "get" | "post"))
        expectEnvelope(operation, answer, 403, Auth.adminKeyMessage)
      }
      for (const operation of extra) expectEnvelope(operation, yield* send(operation, adminKey), 403, Auth.adminKeyMessage)
      // Nothing was submitted with it.
      const tasks = yield* api.call("GET", "/api/v1/admin/tasks", { key: adminKey })
      expect(tasks.body.data.tasks).toEqual([])
    }).pipe(Effect.provide(server)))

  it.effect("a path under /api/v1/admin/ no route takes: 401 without a key, 403 for a customer key, 404 for the admin key", () =>
    Effect.gen(function*() {
      const path = "/api/v1/admin/nowhere"
      expect(yield* api.call("GET", path, { key: null })).toEqual({ status: 401, body: { code: 401, msg: "unauthorized" } })
      expect(yield* api.call("GET", path)).toEqual({ status: 403, body: { code: 403, msg: AdminAuthentication.customerKeyMessage } })
      expect(yield* api.call("GET", path, { key: adminKey })).toEqual({ status: 404, body: { code: 404, msg: `not found: ${path}` } })
      // A wrong method on an admin path: 405 for the admin key only.
      expect((yield* api.call("DELETE", "/api/v1/admin/accounts", { key: adminKey })).status).toBe(405)
      expect((yield* api.call("DELETE", "/api/v1/admin/accounts")).status).toBe(403)
    }).pipe(Effect.provide(server)))

  it.effect("a created admin key opens the admin API until it is revoked; a revoked or expired one is 401", () =>
    Effect.gen(function*() {
      const created = yield* api.call("POST", "/api/v1/admin/admin-keys", { key: adminKey, body: { label: "ops" } })
      expect(created.status).toBe(200)
      const key: string = created.body.data.key
      expect(key).toMatch(/^mga_[0-9A-Za-z]{38}$/)
      expect((yield* api.call("GET", "/api/v1/admin/accounts", { key })).status).toBe(200)
      // It is not a customer key either.
      expect(yield* api.call("GET", "/api/v1/models", { key })).toEqual({ status: 403, body: { code: 403, msg: Auth.adminKeyMessage } })
      const revoked = yield* api.call("POST", `/api/v1/admin/admin-keys/${created.body.data.info.id}/revoke`, { key: adminKey })
      expect(revoked.body.data).toMatchObject({ id: created.body.data.info.id, state: "revoked" })
      expect(yield* api.call("GET", "/api/v1/admin/accounts", { key })).toEqual({ status: 401, body: { code: 401, msg: "unauthorized" } })
      // A revoked admin key on a customer path is nobody's: 401.
      expect((yield* api.call("GET", "/api/v1/models", { key })).status).toBe(401)
    }).pipe(Effect.provide(server)))
})

describe("a composition with no admin key", () => {
  it.effect("answers 401 on every admin path (a customer key still 403): the admin API is there, closed", () =>
    Effect.gen(function*() {
      for (const operation of (yield* operations).filter(isAdmin)) {
        expectEnvelope(operation, yield* send(operation, adminKey), 401, "unauthorized")
        expectEnvelope(operation, yield* send(operation, apiKey), 403, AdminAuthentication.customerKeyMessage)
      }
    }).pipe(Effect.provide(testServer().pipe(Layer.provide(AuthFailures.layerAdmin(Option.none()))))))
})

describe("failed admin sign-ins", () => {
  it.effect("are limited per address: 5 wrong keys, then 429 with Retry-After; a good admin key still passes; customer paths count apart", () =>
    Effect.gen(function*() {
      expect((yield* api.call("GET", "/api/v1/admin/accounts", { key: adminKey })).status).toBe(200)
      for (let i = 0; i < 5; i++) {
        expect((yield* api.call("GET", "/api/v1/admin/accounts", { key: `mga_wrong_${i}_0000000000000000000000` })).status).toBe(401)
      }
      const limited = yield* api.call("GET", "/api/v1/admin/accounts", { key: "mga_wrong_6_0000000000000000000000" })
      expect(limited.status).toBe(429)
      expect(limited.body).toEqual({ code: 429, msg: "too many failed authentications from this address; try again later" })
      // One every 3 minutes comes back (15 minutes for 5).
      expect(Number(limited.headers["retry-after"])).toBeGreaterThan(60)
      expect(Number(limited.headers["retry-after"])).toBeLessThanOrEqual(180)
      // A key that authenticated before, from anywhere, still goes through (as on the customer API).
      expect((yield* api.call("GET", "/api/v1/admin/accounts", { key: adminKey })).status).toBe(200)
      // The customer API's failures count apart: a wrong key there is still 401, not 429.
      expect((yield* api.call("GET", "/api/v1/models", { key: "mg_wrong_customer_key_00000" })).status).toBe(401)
    }).pipe(Effect.provide(testServer({ adminKey }))))

  it("the admin limit is stricter than the customer API's", () => {
    const perMinute = (limit: AuthFailures.Limit) => limit.failures / Duration.toMinutes(Duration.decode(limit.window))
    expect(AuthFailures.adminLimit.failures).toBeLessThan(AuthFailures.defaultLimit.failures)
    expect(perMinute(AuthFailures.adminLimit)).toBeLessThan(perMinute(AuthFailures.defaultLimit))
  })
})
