/**
 * The admin API's tasks across accounts and its audit log, over a real loopback server with
 * the TestClock and a callback receiver on loopback: the list and its filters, a task's detail
 * (attempts, callbacks with each delivery, ledger entries), cancel and redeliver by the owner's
 * rules; and every action of the admin API written to the audit log with the admin key, the
 * time and the state before and after, read back through the API.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { admin, adminActor, adminKey, documented, expectError } from "./admin-support.js"
import { client, otherApiKey, testServer, until } from "./support.js"

const received: Array<string> = []
let base = ""
const receiver = Http.createServer((request, response) => {
  request.resume()
  request.on("end", () => {
    received.push(request.url ?? "/")
    response.writeHead(204).end()
  })
})
beforeAll(() =>
  new Promise<void>((resolve) =>
    receiver.listen(0, "127.0.0.1", () => {
      base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`
      resolve()
    })
  ))
afterAll(() => {
  receiver.closeAllConnections()
  return new Promise<void>((resolve) => receiver.close(() => resolve()))
})

const server = testServer({ adminKey, profile: "demo", allowPrivateUrls: true })
const customer = client()
const other = client(otherApiKey)
const unknownTask = "0190c8a4-0000-7000-8000-000000000000"

const statusOf = (taskId: string) => Effect.map(admin.call("GET", `/api/v1/admin/tasks/${taskId}`), (answer) => answer.body.data.task.status)

/** Runs the TestClock until the task has ended. */
const ended = (taskId: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 30 && ["PENDING", "PROCESSING", "SUBMITTED"].includes(yield* statusOf(taskId)); i++) yield* TestClock.adjust("1 second")
    return yield* statusOf(taskId)
  })


const list = (query = "") => admin.call("GET", `/api/v1/admin/tasks${query}`).pipe(Effect.flatMap(documented("/api/v1/admin/tasks", "get")))
const ids = (answer: { readonly body: any }) => answer.body.data.tasks.map((task: { taskId: string }) => task.taskId)

describe("admin API: tasks", () => {
  it.effect("every account's tasks, newest first, filtered by account, model, status and time; pages by cursor; 400 for a bad filter", () =>
    Effect.gen(function*() {
      const mine = yield* customer.submitId({ model: "alpha-image-2/text-to-image", input: { prompt: "mine" } })
      yield* TestClock.adjust("10 millis")
      const theirs = yield* other.submitId({ model: "beta-imagine/text-to-video", input: { prompt: "theirs" } })
      // Cancelled by its owner at once, so that its status does not depend on the simulator's pace.
      expect((yield* other.call("POST", `/api/v1/task/${theirs}/cancel`)).status).toBe(200)
      expect(yield* ended(mine)).toBe("SUCCESS")

      const all = yield* list()
      expect(ids(all)).toEqual([theirs, mine])
      expect(all.body.data.tasks[1]).toMatchObject({ taskId: mine, account_id: "acct_test", status: "SUCCESS", callback_url: null })
      expect(all.body.data.tasks[0]).toMatchObject({ taskId: theirs, account_id: "acct_other" })
      expect(ids(yield* list("?account=acct_other"))).toEqual([theirs])
      expect(ids(yield* list("?model=alpha-image-2/text-to-image"))).toEqual([mine])
      expect(ids(yield* list("?status=SUCCESS"))).toEqual([mine])
      expect(ids(yield* list("?status=CANCELLED"))).toEqual([theirs])
      expect(ids(yield* list("?status=SUCCESS,CANCELLED"))).toEqual([theirs, mine])
      expect(ids(yield* list("?created_after=1970-01-01T00:00:00.005Z"))).toEqual([theirs])
      expect(ids(yield* list("?created_before=1970-01-01T00:00:00.005Z&account=acct_test"))).toEqual([mine])
      expect(ids(yield* list("?provider=nowhere"))).toEqual([])
      const first = yield* list("?limit=1")
      expect(ids(first)).toEqual([theirs])
      expect(ids(yield* list(`?limit=1&cursor=${first.body.data.next_cursor}`))).toEqual([mine])

      expectError(yield* list("?status=DONE"), 400, /^status must be one or more of PENDING, /)
      expectError(yield* list("?limit=101"), 400, "limit must be an integer between 1 and 100")
      expectError(yield* list("?cursor=abc"), 400, "cursor must be a next_cursor from a previous page")
      expectError(yield* list("?account="), 400, "account must be 1 to 200 characters")
      expectError(yield* list("?owner=acct_test"), 400, "owner is not a supported parameter")
      expectError(yield* list("?account=a&account=b"), 400, "account may be given once")
    }).pipe(Effect.provide(server)))

  it.effect("a task's detail: attempts, callbacks with each delivery, ledger entries; redeliver sends the callback again; 404 and 409", () =>
    Effect.gen(function*() {
      const taskId = yield* customer.submitId({ model: "alpha-image-2/text-to-image", input: { prompt: "called back" }, callBackUrl: `${base}/detail` })
      expect(yield* ended(taskId)).toBe("SUCCESS")
      yield* until(Effect.sync(() => received.filter((path) => path === "/detail")), (got) => got.length === 1)
      const detail = yield* until(
        admin.call("GET", `/api/v1/admin/tasks/${taskId}`),
        (answer) => answer.body.data.callbacks[0]?.status === "delivered"
      ).pipe(Effect.flatMap(documented("/api/v1/admin/tasks/{taskId}", "get")))
      const { callbacks, ledger, task } = detail.body.data
      expect(task).toMatchObject({ taskId, account_id: "acct_test", status: "SUCCESS", callback_url: `${base}/detail` })
      expect(task.attempts).toEqual([expect.objectContaining({ attempt: 1, outcome: "succeeded" })])
      expect(callbacks).toEqual([expect.objectContaining({ url: `${base}/detail`, status: "delivered", attempts: [expect.objectContaining({ attempt: 1, status_code: 204 })] })])
      // Possibly at one instant of the TestClock: their order is the store's.
      expect(ledger.map((entry: { kind: string }) => entry.kind).sort()).toEqual(["charge", "reserve"])
      // The customer's own view agrees.
      expect((yield* customer.query(taskId)).body.data.status).toBe("SUCCESS")

      const redelivered = yield* admin.call("POST", `/api/v1/admin/tasks/${taskId}/callbacks/redeliver`).pipe(
        Effect.flatMap(documented("/api/v1/admin/tasks/{taskId}/callbacks/redeliver", "post"))
      )
      expect(redelivered.body.data.callbacks.map((callback: { id: string }) => callback.id)).toEqual([callbacks[0].id])
      yield* until(Effect.sync(() => received.filter((path) => path === "/detail")), (got) => got.length === 2)

      // A task with no callback, and one that has not ended: 409 by the owner's rules.
      const quiet = yield* other.submitId({ model: "alpha-image-2/text-to-image", input: { prompt: "no callback" } })
      expectError(yield* admin.call("POST", `/api/v1/admin/tasks/${quiet}/callbacks/redeliver`), 409, /./)
      expectError(yield* admin.call("GET", `/api/v1/admin/tasks/${unknownTask}`).pipe(Effect.flatMap(documented("/api/v1/admin/tasks/{taskId}", "get"))), 404, `no task ${unknownTask}`)
      expectError(yield* admin.call("POST", `/api/v1/admin/tasks/${unknownTask}/callbacks/redeliver`), 404, `no task ${unknownTask}`)
      // Any case of the id, as the customer's paths take it.
      expect((yield* admin.call("GET", `/api/v1/admin/tasks/${taskId.toUpperCase()}`)).status).toBe(200)
    }).pipe(Effect.provide(server)))

  it.effect("cancel: a task that has not ended is CANCELLED for its owner; an ended one is 409; an unknown one 404", () =>
    Effect.gen(function*() {
      const taskId = yield* other.submitId({ model: "alpha-image-2/text-to-image", input: { prompt: "to cancel" } })
      const cancelled = yield* admin.call("POST", `/api/v1/admin/tasks/${taskId}/cancel`).pipe(Effect.flatMap(documented("/api/v1/admin/tasks/{taskId}/cancel", "post")))
      expect(cancelled.body.data).toMatchObject({ taskId, account_id: "acct_other", status: "CANCELLED" })
      expect((yield* other.query(taskId)).body.data.status).toBe("CANCELLED")
      // Its price went back to its owner.
      const credits = yield* admin.call("GET", "/api/v1/admin/accounts/acct_other/credits")
      expect(credits.body.data.reserved_micro_usd).toBe(0)
      expectError(yield* admin.call("POST", `/api/v1/admin/tasks/${taskId}/cancel`), 409, `task ${taskId} is CANCELLED: only a task that has not ended can be cancelled`)
      expectError(yield* admin.call("POST", `/api/v1/admin/tasks/${unknownTask}/cancel`), 404, `no task ${unknownTask}`)
    }).pipe(Effect.provide(server)))
})

describe("admin API: the audit log", () => {
  it.effect("every action is recorded with the admin key, the time, the target and its state before and after; filters by action and target", () =>
    Effect.gen(function*() {
      yield* TestClock.adjust("1 second")
      const at = new Date(1_000).toISOString()
      const created = (yield* admin.call("POST", "/api/v1/admin/accounts", { body: { name: "Audited" } })).body.data
      const accountId: string = created.account.id
      const key = (yield* admin.call("POST", `/api/v1/admin/accounts/${accountId}/keys`, { body: { label: "second", models: ["alpha-*"] } })).body.data.info
      yield* admin.call("POST", `/api/v1/admin/keys/${key.id}/revoke`)
      yield* admin.call("POST", `/api/v1/admin/accounts/${accountId}/secrets/rotate`, { body: { grace_seconds: 60 } })
      yield* admin.call("POST", `/api/v1/admin/accounts/${accountId}/credits`, { body: { amount_usd: "5", entry_id: "audited-topup" } })
      const adminCreated = (yield* admin.call("POST", "/api/v1/admin/admin-keys", { body: { label: "temp" } })).body.data.info
      yield* admin.call("POST", `/api/v1/admin/admin-keys/${adminCreated.id}/revoke`)
      const taskId = yield* client(created.key).submitId({ model: "alpha-image-2/text-to-image", input: { prompt: "x" }, callBackUrl: `${base}/audit` })
      // The new account has $5: enough for the task.
      yield* admin.call("POST", `/api/v1/admin/tasks/${taskId}/cancel`)
      yield* admin.call("POST", `/api/v1/admin/tasks/${taskId}/callbacks/redeliver`)

      const log = yield* admin.call("GET", "/api/v1/admin/audit").pipe(Effect.flatMap(documented("/api/v1/admin/audit", "get")))
      const entries: ReadonlyArray<any> = log.body.data.entries
      expect(entries.map((entry) => entry.action)).toEqual([
        "task.redeliver",
        "task.cancel",
        "admin_key.revoke",
        "admin_key.create",
        "credits.add",
        "secret.rotate",
        "key.revoke",
        "key.create",
        "account.create"
      ])
      for (const entry of entries) expect(entry).toMatchObject({ actor: adminActor, at })
      const byAction = Object.fromEntries(entries.map((entry) => [entry.action, entry]))
      expect(byAction["account.create"]).toMatchObject({ target: accountId, before: null, after: { id: accountId, name: "Audited" } })
      expect(byAction["key.create"]).toMatchObject({ target: key.id, before: null, after: { id: key.id, scope: { models: ["alpha-*"] } } })
      expect(byAction["key.revoke"]).toMatchObject({ target: key.id, before: { revoked_at: null }, after: { revoked_at: at } })
      expect(byAction["secret.rotate"]).toMatchObject({ target: accountId, before: { previous: null }, after: { previous: expect.any(String) } })
      expect(byAction["credits.add"]).toMatchObject({
        target: accountId,
        before: { balance_micro_usd: 0 },
        after: { balance_micro_usd: 5_000_000, entry_id: "audited-topup", amount_micro_usd: 5_000_000 }
      })
      expect(byAction["admin_key.create"]).toMatchObject({ target: adminCreated.id, before: null, after: { label: "temp", revoked_at: null } })
      expect(byAction["admin_key.revoke"]).toMatchObject({ target: adminCreated.id, before: { revoked_at: null }, after: { revoked_at: at } })
      expect(byAction["task.cancel"]).toMatchObject({ target: taskId, before: { status: expect.stringMatching(/^(PENDING|PROCESSING|SUBMITTED)$/) }, after: { status: "CANCELLED" } })
      expect(byAction["task.redeliver"]).toMatchObject({ target: taskId })
      // Never a key or a secret.
      expect(log.text).not.toContain(created.key)
      expect(log.text).not.toContain(created.webhook_secret)

      const credits = yield* admin.call("GET", `/api/v1/admin/audit?action=credits.add&target=${accountId}`)
      expect(credits.body.data.entries.map((entry: { action: string }) => entry.action)).toEqual(["credits.add"])
      expect((yield* admin.call("GET", `/api/v1/admin/audit?target=${accountId}`)).body.data.entries.map((entry: { action: string }) => entry.action))
        .toEqual(["credits.add", "secret.rotate", "account.create"])
      const page = yield* admin.call("GET", "/api/v1/admin/audit?limit=2")
      expect(page.body.data.entries.length).toBe(2)
      const next = yield* admin.call("GET", `/api/v1/admin/audit?limit=2&cursor=${encodeURIComponent(page.body.data.next_cursor)}`)
      expect(next.body.data.entries.map((entry: { action: string }) => entry.action)).toEqual(["admin_key.revoke", "admin_key.create"])
      expectError(yield* admin.call("GET", "/api/v1/admin/audit?action=key.delete"), 400, /^action must be one of account\.create, /)
      expectError(yield* admin.call("GET", "/api/v1/admin/audit?limit=0"), 400, "limit must be an integer between 1 and 100")
      // Reads are not recorded; a refused action is not either.
      yield* admin.call("POST", "/api/v1/admin/accounts/acct_nope/credits", { body: { amount_usd: "1" } })
      expect((yield* admin.call("GET", "/api/v1/admin/audit")).body.data.entries.length).toBe(9)
    }).pipe(Effect.provide(server)))
})
