/**
 * The admin API over the SQL backends the standalone server runs on (`SqlBackends.make`:
 * SQLite, and PostgreSQL when MEDIAGATE_TEST_PG_URL is set), on a real loopback server: an
 * account made through the API submits, its task and its key are found across accounts,
 * credits are added once per entry id, a scoped key is made and revoked, an admin key made
 * and revoked, and every action is in the audit log the database keeps.
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { MediagateHttp } from "@mediagate/http"
import { Deployment } from "@mediagate/server"
import { SqlBackends } from "@mediagate/server/sql"
import { freshPgDatabase, pgSkipReason } from "@mediagate/store-sql/testing"
import type { Scope } from "effect"
import { Effect, Layer, Option, Redacted, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { admin, adminActor, adminKey } from "./admin-support.js"
import { client } from "./support.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-admin-sql-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const pgUrl = process.env["MEDIAGATE_TEST_PG_URL"]
pgSkipReason("admin-sql")

/** The standalone composition over the SQL backends of `databaseUrl`, with the admin key given. */
const serverOn = (databaseUrl: Effect.Effect<string, never, Scope.Scope>) =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      const url = yield* databaseUrl
      const address = (yield* HttpServer.HttpServer).address
      const publicUrl = `http://127.0.0.1:${address._tag === "TcpAddress" ? address.port : 0}`
      return MediagateHttp.serve.pipe(
        Layer.provide(Deployment.services({
          simulatorProfile: "instant",
          backends: SqlBackends.make({ publicUrl, databaseUrl: url, mediaDir: join(dir, "media") }),
          adminKey: Option.some(Redacted.make(adminKey))
        }))
      )
    })
  ).pipe(Layer.provideMerge(NodeHttpServer.layerTest))

const databases: ReadonlyArray<readonly [string, Effect.Effect<string, never, Scope.Scope>]> = [
  ["sqlite", Effect.sync(() => `sqlite:${join(mkdtempSync(join(dir, "db-")), "mediagate.db")}`)],
  ...(pgUrl === undefined ? [] : [["postgres", freshPgDatabase(pgUrl, "admin_sql")] as const])
]

for (const [name, database] of databases) {
  describe(`admin API on ${name}`, () => {
    it.effect("accounts, credits, tasks across accounts, keys, admin keys and the audit log", () =>
      Effect.gen(function*() {
        const created = (yield* admin.call("POST", "/api/v1/admin/accounts", { body: { name: "Acme" } })).body.data
        const accountId: string = created.account.id
        const firstKey: string = created.account.keys[0].id
        const credit = { amount_usd: "5", entry_id: `acme-${name}` }
        expect((yield* admin.call("POST", `/api/v1/admin/accounts/${accountId}/credits`, { body: credit })).body.data)
          .toMatchObject({ already_credited: false, balance_micro_usd: 5_000_000 })
        expect((yield* admin.call("POST", `/api/v1/admin/accounts/${accountId}/credits`, { body: credit })).body.data)
          .toMatchObject({ already_credited: true, balance_micro_usd: 5_000_000 })

        const customer = client(created.key)
        const taskId = yield* customer.submitId({ model: "alpha-image-2/text-to-image", input: { prompt: "on sql" } })
        for (let i = 0; i < 30 && (yield* customer.query(taskId)).body.data.status !== "SUCCESS"; i++) yield* TestClock.adjust("1 second")
        const listed = (yield* admin.call("GET", `/api/v1/admin/tasks?account=${accountId}`)).body.data.tasks
        expect(listed).toEqual([expect.objectContaining({ taskId, account_id: accountId, key_id: firstKey, status: "SUCCESS" })])
        const detail = (yield* admin.call("GET", `/api/v1/admin/tasks/${taskId}`)).body.data
        // Both at one instant of the TestClock: their order is the store's.
        expect(detail.ledger.map((entry: { kind: string }) => entry.kind).sort()).toEqual(["charge", "reserve"])
        const credits = (yield* admin.call("GET", `/api/v1/admin/accounts/${accountId}/credits`)).body.data
        expect(credits.balance_micro_usd).toBe(5_000_000 - listed[0].price_micro_usd)

        const scoped = (yield* admin.call("POST", `/api/v1/admin/accounts/${accountId}/keys`, {
          body: { models: ["alpha-*"], monthly_cap_usd: "1.5", rate_limit: "10/s" }
        })).body.data
        const shown = (yield* admin.call("GET", `/api/v1/admin/accounts/${accountId}`)).body.data
        expect(shown.keys.find((key: { id: string }) => key.id === scoped.info.id).scope)
          .toEqual({ models: ["alpha-*"], monthly_cap_micro_usd: 1_500_000, rate_limit: { per_second: 10, burst: 10 } })
        expect((yield* client(scoped.key).call("GET", "/api/v1/account")).status).toBe(200)
        expect((yield* admin.call("POST", `/api/v1/admin/keys/${scoped.info.id}/revoke`)).body.data.state).toBe("revoked")
        expect((yield* client(scoped.key).call("GET", "/api/v1/account")).status).toBe(401)

        const made = (yield* admin.call("POST", "/api/v1/admin/admin-keys", { body: { label: "ops" } })).body.data
        expect((yield* client(made.key).call("GET", "/api/v1/admin/accounts")).status).toBe(200)
        yield* admin.call("POST", `/api/v1/admin/admin-keys/${made.info.id}/revoke`)
        expect((yield* client(made.key).call("GET", "/api/v1/admin/accounts")).status).toBe(401)

        const audit = (yield* admin.call("GET", "/api/v1/admin/audit")).body.data.entries
        expect(audit.map((entry: { action: string }) => entry.action)).toEqual([
          "admin_key.revoke",
          "admin_key.create",
          "key.revoke",
          "key.create",
          "credits.add",
          "credits.add",
          "account.create"
        ])
        expect(new Set(audit.map((entry: { actor: string }) => entry.actor))).toEqual(new Set([adminActor]))
        expect(audit[4].after).toMatchObject({ already_credited: true, balance_micro_usd: 5_000_000 })
      }).pipe(Effect.provide(serverOn(database))), 60_000)
  })
}
