/**
 * The admin API's accounts, keys and their scopes, signing secrets, credits and admin keys,
 * over a real loopback server with the TestClock: each endpoint's answer (checked against the
 * OpenAPI document), its 404s, 409s and 400s in the envelope, and what it changes for the
 * customer API (a new key works, a revoked one is 401, credits show on the account).
 */
import { describe, expect, it } from "@effect/vitest"
import { Ajv } from "ajv"
import { Effect, TestClock } from "effect"
import { admin, adminKey, documented, expectError } from "./admin-support.js"
import { apiKey, client, Raw, testCredits, testServer, webhookSecret } from "./support.js"

/** The TestClock's time when a test starts (1970-01-01): expiries before it are in the past. */
const now = 0
const server = testServer({ adminKey })

const post = (path: string, body: unknown) => admin.call("POST", path, { body })

describe("admin API: accounts", () => {
  it.effect("create, list and show: the new account's key works at once; its key and secret are shown only on creation", () =>
    Effect.gen(function*() {
      const created = yield* post("/api/v1/admin/accounts", { name: "  Acme  " }).pipe(Effect.flatMap(documented("/api/v1/admin/accounts", "post")))
      expect(created.status).toBe(200)
      const { account, key, webhook_secret } = created.body.data
      expect(key).toMatch(/^mg_[0-9A-Za-z]{38}$/)
      expect(webhook_secret).toMatch(/^whsec_/)
      expect(account).toMatchObject({
        name: "Acme",
        created_at: new Date(now).toISOString(),
        balance_micro_usd: 0,
        reserved_micro_usd: 0,
        available_micro_usd: 0,
        keys: [{ label: "first key", state: "active", hint: `${key.slice(0, 7)}...`, scope: { models: null, monthly_cap_micro_usd: null, rate_limit: null } }]
      })
      // The customer API takes the new key.
      const own = yield* client(key).call("GET", "/api/v1/account")
      expect(own.body.data).toMatchObject({ account_id: account.id, name: "Acme" })

      const listed = yield* admin.call("GET", "/api/v1/admin/accounts").pipe(Effect.flatMap(documented("/api/v1/admin/accounts", "get")))
      // Oldest first: all three were made at the same instant of the TestClock here.
      expect(listed.body.data.accounts.map((a: { id: string }) => a.id).sort()).toEqual(["acct_other", "acct_test", account.id].sort())
      expect(listed.body.data.accounts).toContainEqual(expect.objectContaining({ id: "acct_test", balance_micro_usd: testCredits }))
      expect(JSON.stringify(listed.body)).not.toContain(key)

      const shown = yield* admin.call("GET", `/api/v1/admin/accounts/${account.id}`).pipe(Effect.flatMap(documented("/api/v1/admin/accounts/{accountId}", "get")))
      expect(shown.body.data).toEqual(account)
      expectError(yield* admin.call("GET", "/api/v1/admin/accounts/acct_nope").pipe(Effect.flatMap(documented("/api/v1/admin/accounts/{accountId}", "get"))), 404, "no account acct_nope")
      // A long id is cut short in the message.
      expectError(yield* admin.call("GET", `/api/v1/admin/accounts/${"x".repeat(100)}`), 404, `no account ${"x".repeat(64)}…`)
    }).pipe(Effect.provide(server)))

  it.effect("a body that breaks a rule is 400 naming the field and the rule; nothing is created", () =>
    Effect.gen(function*() {
      const create = (body: unknown) => post("/api/v1/admin/accounts", body).pipe(Effect.flatMap(documented("/api/v1/admin/accounts", "post")))
      expectError(yield* create({}), 400, "name is required")
      expectError(yield* create({ name: "   " }), 400, "name must not be blank and at most 200 characters")
      expectError(yield* create({ name: "x".repeat(201) }), 400, "name must not be blank and at most 200 characters")
      expectError(yield* create({ name: 5 }), 400, "name must be a string")
      expectError(yield* create({ name: "a", plan: "gold" }), 400, "plan is not a supported field")
      expectError(yield* create([]), 400, "request body must be a JSON object")
      expectError(yield* post("/api/v1/admin/accounts", new Raw("{\"name\": ")), 400, "request body is not valid JSON")
      expectError(yield* post("/api/v1/admin/accounts", new Raw("{\"name\":\"a\"}", "text/plain")), 400, "Content-Type must be application/json")
      expect((yield* admin.call("GET", "/api/v1/admin/accounts")).body.data.accounts.length).toBe(2)
    }).pipe(Effect.provide(server)))
})

describe("admin API: keys", () => {
  it.effect("a key with a scope: shown with the account, refused by its rules, revoked at once", () =>
    Effect.gen(function*() {
      const created = yield* post("/api/v1/admin/accounts/acct_test/keys", {
        label: "ci",
        expires_at: "2099-01-01T00:00:00Z",
        models: ["alpha-*"],
        monthly_cap_usd: "50",
        rate_limit: "600/min"
      }).pipe(Effect.flatMap(documented("/api/v1/admin/accounts/{accountId}/keys", "post")))
      expect(created.status).toBe(200)
      const { info, key } = created.body.data
      expect(info).toMatchObject({
        account_id: "acct_test",
        label: "ci",
        state: "active",
        expires_at: "2099-01-01T00:00:00.000Z",
        revoked_at: null,
        scope: { models: ["alpha-*"], monthly_cap_micro_usd: 50_000_000, rate_limit: { per_second: 10, burst: 10 } }
      })
      const account = yield* admin.call("GET", "/api/v1/admin/accounts/acct_test")
      expect(account.body.data.keys).toContainEqual(info)

      const customer = client(key)
      expect((yield* customer.submit({ model: "alpha-image-2/text-to-image", input: { prompt: "a kite" } })).status).toBe(200)
      expect((yield* customer.submit({ model: "beta-imagine/text-to-video", input: { prompt: "a kite" } })).status).toBe(403)

      const revoked = yield* post(`/api/v1/admin/keys/${info.id}/revoke`, undefined).pipe(Effect.flatMap(documented("/api/v1/admin/keys/{keyId}/revoke", "post")))
      expect(revoked.body.data).toMatchObject({ id: info.id, state: "revoked", revoked_at: new Date(now).toISOString() })
      expectError(yield* customer.call("GET", "/api/v1/account"), 401, "unauthorized")
      // The account's other key goes on working.
      expect((yield* client(apiKey).call("GET", "/api/v1/account")).status).toBe(200)
      expectError(yield* post("/api/v1/admin/keys/key_nope/revoke", undefined), 404, "no key key_nope")
    }).pipe(Effect.provide(server)))

  it.effect("each rule of a key's terms is a 400 naming the field; an unknown account is 404", () =>
    Effect.gen(function*() {
      const create = (body: unknown, account = "acct_test") =>
        post(`/api/v1/admin/accounts/${account}/keys`, body).pipe(Effect.flatMap(documented("/api/v1/admin/accounts/{accountId}/keys", "post")))
      expectError(yield* create({ models: ["alpha-*", "bad pattern!"] }), 400, /^models: model pattern "bad pattern!" may hold only/)
      expectError(yield* create({ models: [] }), 400, /^models: models must name at least one model/)
      expectError(yield* create({ models: "alpha-*" }), 400, "models must be an array of model ids or glob patterns")
      expectError(yield* create({ monthly_cap_usd: "lots" }), 400, /^monthly_cap_usd: the monthly cap must be an amount in US dollars/)
      expectError(yield* create({ monthly_cap_usd: 50 }), 400, "monthly_cap_usd must be a string")
      expectError(yield* create({ rate_limit: "fast" }), 400, /^rate_limit: the rate limit must be requests per second, minute or hour/)
      expectError(yield* create({ expires_at: "1969-12-31T00:00:00Z" }), 400, "expires_at must be in the future")
      expectError(yield* create({ expires_at: "tomorrow" }), 400, "expires_at must be an ISO 8601 timestamp with a time zone, e.g. 2027-01-31T12:00:00Z")
      expectError(yield* create({ label: "" }), 400, "label must not be blank and at most 200 characters")
      expectError(yield* create({ scope: {} }), 400, "scope is not a supported field")
      expectError(yield* create({}, "acct_nope"), 404, "no account acct_nope")
      // null is absent: a key with no rule.
      const plain = yield* create({ label: null, models: null, monthly_cap_usd: null, rate_limit: null, expires_at: null })
      expect(plain.body.data.info).toMatchObject({ label: null, expires_at: null, scope: { models: null, monthly_cap_micro_usd: null, rate_limit: null } })
      const account = yield* admin.call("GET", "/api/v1/admin/accounts/acct_test")
      expect(account.body.data.keys.length).toBe(2)
    }).pipe(Effect.provide(server)))
})

describe("admin API: secrets", () => {
  it.effect("show, and rotate with a grace: the old secret signs beside the new one until then", () =>
    Effect.gen(function*() {
      const shown = yield* admin.call("GET", "/api/v1/admin/accounts/acct_test/secrets").pipe(Effect.flatMap(documented("/api/v1/admin/accounts/{accountId}/secrets", "get")))
      expect(shown.body.data).toEqual({ account_id: "acct_test", current: webhookSecret, previous: null, previous_signs_until: null })
      const rotated = yield* post("/api/v1/admin/accounts/acct_test/secrets/rotate", { grace_seconds: 60 }).pipe(
        Effect.flatMap(documented("/api/v1/admin/accounts/{accountId}/secrets/rotate", "post"))
      )
      expect(rotated.body.data).toEqual({
        account_id: "acct_test",
        current: expect.stringMatching(/^whsec_/),
        previous: webhookSecret,
        previous_signs_until: new Date(now + 60_000).toISOString()
      })
      expect(rotated.body.data.current).not.toBe(webhookSecret)
      yield* TestClock.adjust("61 seconds")
      const later = yield* admin.call("GET", "/api/v1/admin/accounts/acct_test/secrets")
      expect(later.body.data).toEqual({ account_id: "acct_test", current: rotated.body.data.current, previous: null, previous_signs_until: null })
      // The default grace is 24 hours.
      const again = yield* post("/api/v1/admin/accounts/acct_test/secrets/rotate", {})
      expect(Date.parse(again.body.data.previous_signs_until) - (now + 61_000)).toBe(24 * 3_600_000)
    }).pipe(Effect.provide(server)))

  it.effect("a grace out of bounds is 400; an unknown account is 404", () =>
    Effect.gen(function*() {
      const rotate = (body: unknown, account = "acct_test") => post(`/api/v1/admin/accounts/${account}/secrets/rotate`, body)
      expectError(yield* rotate({ grace_seconds: -1 }), 400, "grace_seconds must be a whole number of seconds from 0 to 2592000")
      expectError(yield* rotate({ grace_seconds: 2_592_001 }), 400, "grace_seconds must be a whole number of seconds from 0 to 2592000")
      expectError(yield* rotate({ grace_seconds: 1.5 }), 400, "grace_seconds must be a whole number of seconds from 0 to 2592000")
      expectError(yield* rotate({ grace_seconds: "1h" }), 400, "grace_seconds must be a whole number of seconds from 0 to 2592000")
      expectError(yield* rotate({}, "acct_nope"), 404, "no account acct_nope")
      expectError(yield* admin.call("GET", "/api/v1/admin/accounts/acct_nope/secrets"), 404, "no account acct_nope")
      // Nothing rotated.
      expect((yield* admin.call("GET", "/api/v1/admin/accounts/acct_test/secrets")).body.data.current).toBe(webhookSecret)
    }).pipe(Effect.provide(server)))
})

describe("admin API: credits", () => {
  it.effect("add, once per entry id; the customer sees the balance; show lists the entries", () =>
    Effect.gen(function*() {
      const add = (body: unknown, account = "acct_test") =>
        post(`/api/v1/admin/accounts/${account}/credits`, body).pipe(Effect.flatMap(documented("/api/v1/admin/accounts/{accountId}/credits", "post")))
      const first = yield* add({ amount_usd: "12.50", entry_id: "topup-2026-11", note: "November" })
      expect(first.body.data).toMatchObject({
        account_id: "acct_test",
        already_credited: false,
        entry: { id: "topup-2026-11", kind: "credit", amount_micro_usd: 12_500_000, note: "November" },
        balance_micro_usd: testCredits + 12_500_000,
        available_micro_usd: testCredits + 12_500_000
      })
      // A retry with the same entry id credits nothing.
      const again = yield* add({ amount_usd: "12.50", entry_id: "topup-2026-11", note: "November" })
      expect(again.body.data).toMatchObject({ already_credited: true, balance_micro_usd: testCredits + 12_500_000 })
      // The id is another entry's: 409, nothing credited.
      expectError(yield* add({ amount_usd: "1", entry_id: "topup-2026-11" }, "acct_other"), 409, /^entry topup-2026-11 is already a credit of \$12\.50 for acct_test/)
      expectError(yield* add({ amount_usd: "99", entry_id: "topup-2026-11" }), 409, /^entry topup-2026-11 is already a credit of \$12\.50 for acct_test/)
      const customer = yield* client(apiKey).call("GET", "/api/v1/account")
      expect(customer.body.data.balance_micro_usd).toBe(testCredits + 12_500_000)
      // Without an id, each top-up is its own entry.
      const plain = yield* add({ amount_usd: "$0.25" })
      expect(plain.body.data).toMatchObject({ already_credited: false, entry: { amount_micro_usd: 250_000, note: "added by admin" } })

      const shown = yield* admin.call("GET", "/api/v1/admin/accounts/acct_test/credits?limit=2").pipe(
        Effect.flatMap(documented("/api/v1/admin/accounts/{accountId}/credits", "get"))
      )
      expect(shown.body.data).toMatchObject({ account_id: "acct_test", balance_micro_usd: testCredits + 12_750_000, reserved_micro_usd: 0 })
      expect(shown.body.data.entries.map((entry: { amount_micro_usd: number }) => entry.amount_micro_usd)).toEqual([250_000, 12_500_000])
      expect((yield* admin.call("GET", "/api/v1/admin/accounts/acct_other/credits")).body.data.balance_micro_usd).toBe(testCredits)
    }).pipe(Effect.provide(server)))

  it.effect("an amount or a parameter that breaks a rule is 400; an unknown account is 404", () =>
    Effect.gen(function*() {
      const add = (body: unknown, account = "acct_test") => post(`/api/v1/admin/accounts/${account}/credits`, body)
      expectError(yield* add({}), 400, "amount_usd is required")
      expectError(yield* add({ amount_usd: "ten" }), 400, /^amount_usd: must be an amount in US dollars with at most six decimals/)
      expectError(yield* add({ amount_usd: "0" }), 400, "amount_usd: must be more than zero")
      expectError(yield* add({ amount_usd: "1.0000001" }), 400, /^amount_usd: must be an amount in US dollars with at most six decimals/)
      expectError(yield* add({ amount_usd: 10 }), 400, "amount_usd must be a string of US dollars, such as \"10\" or \"0.25\"")
      expectError(yield* add({ amount_usd: "1", entry_id: "has space" }), 400, "entry_id must be 1 to 100 letters, digits or _ . : -")
      expectError(yield* add({ amount_usd: "1" }, "acct_nope"), 404, "no account acct_nope")
      const show = (query: string) =>
        admin.call("GET", `/api/v1/admin/accounts/acct_test/credits${query}`).pipe(Effect.flatMap(documented("/api/v1/admin/accounts/{accountId}/credits", "get")))
      expectError(yield* show("?limit=0"), 400, "limit must be an integer between 1 and 1000")
      expectError(yield* show("?limit=1001"), 400, "limit must be an integer between 1 and 1000")
      expectError(yield* show("?limit=1&limit=2"), 400, "limit may be given once")
      expectError(yield* show("?since=1"), 400, "since is not a supported parameter")
      expectError(yield* admin.call("GET", "/api/v1/admin/accounts/acct_nope/credits"), 404, "no account acct_nope")
      // Nothing was credited.
      expect((yield* show("")).body.data.balance_micro_usd).toBe(testCredits)
    }).pipe(Effect.provide(server)))
})

describe("admin API: admin keys", () => {
  it.effect("create (shown once), list (hints only), revoke; 400 and 404", () =>
    Effect.gen(function*() {
      // The configured key is not stored: it is not listed.
      expect((yield* admin.call("GET", "/api/v1/admin/admin-keys")).body.data).toEqual({ admin_keys: [] })
      const created = yield* post("/api/v1/admin/admin-keys", { label: "on-call", expires_at: "2030-01-01T00:00:00Z" }).pipe(
        Effect.flatMap(documented("/api/v1/admin/admin-keys", "post"))
      )
      const { info, key } = created.body.data
      expect(info).toMatchObject({ label: "on-call", state: "active", expires_at: "2030-01-01T00:00:00.000Z", hint: `${key.slice(0, 8)}...` })
      const listed = yield* admin.call("GET", "/api/v1/admin/admin-keys").pipe(Effect.flatMap(documented("/api/v1/admin/admin-keys", "get")))
      expect(listed.body.data.admin_keys).toEqual([info])
      expect(listed.text).not.toContain(key)
      const revoked = yield* post(`/api/v1/admin/admin-keys/${info.id}/revoke`, undefined).pipe(
        Effect.flatMap(documented("/api/v1/admin/admin-keys/{adminKeyId}/revoke", "post"))
      )
      expect(revoked.body.data).toMatchObject({ id: info.id, state: "revoked" })
      expectError(yield* post("/api/v1/admin/admin-keys/adk_nope/revoke", undefined), 404, "no admin key adk_nope")
      expectError(yield* post("/api/v1/admin/admin-keys", { expires_at: "1969-12-31T23:59:59Z" }), 400, "expires_at must be in the future")
      expectError(yield* post("/api/v1/admin/admin-keys", { role: "root" }), 400, "role is not a supported field")
    }).pipe(Effect.provide(server)))
})

/** The document as these probes read it. */
interface Parameter {
  readonly name: string
  readonly in: string
  readonly schema: Record<string, any>
}

/** Values just inside and just outside each bound a parameter's schema declares, and some for its pattern. */
const samples = (parameter: Parameter): ReadonlyArray<string> => {
  const schema = parameter.schema
  const values: Array<string> = []
  if (typeof schema["minimum"] === "number") values.push(String(schema["minimum"]), String(schema["minimum"] - 1))
  if (typeof schema["maximum"] === "number") values.push(String(schema["maximum"]), String(schema["maximum"] + 1))
  if (typeof schema["minLength"] === "number") values.push("a".repeat(schema["minLength"]), "a".repeat(Math.max(0, schema["minLength"] - 1)))
  if (typeof schema["maxLength"] === "number") values.push("a".repeat(schema["maxLength"]), "a".repeat(schema["maxLength"] + 1))
  const patterns: Record<string, ReadonlyArray<string>> = {
    status: ["SUCCESS", "SUCCESS,FAILURE", "success", ""],
    cursor: ["0190c8a4-0000-7000-8000-000000000000", "zzz", ""],
    created_after: ["2025-01-31", "2025-01-31T12:00:00Z", "2025-01-31T12:00:00", "yesterday"],
    created_before: ["2025-01-31T12:00Z", "2025-1-31", ""],
    limit: ["abc", "2.0", ""],
    action: ["credits.add", "task.redeliver", "credits.remove", ""]
  }
  return [...values, ...(patterns[parameter.name] ?? [])]
}

describe("admin API: what the OpenAPI document says is what the server enforces", () => {
  it.effect("every query parameter of the admin API: a value just inside a bound is taken, just outside is a 400 naming it", () =>
    Effect.gen(function*() {
      const document = (yield* admin.call("GET", "/openapi.json", { key: null })).body as {
        paths: Record<string, Record<string, { operationId: string; parameters?: ReadonlyArray<Parameter> }>>
      }
      const ajv = new Ajv({ strict: false, validateFormats: false })
      const probed: Array<string> = []
      const disagreements: Array<unknown> = []
      for (const [path, item] of Object.entries(document.paths)) {
        for (const [method, operation] of Object.entries(item)) {
          // The admin API's own groups (usage, stats and providers are tested with their group).
          if (!/^admin(Accounts|Tasks|Access)\./.test(operation.operationId)) continue
          for (const parameter of (operation.parameters ?? []).filter((p) => p.in === "query")) {
            expect(method).toBe("get")
            for (const value of samples(parameter)) {
              const url = `${path.replace("{accountId}", "acct_test")}?${new URLSearchParams({ [parameter.name]: value })}`
              const answer = yield* admin.call("GET", url).pipe(Effect.flatMap(documented(path, "get")))
              expect([200, 400]).toContain(answer.status)
              if (answer.status === 400) expect(answer.body.msg.startsWith(`${parameter.name} `)).toBe(true)
              const read = parameter.schema["type"] === "integer" && /^-?\d+$/.test(value) ? Number(value) : value
              const declared = ajv.validate(parameter.schema, read)
              probed.push(`${parameter.name}=${value.slice(0, 12)}`)
              if (declared !== (answer.status === 200)) disagreements.push({ path, parameter: parameter.name, value: value.slice(0, 40), declared, answer: answer.body })
            }
          }
        }
      }
      expect(disagreements).toEqual([])
      for (const bound of ["limit=1000", "limit=1001", "limit=100", "limit=101", "limit=0", "account=", "provider=", "target=", "action=credits.add"]) {
        expect({ bound, probed: probed.some((sample) => sample.startsWith(bound)) }).toEqual({ bound, probed: true })
      }
    }).pipe(Effect.provide(server)))
})
