/**
 * A database out of reach is 503 with Retry-After, in the envelope, on every endpoint:
 * clients and load balancers send a 503 again, a 500 tells them the request was wrong. First
 * over memory stores made to fail as a SQL store does when its connections are refused
 * (`outage.ts`), then over a real PostgreSQL reached through a loopback relay that is shut
 * and opened again. Nothing accepted before the outage is lost.
 */
import { afterAll, afterEach, describe, expect, it } from "@effect/vitest"
import { Ids, Ledger } from "@mediagate/core"
import { MediagateHttp } from "@mediagate/http"
import { Deployment } from "@mediagate/server"
import { SqlBackends } from "@mediagate/server/sql"
import { SqlAccounts } from "@mediagate/store-sql"
import { freshDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { Effect, Layer, Logger, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import type { AddressInfo, Socket } from "node:net"
import { connect, createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connectionRefused, Outage, outageServer, syntaxError } from "./outage.js"
import type { Answer } from "./support.js"
import { apiKey, client } from "./support.js"

const api = client()

/** Store failures are logged where they happen; kept out of the test's output. */
const quiet = Logger.replace(Logger.defaultLogger, Logger.none)

const expect503 = (label: string, answer: Answer) => {
  expect({ label, status: answer.status, body: answer.body }).toEqual({
    label,
    status: 503,
    body: { code: 503, msg: "the database is unavailable; try again later" }
  })
  expect(answer.headers["content-type"]).toMatch(/^application\/json/)
  expect(answer.headers["retry-after"]).toMatch(/^[1-9][0-9]*$/)
}

const submitBody = { model: "alpha-image-2/text-to-image", input: { prompt: "x" } }

afterEach(() => {
  Outage.down = false
  Outage.failure = connectionRefused
})

describe("a database out of reach (memory stores failing as SQL ones do)", () => {
  it.layer(outageServer)((it) => {
    it.effect("every endpoint answers 503 with Retry-After; what was accepted before is there after", () =>
      Effect.gen(function*() {
        const before = yield* api.submitId(submitBody)
        Outage.down = true
        const requests: ReadonlyArray<readonly [string, string, unknown?]> = [
          ["POST", "/api/v1/task/submit", submitBody],
          ["POST", "/api/v1/task/estimate", submitBody],
          ["GET", `/api/v1/task/${before}`],
          ["GET", `/api/v1/task/${before}?wait=5`],
          ["GET", "/api/v1/tasks"],
          ["POST", `/api/v1/task/${before}/cancel`],
          ["GET", `/api/v1/task/${before}/events`],
          ["GET", `/api/v1/task/${before}/callbacks`],
          ["POST", `/api/v1/task/${before}/callbacks/redeliver`],
          ["GET", "/api/v1/models"],
          ["GET", "/api/v1/account"],
          ["GET", "/api/v1/openapi.json"],
          // Unknown paths and wrong methods under /api/v1/ authenticate first.
          ["GET", "/api/v1/nope"],
          ["DELETE", `/api/v1/task/${before}`]
        ]
        for (const [method, path, body] of requests) {
          expect503(`${method} ${path}`, yield* api.call(method as "GET", path, body === undefined ? {} : { body }))
        }
        Outage.down = false
        const after = yield* api.query(before)
        expect(after.status).toBe(200)
        expect(after.body.data.taskId).toBe(before)
        // The submit refused during the outage left nothing: the one task is the one before.
        const listed = yield* api.call("GET", "/api/v1/tasks")
        expect(listed.body.data.tasks.map((task: { taskId: string }) => task.taskId)).toEqual([before])
      }).pipe(Effect.provide(quiet)))

    it.effect("a store failure that is not the connection stays 500 internal server error", () =>
      Effect.gen(function*() {
        const id = yield* api.submitId(submitBody)
        Outage.failure = syntaxError
        Outage.down = true
        for (const path of [`/api/v1/task/${id}`, "/api/v1/models"]) {
          const answer = yield* api.call("GET", path)
          expect({ path, status: answer.status, body: answer.body }).toEqual({ path, status: 500, body: { code: 500, msg: "internal server error" } })
          expect(answer.headers["retry-after"]).toBeUndefined()
        }
      }).pipe(Effect.provide(quiet)))
  })
})

/** A TCP relay on the loopback to PostgreSQL that can be shut (every connection cut, new ones refused) and opened again. */
const relayTo = async (target: URL) => {
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname)
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
      socket.on("error", () => {
        client.destroy()
        upstream.destroy()
      })
    }
    client.pipe(upstream).pipe(client)
  })
  const listen = (port: number) => new Promise<number>((resolve) => server.listen(port, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)))
  const port = await listen(0)
  return {
    port,
    shut: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        for (const socket of sockets) socket.destroy()
      }),
    open: () => listen(port).then(() => undefined)
  }
}

describe.skipIf(pgUrl === undefined)(`a PostgreSQL that goes away${pgSkipReason("store-outage")}`, () => {
  const dir = mkdtempSync(join(tmpdir(), "mediagate-store-outage-"))
  const cleanups: Array<() => Promise<void>> = []
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup()
    rmSync(dir, { recursive: true, force: true })
  })

  it("submit, query and the rest answer 503 with Retry-After while it is away; what was accepted is there when it is back", { timeout: 30_000 }, async () => {
    const db = await freshDatabase(pgUrl!, "store_outage")
    cleanups.push(db.drop)
    const relay = await relayTo(new URL(db.url))
    cleanups.push(relay.shut)
    const url = Object.assign(new URL(db.url), { port: String(relay.port), hostname: "127.0.0.1" }).toString()
    const backends = SqlBackends.make({ publicUrl: "http://127.0.0.1:1", databaseUrl: url, mediaDir: join(dir, "media") })
    // The account of `apiKey`, with credits to submit with.
    const seeded = Effect.gen(function*() {
      const { id } = yield* Effect.flatMap(SqlAccounts.SqlAccountsService, (accounts) =>
        accounts.ensure({
          id: Ids.AccountId.make("acct_outage"),
          name: "outage",
          apiKey: Redacted.make(apiKey),
          keyLabel: "test",
          webhookSecret: Redacted.make("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
          now: 0
        }))
      yield* Effect.flatMap(Ledger.Ledger, (ledger) => ledger.credit({ id: "credits", accountId: id, amount: 1_000_000_000, at: 0, note: null }))
    })
    await Effect.runPromise(seeded.pipe(Effect.provide(Layer.merge(backends.accounts, backends.ledger))))
    const api = await MediagateHttp.makeWebHandler(
      Deployment.services({ simulatorProfile: "demo", allowPrivateUrls: true, backends }).pipe(Layer.provide(quiet))
    )
    cleanups.push(api.dispose)
    const call = async (method: string, path: string, body?: unknown) => {
      const response = await api.handler(
        new Request(`http://127.0.0.1${path}`, {
          method,
          headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) })
        }),
        { remoteAddress: "127.0.0.1" }
      )
      return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.json() as any }
    }

    const accepted: Array<string> = []
    for (let i = 0; i < 3; i++) {
      const submitted = await call("POST", "/api/v1/task/submit", { ...submitBody, input: { prompt: `before ${i}` } })
      expect(submitted.status).toBe(200)
      accepted.push(submitted.body.data.taskId)
    }

    await relay.shut()
    for (const [method, path, body] of [
      ["POST", "/api/v1/task/submit", submitBody],
      ["GET", `/api/v1/task/${accepted[0]}`],
      ["GET", "/api/v1/tasks"],
      ["GET", "/api/v1/account"],
      ["POST", `/api/v1/task/${accepted[1]}/cancel`]
    ] as const) {
      const answer = await call(method, path, body)
      expect({ method, path, status: answer.status, body: answer.body }).toEqual({
        method,
        path,
        status: 503,
        body: { code: 503, msg: "the database is unavailable; try again later" }
      })
      expect(answer.headers["retry-after"]).toMatch(/^[1-9][0-9]*$/)
    }

    await relay.open()
    // The pool connects again on the next request; every task accepted before is there, and nothing else.
    const listed = await call("GET", "/api/v1/tasks?limit=100")
    expect(listed.status).toBe(200)
    expect(listed.body.data.tasks.map((task: { taskId: string }) => task.taskId).sort()).toEqual([...accepted].sort())
    for (const id of accepted) expect((await call("GET", `/api/v1/task/${id}`)).status).toBe(200)
    expect((await call("POST", "/api/v1/task/submit", submitBody)).status).toBe(200)
  })
})
