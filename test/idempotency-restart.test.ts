/**
 * Idempotency keys are durable in the standalone server: on SQLite and (when
 * MEDIAGATE_TEST_PG_URL is set) PostgreSQL, a submit with an Idempotency-Key, then the
 * server killed with SIGKILL and started again on the same database, and the same key and
 * body answer the same task; another body is still 422.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freshPgDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { Effect, Exit, Scope } from "effect"
import { api, killAll, startServer, stop } from "./standalone-process.js"
import { clientAt } from "./support.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-idempotency-restart-"))
const key = "mg_idempotency_restart_key_0123456789"
/** Keeps the PostgreSQL database until the suite ends (it is dropped with this scope). */
const scope = Effect.runSync(Scope.make())
afterAll(async () => {
  killAll()
  await Effect.runPromise(Scope.close(scope, Exit.void))
  rmSync(dir, { recursive: true, force: true })
})

const body = { model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse at dusk" } }
const submit = (port: number, idempotencyKey: string, payload: unknown = body) =>
  clientAt(port, key).call("POST", "/api/v1/task/submit", { body: payload, headers: { "idempotency-key": idempotencyKey } })

const databases: ReadonlyArray<readonly [string, () => Promise<string>]> = [
  ["SQLite", async () => `sqlite:${join(dir, "mediagate.db")}`],
  ...(pgUrl === undefined ? [] : [["PostgreSQL", () => Effect.runPromise(Scope.extend(freshPgDatabase(pgUrl!, "idem_restart"), scope))] as const])
]

pgSkipReason("idempotency-restart")

describe("Idempotency-Key across a restart of the standalone server", () => {
  for (const [name, database] of databases) {
    it(`${name}: the same key and body answer the same task after a SIGKILL and a new start`, async () => {
      const url = await database()
      const env = { MEDIAGATE_API_KEY: key, MEDIAGATE_DATABASE_URL: url, MEDIAGATE_MEDIA_DIR: join(dir, `media-${name}`), MEDIAGATE_SIMULATOR_PROFILE: "instant" }
      const first = await startServer(env)
      const accepted = await submit(first.port, "order-1234")
      expect(accepted.status).toBe(200)
      const taskId = accepted.body.data.taskId as string
      await stop(first, "SIGKILL")

      const second = await startServer(env)
      const again = await submit(second.port, "order-1234")
      expect(again).toEqual({ status: 200, body: accepted.body })
      const other = await submit(second.port, "order-1234", { ...body, input: { prompt: "another prompt" } })
      expect(other.status).toBe(422)
      expect(other.body.code).toBe(422)
      const list = await api(second.port, key, "/api/v1/tasks")
      expect(list.body.data.tasks.map((task: { taskId: string }) => task.taskId)).toEqual([taskId])
      await stop(second, "SIGTERM")
    }, 120_000)
  }
})
