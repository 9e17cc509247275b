/**
 * Scoped keys over HTTP (issue 35), on the API as the standalone server composes it over the
 * SQL backends (`SqlBackends.make`, `Deployment.edgeLimits`): a key refused a model its
 * patterns do not allow, or a hold past its monthly cap, gets 403 in the envelope naming the
 * rule, with nothing created or held; a key's own rate limit replaces the server's for it
 * (429 with Retry-After past it, and more than the server's when it allows more); an expiry
 * still ends a scoped key. On SQLite, and on PostgreSQL with two nodes submitting at once
 * with one capped key: the cap holds over both. Real time passes here (database I/O).
 */
import { Accounts, ApiKeys, Ids, KeyScopes, Ledger, TaskStore } from "@mediagate/core"
import { MediagateHttp } from "@mediagate/http"
import { Backends, Deployment } from "@mediagate/server"
import { SqlBackends } from "@mediagate/server/sql"
import { SqlAccounts } from "@mediagate/store-sql"
import { freshDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { Effect, Either, Exit, Layer, Option, Redacted, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"

const dir = mkdtempSync(join(tmpdir(), "mediagate-scoped-keys-"))
const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const accountKey = "mg_scoped_account_key_0123456789"
const account = Ids.AccountId.make("acct_scoped")
const image = "alpha-image-2/text-to-image"
let databases = 0

const backendsOf = (url: string) => SqlBackends.make({ publicUrl: "http://127.0.0.1:1", databaseUrl: url, mediaDir: join(dir, "media") })

/**
 * The account (its own key unscoped, $1,000 of credits) and `keys` on the database at `url`,
 * each key its scope and expiry; the database's ledger, to read after.
 */
const seed = async (url: string, keys: ReadonlyArray<{ readonly key: string; readonly scope: ApiKeys.KeyScope; readonly expiresAt?: number }>) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const backends = backendsOf(url)
    const built = yield* Layer.build(Layer.merge(backends.accounts, backends.ledger))
    const accounts = yield* SqlAccounts.SqlAccountsService.pipe(Effect.provide(built))
    const admin = yield* Accounts.AccountAdmin.pipe(Effect.provide(built))
    const ledger = yield* Ledger.Ledger.pipe(Effect.provide(built))
    yield* accounts.ensure({
      id: account,
      name: "scoped",
      apiKey: Redacted.make(accountKey),
      keyLabel: "test",
      webhookSecret: Redacted.make("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
      now: 0
    })
    yield* ledger.credit({ id: "credits", accountId: account, amount: 1_000_000_000, at: 0, note: null })
    for (const [i, { expiresAt, key, scope }] of keys.entries()) {
      const stored = { id: `key_scoped_${i}`, hash: SqlAccounts.hashKey(key), hint: ApiKeys.hint(key), label: null, createdAt: i + 1, expiresAt: expiresAt ?? null, scope }
      expect(yield* admin.createKey(account, stored)).toBe(true)
    }
  })))

/** What the database holds for the account: its sums, and its tasks' count. */
const holdings = async (url: string) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const built = yield* Layer.build(backendsOf(url).ledger)
    const ledger = yield* Ledger.Ledger.pipe(Effect.provide(built))
    const entries = yield* ledger.entries(account, 1_000)
    return { ...(yield* ledger.balance(account)), reservations: entries.filter((entry) => entry.kind === "reserve") }
  })))

/** The key a stored task records (`TaskRecord.keyId`, the tasks table's key_id). */
const keyOfTask = async (url: string, taskId: string) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const built = yield* Layer.build(backendsOf(url).store)
    const store = yield* TaskStore.TaskStore.pipe(Effect.provide(built))
    return Option.map(yield* store.get(Ids.TaskId.make(taskId)), (task) => task.keyId)
  })))

/** A node: the API over the SQL backends of `url`, with the edge's limits as the standalone server has them. */
const node = async (url: string, edge: Deployment.EdgeConfig = { rateLimit: Option.none() }) => {
  const backends = backendsOf(url)
  const api = await MediagateHttp.makeWebHandler(
    Deployment.services({ simulatorProfile: "realistic", allowPrivateUrls: true, backends }).pipe(
      Layer.merge(Deployment.edgeLimits(edge, backends.limits))
    )
  )
  cleanups.push(api.dispose)
  return async (key: string, path: string, body?: unknown) => {
    const response = await api.handler(
      new Request(`http://127.0.0.1${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      }),
      { remoteAddress: "127.0.0.1" }
    )
    return { status: response.status, headers: response.headers, body: await response.json() as { code: number; msg: string; data?: any } }
  }
}

const submitBody = (model: string) => ({ model, input: { prompt: "a lighthouse at dusk" } })
const sqliteUrl = () => `sqlite:${join(dir, `scoped-${++databases}.db`)}`

describe("scoped keys over HTTP (SQLite)", () => {
  it("a model the key's patterns do not allow is 403 naming the rule, on submit and estimate; nothing created or held", { timeout: 60_000 }, async () => {
    const url = sqliteUrl()
    const key = "mg_scoped_models_key_0123456789"
    await seed(url, [{ key, scope: { ...ApiKeys.unscoped, models: ["alpha-*"] } }])
    const call = await node(url)
    const refused = await call(key, "/api/v1/task/submit", submitBody("clip3"))
    expect(refused).toMatchObject({ status: 403, body: { code: 403, msg: "this key may not use clip3; it may use: alpha-*" } })
    const estimated = await call(key, "/api/v1/task/estimate", submitBody("clip3"))
    expect(estimated).toMatchObject({ status: 403, body: { code: 403, msg: "this key may not use clip3; it may use: alpha-*" } })
    expect((await holdings(url)).reservations).toHaveLength(0)
    expect((await call(key, "/api/v1/tasks")).body.data.tasks).toHaveLength(0)
    // An unknown model is still the catalog's 400, not the key's 403.
    expect((await call(key, "/api/v1/task/submit", submitBody("no-such-model"))).status).toBe(400)
    // A model the glob allows (its `*` crosses the mode's `/`) is accepted, and its task and hold carry the key.
    const accepted = await call(key, "/api/v1/task/submit", submitBody(image))
    expect(accepted.status).toBe(200)
    const held = await holdings(url)
    expect(held.reservations.map((entry) => [entry.taskId, entry.keyId, entry.model])).toEqual([[accepted.body.data.taskId, "key_scoped_0", image]])
    expect(await keyOfTask(url, accepted.body.data.taskId)).toEqual(Option.some("key_scoped_0"))
    // The account's own key is unscoped.
    const own = await call(accountKey, "/api/v1/task/submit", submitBody("clip3"))
    expect(own.status).toBe(200)
    expect(await keyOfTask(url, own.body.data.taskId)).toEqual(Option.some("key_acct_scoped"))
  })

  it("a hold past the key's monthly cap is 403 naming the cap and month; nothing created or held; the account's other keys go on", { timeout: 60_000 }, async () => {
    const url = sqliteUrl()
    const key = "mg_scoped_capped_key_0123456789"
    // The price of one task, from the estimate: the cap has room for two.
    await seed(url, [])
    const price: number = (await (await node(url))(accountKey, "/api/v1/task/estimate", submitBody(image))).body.data.priceMicroUsd
    expect(price).toBeGreaterThan(0)
    const cap = 2 * price + 1
    await seed(url, [{ key, scope: { ...ApiKeys.unscoped, monthlyCapMicroUsd: cap } }])
    const call = await node(url)
    for (let i = 0; i < 2; i++) expect((await call(key, "/api/v1/task/submit", submitBody(image))).status).toBe(200)
    const refused = await call(key, "/api/v1/task/submit", submitBody(image))
    expect(refused.status).toBe(403)
    expect(refused.body).toEqual({ code: 403, msg: KeyScopes.capRefusal({ capMicroUsd: cap, month: KeyScopes.monthOf(Date.now()) }) })
    expect(refused.body.msg).toMatch(/^this key has spent its \$\d+\.\d+ cap for \d{4}-\d{2}$/)
    const held = await holdings(url)
    expect(held.reservations).toHaveLength(2)
    expect((await call(key, "/api/v1/tasks")).body.data.tasks).toHaveLength(2)
    expect(held).toMatchObject({ balance: 1_000_000_000, reserved: 2 * price })
    // The account's credits are untouched by the refusal: its own key still submits.
    expect((await call(accountKey, "/api/v1/task/submit", submitBody(image))).status).toBe(200)
  })

  it("a key's own rate limit replaces the server's: 429 with Retry-After past a lower one, more than the server's under a higher one", { timeout: 60_000 }, async () => {
    const url = sqliteUrl()
    const slow = "mg_scoped_slow_key_0123456789"
    const fast = "mg_scoped_fast_key_0123456789"
    await seed(url, [
      { key: slow, scope: { ...ApiKeys.unscoped, rateLimit: Either.getOrThrow(KeyScopes.parseRateLimit("1/min")) } },
      { key: fast, scope: { ...ApiKeys.unscoped, rateLimit: Either.getOrThrow(KeyScopes.parseRateLimit("1000/s")) } }
    ])
    // The server's: 3 at once, then one every 5 s.
    const call = await node(url, { rateLimit: Option.some({ perSecond: 0.2, burst: 3 }) })
    const missing = "/api/v1/task/0190c8a4-0000-7000-8000-000000000000"
    // The slow key: one request a minute, not the server's 3 at once.
    expect((await call(slow, missing)).status).toBe(404)
    const limited = await call(slow, missing)
    expect(limited.status).toBe(429)
    expect(limited.body).toEqual({ code: 429, msg: "too many requests for this key; slow down" })
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(30)
    // The fast key: 20 in a row, far past the server's burst of 3.
    const statuses: Array<number> = []
    for (let i = 0; i < 20; i++) statuses.push((await call(fast, missing)).status)
    expect(statuses.every((status) => status === 404)).toBe(true)
    // An unscoped key keeps the server's: 3, then 429.
    const plain: Array<number> = []
    for (let i = 0; i < 5; i++) plain.push((await call(accountKey, missing)).status)
    expect(plain).toEqual([404, 404, 404, 429, 429])
  })

  it("a key's own rate limit holds where the server has none (MEDIAGATE_RATE_LIMIT=off); other keys are not limited", { timeout: 60_000 }, async () => {
    const url = sqliteUrl()
    const slow = "mg_scoped_slow_key_0123456789"
    await seed(url, [{ key: slow, scope: { ...ApiKeys.unscoped, rateLimit: Either.getOrThrow(KeyScopes.parseRateLimit("2/min")) } }])
    const call = await node(url, { rateLimit: Option.none() })
    const missing = "/api/v1/task/0190c8a4-0000-7000-8000-000000000000"
    const statuses: Array<number> = []
    for (let i = 0; i < 4; i++) statuses.push((await call(slow, missing)).status)
    // Its own burst of 1 (2 a minute rounds up to 1 a second, at least 1): then 429.
    expect(statuses).toEqual([404, 429, 429, 429])
    const limited = await call(slow, missing)
    expect(limited.headers.get("ratelimit-policy")).toBe(`"per-key";q=${2 / 60};w=1`)
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(20)
    const plain: Array<number> = []
    for (let i = 0; i < 20; i++) plain.push((await call(accountKey, missing)).status)
    expect(plain.every((status) => status === 404)).toBe(true)
  })

  it("an expiry still ends a scoped key: 401 from then on", { timeout: 60_000 }, async () => {
    const url = sqliteUrl()
    const expired = "mg_scoped_expired_key_0123456789"
    const later = "mg_scoped_later_key_0123456789"
    const scope = { ...ApiKeys.unscoped, models: ["alpha-*"], monthlyCapMicroUsd: 1_000_000_000 }
    await seed(url, [{ key: expired, scope, expiresAt: Date.now() - 1 }, { key: later, scope, expiresAt: Date.now() + 3_600_000 }])
    const call = await node(url)
    expect((await call(expired, "/api/v1/task/submit", submitBody(image))).status).toBe(401)
    expect((await call(later, "/api/v1/task/submit", submitBody(image))).status).toBe(200)
  })
})

describe("scoped keys over HTTP (memory backends: the hold and the task written one after the other)", () => {
  it("20 submits at once with one key capped at room for 5: exactly 5 accepted, the rest 403; a model outside its patterns 403", { timeout: 60_000 }, async () => {
    const key = "mg_scoped_memory_key_0123456789"
    const scope = Scope.make().pipe(Effect.runSync)
    cleanups.push(() => Effect.runPromise(Scope.close(scope, Exit.void)))
    // The services built once, so that the test reaches the same memory accounts and ledger the API serves.
    const context = await Effect.runPromise(Layer.buildWithScope(
      Deployment.services({
        simulatorProfile: "realistic",
        allowPrivateUrls: true,
        backends: Backends.memoryBackends({ publicUrl: "http://127.0.0.1:1" }, [
          { id: account, name: "scoped", apiKey: Redacted.make(accountKey), credits: 1_000_000_000 }
        ])
      }),
      scope
    ))
    const api = await MediagateHttp.makeWebHandler(Layer.succeedContext(context))
    cleanups.push(api.dispose)
    const call = async (body: unknown, path = "/api/v1/task/submit", bearer = key) => {
      const response = await api.handler(new Request(`http://127.0.0.1${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      }))
      return { status: response.status, body: await response.json() as { code: number; msg: string; data?: any } }
    }
    const price: number = (await call(submitBody(image), "/api/v1/task/estimate", accountKey)).body.data.priceMicroUsd
    const cap = 5 * price + Math.floor(price / 2)
    const stored = { id: "key_memory", hash: SqlAccounts.hashKey(key), hint: ApiKeys.hint(key), label: null, createdAt: 1, expiresAt: null }
    const created = Accounts.AccountAdmin.pipe(
      Effect.flatMap((admin) => admin.createKey(account, { ...stored, scope: { models: ["alpha-*"], monthlyCapMicroUsd: cap, rateLimit: null } })),
      Effect.provide(context)
    )
    expect(await Effect.runPromise(created)).toBe(true)
    expect(await call(submitBody("clip3"))).toEqual({ status: 403, body: { code: 403, msg: "this key may not use clip3; it may use: alpha-*" } })
    const answers = await Promise.all(Array.from({ length: 20 }, () => call(submitBody(image))))
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(5)
    for (const answer of answers.filter((answer) => answer.status !== 200)) {
      expect(answer).toEqual({ status: 403, body: { code: 403, msg: KeyScopes.capRefusal({ capMicroUsd: cap, month: KeyScopes.monthOf(Date.now()) }) } })
    }
    const balance = await Effect.runPromise(Effect.flatMap(Ledger.Ledger, (ledger) => ledger.balance(account)).pipe(Effect.provide(context)))
    expect(balance).toEqual({ balance: 1_000_000_000, reserved: 5 * price })
  })
})

describe.skipIf(pgUrl === undefined)(`scoped keys over two nodes on one PostgreSQL database${pgSkipReason("scoped-keys")}`, () => {
  it("20 submits at once over two nodes with one key capped at room for 5: exactly 5 accepted, the rest 403, 5 holds", { timeout: 60_000 }, async () => {
    const db = await freshDatabase(pgUrl!, "scoped_keys")
    cleanups.push(db.drop)
    const key = "mg_scoped_cluster_key_0123456789"
    await seed(db.url, [])
    const [a, b] = [await node(db.url), await node(db.url)]
    const price: number = (await a(accountKey, "/api/v1/task/estimate", submitBody(image))).body.data.priceMicroUsd
    const cap = 5 * price + Math.floor(price / 2)
    await seed(db.url, [{ key, scope: { ...ApiKeys.unscoped, monthlyCapMicroUsd: cap } }])
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? a : b)(key, "/api/v1/task/submit", submitBody(image))))
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(5)
    const refused = answers.filter((answer) => answer.status !== 200)
    expect(refused).toHaveLength(15)
    for (const answer of refused) expect(answer).toMatchObject({ status: 403, body: { code: 403, msg: expect.stringMatching(/^this key has spent its \$/) } })
    const held = await holdings(db.url)
    expect(held.reservations).toHaveLength(5)
    expect(held.reserved).toBe(5 * price)
  })
})
