/**
 * Usage reports, the overview and the providers page over HTTP, on a loopback server under the
 * TestClock: the customer's report of its own tasks (JSON and CSV, grouped by day, model and
 * key) equals what its account's ledger says; the admin's covers every account or one; bad
 * parameters are 400 in the envelope, naming the rule; the overview draws from real tasks; a
 * customer key is 403 on the admin forms; files uploaded through `POST /files` count by day, key
 * and (in the null group) model, and still count once deleted.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { apiKey, client, otherApiKey, testCredits, testServer } from "./support.js"

const adminKey = "mga_usage_admin_key_0123456789abcdefghij"
const api = client()
const other = client(otherApiKey)
const admin = client(adminKey)
const alpha = "alpha-image-2/text-to-image"
const dream = "dream-4"
const terminal = ["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"]

/** Real tasks of both accounts: successes, failures and a cancellation; answers the test account's. */
const runTasks = Effect.gen(function*() {
  const mine = [
    yield* api.submitId({ model: alpha, input: { prompt: "a kite" } }),
    yield* api.submitId({ model: alpha, input: { prompt: "a kite [sim:fail]" } }),
    yield* api.submitId({ model: dream, input: { prompt: "a boat", n: 2 } }),
    yield* api.submitId({ model: dream, input: { prompt: "a boat, cancelled" } })
  ]
  expect((yield* api.call("POST", `/api/v1/task/${mine[3]}/cancel`)).status).toBe(200)
  const theirs = [yield* other.submitId({ model: alpha, input: { prompt: "a hill" } })]
  const ids = [...mine, ...theirs]
  for (let step = 0; step < 300; step++) {
    const statuses = yield* Effect.forEach(ids, (id) =>
      Effect.map((id === theirs[0] ? other : api).call("GET", `/api/v1/task/${id}`), (answer) => answer.body.data.status as string))
    if (statuses.every((status) => terminal.includes(status))) return { mine, theirs }
    yield* TestClock.adjust("1 second")
  }
  return yield* Effect.dieMessage("the tasks did not end")
})

const server = testServer({ profile: "demo", adminKey })

const png = new Uint8Array(readFileSync(join(import.meta.dirname, "../packages/media/test/fixtures/image-64x48.png")))

/** Uploads `png` with `key` through `POST /api/v1/files`; answers the upload's fileId. */
const upload = (key: string) =>
  Effect.gen(function*() {
    const request = HttpClientRequest.post("/api/v1/files").pipe(HttpClientRequest.bodyUint8Array(png, "image/png"), HttpClientRequest.bearerToken(key))
    const answer = JSON.parse(yield* (yield* HttpClient.execute(request)).text)
    expect(answer.code).toBe(0)
    return answer.data.fileId as string
  })

describe("usage over HTTP", () => {
  it.effect("the customer's report equals its ledger: spend = charges, balance = credits - spend; groups sum to totals; CSV the same", () =>
    Effect.gen(function*() {
      yield* runTasks
      const account = (yield* api.call("GET", "/api/v1/account")).body.data
      const entries = account.entries as Array<{ kind: string; amount_micro_usd: number; held_micro_usd: number }>
      const sum = (kind: string, field: "amount_micro_usd" | "held_micro_usd") =>
        entries.filter((entry) => entry.kind === kind).reduce((total, entry) => total + entry[field], 0)
      for (const groupBy of ["day", "model", "key"]) {
        const answer = yield* api.call("GET", `/api/v1/usage?group_by=${groupBy}`)
        expect(answer.status).toBe(200)
        expect(answer.body.code).toBe(0)
        const report = answer.body.data
        expect(report.account_id).toBe("acct_test")
        expect(report.group_by).toBe(groupBy)
        // The current UTC month by default (the TestClock starts at the epoch).
        expect([report.from, report.to]).toEqual(["1970-01-01T00:00:00.000Z", "1970-02-01T00:00:00.000Z"])
        const totals = report.totals
        expect(totals.spend_micro_usd).toBe(-sum("charge", "amount_micro_usd"))
        expect(totals.refunds_micro_usd).toBe(-sum("release", "held_micro_usd"))
        expect(totals.credits_micro_usd).toBe(testCredits)
        expect(account.balance_micro_usd).toBe(totals.credits_micro_usd - totals.spend_micro_usd)
        expect(totals.tasks).toMatchObject({ total: 4, SUCCESS: 2, FAILURE: 1, CANCELLED: 1 })
        expect([totals.charges, totals.releases]).toEqual([2, 2])
        for (const field of ["spend_micro_usd", "refunds_micro_usd", "charges", "releases"]) {
          expect(report.groups.reduce((total: number, group: any) => total + group[field], 0)).toBe(totals[field])
        }
        expect(report.groups.reduce((total: number, group: any) => total + group.tasks.total, 0)).toBe(4)
        if (groupBy === "day") expect(report.groups.map((group: any) => group.group)).toEqual(["1970-01-01"])
        if (groupBy === "model") expect(report.groups.map((group: any) => group.group)).toEqual([alpha, dream])
        // The test account's one key (the memory accounts name it after the account).
        if (groupBy === "key") expect(report.groups.map((group: any) => group.group)).toEqual(["key_acct_test"])

        const csv = yield* api.call("GET", `/api/v1/usage?group_by=${groupBy}`, { headers: { accept: "text/csv" }, text: true })
        expect(csv.status).toBe(200)
        expect(csv.headers["content-type"]).toMatch(/^text\/csv/)
        const rows = csv.text.trimEnd().split("\r\n").map((line) => line.split(","))
        const header = rows[0]!
        expect(header.slice(0, 2)).toEqual(["group", "tasks_total"])
        const total = Object.fromEntries(header.map((column, i) => [column, rows.at(-1)![i]]))
        expect(total).toMatchObject({
          group: "total",
          tasks_total: "4",
          tasks_success: "2",
          spend_micro_usd: String(totals.spend_micro_usd),
          refunds_micro_usd: String(totals.refunds_micro_usd),
          credits_micro_usd: String(testCredits)
        })
        expect(rows.slice(1, -1).map((row) => row[0])).toEqual(report.groups.map((group: any) => group.group ?? ""))
      }
      // A window without them: nothing.
      const before = yield* api.call("GET", "/api/v1/usage?from=1969-01-01&to=1969-12-31")
      expect(before.body.data.groups).toEqual([])
      expect(before.body.data.totals.tasks.total).toBe(0)
    }).pipe(Effect.provide(server)), 60_000)

  it.effect("uploads count by day, by key and in the model report's null group; deleted, they still count", () =>
    Effect.gen(function*() {
      yield* runTasks
      const mine = [yield* upload(apiKey), yield* upload(apiKey)]
      yield* upload(otherApiKey)
      const reports = () =>
        Effect.forEach(["day", "model", "key"], (groupBy) =>
          Effect.map(api.call("GET", `/api/v1/usage?group_by=${groupBy}`), (answer) => answer.body.data))
      const [byDay, byModel, byKey] = yield* reports()
      for (const report of [byDay, byModel, byKey]) {
        expect([report.totals.uploads, report.totals.upload_bytes]).toEqual([2, 2 * png.length])
        expect(report.totals.tasks.total).toBe(4)
      }
      expect(byDay.groups.map((group: any) => [group.group, group.uploads, group.upload_bytes])).toEqual([["1970-01-01", 2, 2 * png.length]])
      expect(byKey.groups.map((group: any) => [group.group, group.uploads])).toEqual([["key_acct_test", 2]])
      // An upload has no model: the uploads are in a group of their own, with no task.
      expect(byModel.groups.map((group: any) => [group.group, group.tasks.total, group.uploads])).toEqual([[alpha, 2, 0], [dream, 2, 0], [null, 0, 2]])
      const csv = yield* api.call("GET", "/api/v1/usage?group_by=model", { headers: { accept: "text/csv" }, text: true })
      const [header, ...rows] = csv.text.trimEnd().split("\r\n").map((line) => line.split(","))
      const column = (name: string) => rows.map((row) => row[header!.indexOf(name)])
      expect([column("group"), column("uploads"), column("upload_bytes")]).toEqual([
        [alpha, dream, "", "total"],
        ["0", "0", "2", "2"],
        ["0", "0", String(2 * png.length), String(2 * png.length)]
      ])
      expect((yield* admin.call("GET", "/api/v1/admin/usage")).body.data.totals).toMatchObject({ uploads: 3, upload_bytes: 3 * png.length })

      // Deleted: gone for the client, still in the window's usage.
      expect((yield* api.call("DELETE", `/api/v1/files/${mine[0]}`)).status).toBe(200)
      expect((yield* api.call("GET", `/api/v1/files/${mine[0]}`)).status).toBe(404)
      expect(yield* reports()).toEqual([byDay, byModel, byKey])
      expect((yield* admin.call("GET", "/api/v1/admin/usage")).body.data.totals).toMatchObject({ uploads: 3, upload_bytes: 3 * png.length })
    }).pipe(Effect.provide(server)), 60_000)

  it.effect("400 in the envelope for a wrong parameter, naming it", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, string]> = [
        ["from=yesterday", "from must be an ISO 8601 date (2026-11-01) or time with a time zone (2026-11-01T12:00:00Z)"],
        ["to=2026-02-30", "to must be an ISO 8601 date (2026-11-01) or time with a time zone (2026-11-01T12:00:00Z)"],
        ["from=2026-11-01T10:00:00", "from must be an ISO 8601 date (2026-11-01) or time with a time zone (2026-11-01T12:00:00Z)"],
        ["group_by=week", "group_by must be one of day, model, key"],
        ["group_by=day&group_by=model", "group_by may be given once"],
        ["from=2026-11-02&to=2026-11-01", "from must be before to"],
        ["from=2026-11-01&to=2026-11-01T00:00:00Z", "from must be before to"],
        ["from=2025-01-01&to=2026-11-01", "from and to must be at most 366 days apart"],
        ["account=acct_test", "account is not a supported parameter"],
        ["limit=5", "limit is not a supported parameter"]
      ]
      for (const [query, msg] of cases) {
        const answer = yield* api.call("GET", `/api/v1/usage?${query}`)
        expect([query, answer.status, answer.body]).toEqual([query, 400, { code: 400, msg }])
      }
      // A date as `to` includes that day; a time excludes itself.
      const day = yield* api.call("GET", "/api/v1/usage?from=2026-11-01&to=2026-11-30")
      expect([day.body.data.from, day.body.data.to]).toEqual(["2026-11-01T00:00:00.000Z", "2026-12-01T00:00:00.000Z"])
      const onlyTo = yield* api.call("GET", "/api/v1/usage?to=2026-11-15T12:00:00%2B02:00")
      expect([onlyTo.body.data.from, onlyTo.body.data.to]).toEqual(["2026-11-01T00:00:00.000Z", "2026-11-15T10:00:00.000Z"])
      const admin400 = yield* admin.call("GET", "/api/v1/admin/usage?group_by=hour")
      expect([admin400.status, admin400.body]).toEqual([400, { code: 400, msg: "group_by must be one of day, model, key" }])
    }).pipe(Effect.provide(server)))

  it.effect("the admin's report covers every account or one; an unknown account is 404; a customer key is 403", () =>
    Effect.gen(function*() {
      yield* runTasks
      const all = (yield* admin.call("GET", "/api/v1/admin/usage?group_by=model")).body.data
      expect(all.account_id).toBeNull()
      expect(all.totals.tasks).toMatchObject({ total: 5, SUCCESS: 3 })
      expect(all.totals.credits_micro_usd).toBe(2 * testCredits)
      const one = yield* admin.call("GET", "/api/v1/admin/usage?group_by=model&account=acct_test")
      expect(one.status).toBe(200)
      expect(one.body.data).toEqual((yield* api.call("GET", "/api/v1/usage?group_by=model")).body.data)
      const otherOne = (yield* admin.call("GET", "/api/v1/admin/usage?account=acct_other")).body.data
      expect(otherOne.totals.spend_micro_usd + one.body.data.totals.spend_micro_usd).toBe(all.totals.spend_micro_usd)
      const csv = yield* admin.call("GET", "/api/v1/admin/usage?group_by=day", { headers: { accept: "application/json;q=0.5, text/csv" }, text: true })
      expect(csv.headers["content-type"]).toMatch(/^text\/csv/)
      expect(csv.text.split("\r\n").at(-2)!.split(",")[1]).toBe("5")
      const unknown = yield* admin.call("GET", "/api/v1/admin/usage?account=acct_nobody")
      expect([unknown.status, unknown.body]).toEqual([404, { code: 404, msg: "no account acct_nobody" }])
      for (const path of ["/api/v1/admin/usage", "/api/v1/admin/stats", "/api/v1/admin/providers"]) {
        const refused = yield* api.call("GET", path)
        expect([path, refused.status, refused.body.code]).toEqual([path, 403, 403])
      }
      // An admin key is no customer key.
      expect((yield* admin.call("GET", "/api/v1/usage")).status).toBe(403)
      expect((yield* client(null).call("GET", "/api/v1/usage")).status).toBe(401)
      expect(apiKey).not.toBe(adminKey)
    }).pipe(Effect.provide(server)), 60_000)

  it.effect("the overview's figures come from real tasks; the providers page shows the simulator with its running tasks", () =>
    Effect.gen(function*() {
      const { mine, theirs } = yield* runTasks
      // Every attempt of these tasks, as their owners see them.
      const attempts = [
        ...(yield* Effect.forEach(mine, (id) => Effect.map(api.call("GET", `/api/v1/task/${id}`), (answer) => answer.body.data.attempts as Array<any>))),
        ...(yield* Effect.forEach(theirs, (id) => Effect.map(other.call("GET", `/api/v1/task/${id}`), (answer) => answer.body.data.attempts as Array<any>)))
      ].flat()
      const ended = attempts.filter((attempt) => attempt.ended_at !== null)
      const failed = ended.filter((attempt) => attempt.outcome === "failed" || attempt.outcome === "timed_out").length
      expect(failed).toBe(1)
      const stats = yield* admin.call("GET", "/api/v1/admin/stats")
      expect(stats.status).toBe(200)
      const data = stats.body.data
      expect(data.tasks_per_minute).toHaveLength(60)
      const counted = data.tasks_per_minute.reduce((sum: number, minute: any) => sum + minute.SUCCESS + minute.FAILURE + minute.CANCELLED, 0)
      expect(counted).toBe(5)
      expect(data.tasks_per_minute[0].minute < data.tasks_per_minute[59].minute).toBe(true)
      const models = data.time_to_result.map((row: any) => row.model)
      expect(models).toEqual([alpha, dream])
      for (const row of data.time_to_result) {
        expect(row.p50_ms).toBeGreaterThan(0)
        expect(row.p95_ms).toBeGreaterThanOrEqual(row.p50_ms)
      }
      // Time to result is what the tasks say: updated_at - created_at of the one dream-4 success.
      const boat = (yield* api.call("GET", `/api/v1/task/${mine[2]}`)).body.data
      const took = Date.parse(boat.updated_at) - Date.parse(boat.created_at)
      expect(data.time_to_result.find((row: any) => row.model === dream)).toEqual({ model: dream, count: 1, p50_ms: took, p95_ms: took })
      expect(data.failures).toEqual([{ status: "FAILURE", failure_reason: null, provider: null, count: 1 }])
      expect(data.spend_per_day).toHaveLength(30)
      const usage = (yield* admin.call("GET", "/api/v1/admin/usage")).body.data
      expect(data.spend_per_day.at(-1)).toEqual({ day: "1970-01-01", spend_micro_usd: usage.totals.spend_micro_usd, charges: 3 })

      // A slow task runs while the page is read.
      const slow = yield* api.submitId({ model: dream, input: { prompt: "a slow boat [sim:slow]" } })
      for (let step = 0; step < 20; step++) {
        const status = (yield* api.call("GET", `/api/v1/task/${slow}`)).body.data.status
        if (status === "PROCESSING" || status === "SUBMITTED") break
        yield* TestClock.adjust("1 second")
      }
      const providers = yield* admin.call("GET", "/api/v1/admin/providers")
      expect(providers.status).toBe(200)
      expect(providers.body.data.window_minutes).toBe(15)
      const [simulator, ...rest] = providers.body.data.providers
      expect(rest).toEqual([])
      expect(simulator).toMatchObject({ name: "upstream", provider: null, circuit: { state: "closed", until: null }, running: 1, limit: 500 })
      expect(simulator.attempts).toBe(ended.length)
      expect(simulator.failed).toBe(1)
      expect(simulator.error_rate).toBe(1 / ended.length)
      expect(simulator.latency_p95_ms).toBeGreaterThanOrEqual(simulator.latency_p50_ms)
    }).pipe(Effect.provide(server)), 60_000)
})
