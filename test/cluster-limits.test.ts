/**
 * The HTTP edge's limits across nodes (issue 24): two API apps (web handlers) over the SQL
 * backends of one fresh PostgreSQL database, composed as the standalone server composes
 * them (`SqlBackends.make`, `Deployment.edgeLimits(config, backends.limits)`). A key's rate
 * limit holds over both (its burst in total, not twice); the caps on held requests count
 * both nodes' (the per-key cap reached with the places split between them answers 429); a
 * node that died (its places no longer renewed) gives them back once they lapse. Then two
 * standalone server processes on one database, with only the rate limit's usual variables:
 * the burst holds over both; and three with 300 requests of one key at once, then 900 of
 * another, which keep to the limit (issue 33). Real time passes here (database I/O), so waits poll with a bound.
 */
import type { SharedLimits } from "@mediagate/core"
import { Ids, Ledger } from "@mediagate/core"
import { MediagateHttp, RateLimit } from "@mediagate/http"
import { Deployment } from "@mediagate/server"
import { SqlBackends } from "@mediagate/server/sql"
import { Database, PgLimits, SqlAccounts } from "@mediagate/store-sql"
import { freshDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import type { Context } from "effect"
import { Effect, Exit, Layer, Option, Redacted, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { killAll, type Server, startServer, stop } from "./standalone-process.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-cluster-limits-"))
const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})
afterAll(() => {
  killAll()
  rmSync(dir, { recursive: true, force: true })
})

const apiKey = "mg_cluster_limits_key_0123456789"
const auth = { authorization: `Bearer ${apiKey}` }
const missing = "0190c8a4-0000-7000-8000-000000000000"

/** A fresh database with an account for each of `keys` (the first `apiKey`'s) in it, and credits. */
const database = async (keys: ReadonlyArray<string> = [apiKey]) => {
  const db = await freshDatabase(pgUrl!, "cluster_limits")
  cleanups.push(db.drop)
  const backends = SqlBackends.make({ publicUrl: "http://127.0.0.1:1", databaseUrl: db.url, mediaDir: join(dir, "media") })
  await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const built = yield* Layer.build(Layer.merge(backends.accounts, backends.ledger))
    const accounts = yield* SqlAccounts.SqlAccountsService.pipe(Effect.provide(built))
    const ledger = yield* Ledger.Ledger.pipe(Effect.provide(built))
    for (const [i, key] of keys.entries()) {
      const account = yield* accounts.ensure({
        id: Ids.AccountId.make(i === 0 ? "acct_cluster" : `acct_cluster_${i}`),
        name: "cluster",
        apiKey: Redacted.make(key),
        keyLabel: "test",
        webhookSecret: Redacted.make("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
        now: 0
      })
      yield* ledger.credit({ id: `credits-${i}`, accountId: account.id, amount: 1_000_000_000, at: 0, note: null })
    }
  })))
  return db.url
}

/** `count` standalone server processes on the database at `url`, with `env`. */
const standaloneServers = async (count: number, url: string, env: Record<string, string>) => {
  const common = { MEDIAGATE_DATABASE_URL: url, MEDIAGATE_MEDIA_DIR: join(dir, "media"), ...env }
  const servers: Array<Server> = []
  for (let i = 0; i < count; i++) servers.push(await startServer(common))
  return servers
}

/** A node: the API over the SQL backends of `url`, with the edge's limits shared as the standalone server has them. */
const node = async (url: string, edge: Deployment.EdgeConfig) => {
  const backends = SqlBackends.make({ publicUrl: "http://127.0.0.1:1", databaseUrl: url, mediaDir: join(dir, "media") })
  expect(backends.limits).toBeDefined()
  const api = await MediagateHttp.makeWebHandler(
    Deployment.services({ simulatorProfile: "realistic", allowPrivateUrls: true, backends }).pipe(
      Layer.merge(Deployment.edgeLimits(edge, backends.limits))
    )
  )
  cleanups.push(api.dispose)
  return (path: string, init: RequestInit = {}) =>
    api.handler(new Request(`http://127.0.0.1${path}`, { ...init, headers: { ...auth, ...init.headers } }), { remoteAddress: "127.0.0.1" })
}

/** A node that takes places and then dies: it never renews them (what a SIGKILLed node looks like to the others). */
const deadNode = async (url: string): Promise<Context.Tag.Service<SharedLimits.SharedLimits>> => {
  const scope = Effect.runSync(Scope.make())
  cleanups.push(() => Effect.runPromise(Scope.close(scope, Exit.void)))
  return Effect.runPromise(
    Effect.gen(function*() {
      const client = yield* Layer.build(Database.layerPg(Redacted.make(url)))
      return yield* PgLimits.make({ renewEvery: "1 day", holdLifetime: "1 second" }).pipe(Effect.provide(client))
    }).pipe(Scope.extend(scope))
  )
}

/** Waits until the database holds `count` places of held requests (at most 5 s). */
const placesAre = async (url: string, count: number) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    for (let tries = 0; tries < 100; tries++) {
      const { rows } = await client.query<{ n: number }>("SELECT count(*)::int AS n FROM mediagate_holds")
      if (rows[0]!.n === count) return
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    throw new Error(`the database never held ${count} places`)
  } finally {
    await client.end()
  }
}

const submitLong = async (call: Awaited<ReturnType<typeof node>>) => {
  const response = await call("/api/v1/task/submit", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "beta-imagine/text-to-video", input: { prompt: "a long walk" } })
  })
  expect(response.status).toBe(200)
  return ((await response.json()) as { data: { taskId: string } }).data.taskId
}

describe.skipIf(pgUrl === undefined)(`the edge's limits over two nodes on one PostgreSQL database${pgSkipReason("cluster-limits")}`, () => {
  it("a key's rate limit holds over both nodes: its burst in total, then 429 with Retry-After on either", { timeout: 60_000 }, async () => {
    const url = await database()
    // A slow refill, so that the burst is all a key gets while the test runs.
    const edge = { rateLimit: Option.some({ perSecond: 0.2, burst: 6 }) }
    const [a, b] = [await node(url, edge), await node(url, edge)]
    const statuses: Array<number> = []
    const limited: Array<Response> = []
    for (let i = 0; i < 20; i++) {
      const response = await (i % 2 === 0 ? a : b)(`/api/v1/task/${missing}`)
      statuses.push(response.status)
      if (response.status === 429) limited.push(response)
      else await response.arrayBuffer()
    }
    // 404: the key went through (no such task). Six in all over the two nodes, not six each.
    expect(statuses.filter((status) => status === 404)).toHaveLength(6)
    expect(statuses.slice(6).every((status) => status === 429)).toBe(true)
    const first = limited[0]!
    expect(await first.json()).toEqual({ code: 429, msg: "too many requests for this key; slow down" })
    expect(Number(first.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
    expect(first.headers.get("ratelimit-policy")).toBe(`"per-key";q=0.2;w=1`)
  })

  it("the caps on held requests count both nodes' places; a dead node's places come back once they lapse", { timeout: 60_000 }, async () => {
    const url = await database()
    const edge = { rateLimit: Option.none(), heldRequests: { perKey: 2, total: 100 } }
    const [a, b] = [await node(url, edge), await node(url, edge)]
    const taskId = await submitLong(a)
    // One request held on each node (the task runs for longer than the wait), each once its place is taken.
    const held: Array<Promise<Response>> = []
    for (const [i, call] of [a, b].entries()) {
      held.push(call(`/api/v1/task/${taskId}?wait=4`))
      await placesAre(url, i + 1)
    }
    const refused = await a(`/api/v1/task/${taskId}?wait=1`)
    expect(refused.status).toBe(429)
    expect(await refused.json()).toEqual({ code: 429, msg: "too many requests held open for this key (at most 2); close one first" })
    expect(refused.headers.get("retry-after")).toBe("5")
    for (const response of await Promise.all(held)) {
      expect(response.status).toBe(200)
      await response.arrayBuffer()
    }
    // The places came back with the answers: a held request goes through again.
    const again = await b(`/api/v1/task/${taskId}?wait=1`)
    expect(again.status).toBe(200)
    await again.arrayBuffer()

    // A third node takes the key's two places and dies: they lapse after its lifetime (1 s here).
    const dead = await deadNode(url)
    const digest = RateLimit.keyDigest(apiKey)
    for (let i = 0; i < 2; i++) expect((await Effect.runPromise(dead.hold(digest, edge.heldRequests)))._tag).toBe("Held")
    const whileHeld = await a(`/api/v1/task/${taskId}?wait=1`)
    expect(whileHeld.status).toBe(429)
    await whileHeld.arrayBuffer()
    await new Promise((resolve) => setTimeout(resolve, 1_200))
    const afterLapse = await a(`/api/v1/task/${taskId}?wait=1`)
    expect(afterLapse.status).toBe(200)
    await afterLapse.arrayBuffer()
  })

  it("two standalone servers on one database: a key's burst holds over both, with no setting for it", { timeout: 60_000 }, async () => {
    const [serverA, serverB] = await standaloneServers(2, await database(), { MEDIAGATE_RATE_LIMIT: "1", MEDIAGATE_RATE_LIMIT_BURST: "5" })
    const statuses: Array<number> = []
    for (let i = 0; i < 12; i++) {
      const response = await fetch(`${(i % 2 === 0 ? serverA! : serverB!).url}/api/v1/task/${missing}`, { headers: auth })
      await response.arrayBuffer()
      statuses.push(response.status)
    }
    // Five at once, and at 1 a second perhaps one more while the requests go out; not ten.
    const through = statuses.filter((status) => status === 404).length
    expect(through).toBeGreaterThanOrEqual(5)
    expect(through).toBeLessThanOrEqual(6)
    expect(statuses.filter((status) => status === 429).length).toBe(12 - through)
    await stop(serverA!, "SIGTERM")
    await stop(serverB!, "SIGTERM")
  })

  it("three standalone servers, one key's 300 requests at once (100 each), then another's 900: each admitted within the limit, not each node's burst", {
    timeout: 120_000
  }, async () => {
    const burstKey = "mg_cluster_limits_burst_key_0123"
    const url = await database([apiKey, burstKey])
    // Each statement that takes from a key's bucket leaves a row in `takes` (a trigger on the buckets' table).
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    cleanups.push(() => client.end())
    await client.query(`CREATE UNLOGGED TABLE takes (digest TEXT NOT NULL);
      CREATE FUNCTION count_take() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.digest NOT LIKE 'node:%' THEN INSERT INTO takes VALUES (NEW.digest); END IF; RETURN NEW; END $$;
      CREATE TRIGGER count_take AFTER INSERT OR UPDATE ON mediagate_rate_buckets FOR EACH ROW EXECUTE FUNCTION count_take();`)
    const takes = async () => (await client.query<{ n: number }>("SELECT count(*)::int AS n FROM takes")).rows[0]!.n
    const servers = await standaloneServers(3, url, { MEDIAGATE_RATE_LIMIT: "5" })
    // Each node's connections opened, as a running cluster's are, by a request of a third key (401).
    for (const server of servers) await (await fetch(`${server.url}/api/v1/account`, { headers: { authorization: "Bearer mg_warm_up" } })).arrayBuffer()
    for (const [key, count] of [[apiKey, 300], [burstKey, 900]] as const) {
      const before = await takes()
      const started = Date.now()
      const statuses = await Promise.all(Array.from({ length: count }, async (_, i) => {
        const response = await fetch(`${servers[i % 3]!.url}/api/v1/account`, { headers: { authorization: `Bearer ${key}` } })
        await response.arrayBuffer()
        return response.status
      }))
      const seconds = (Date.now() - started) / 1000
      const admitted = statuses.filter((status) => status === 200).length
      const statements = (await takes()) - before
      const fellBack = servers.filter((server) => server.output().includes("the shared buckets cannot be reached")).length
      console.log(
        `cluster-limits: ${admitted} of ${count} admitted in ${seconds.toFixed(2)} s (burst 10, 5 a second), ${statements} statements on the key's bucket; ${fellBack} of 3 nodes fell back to their own buckets so far`
      )
      expect(statuses.filter((status) => status !== 200 && status !== 429)).toEqual([])
      // The burst, and what refilled while the requests went out: 10 + 5 a second.
      expect(admitted).toBeGreaterThanOrEqual(10)
      expect(admitted).toBeLessThanOrEqual(10 + Math.ceil(5 * seconds))
      // What keeps it so whatever the machine's speed: a node asks for the key once at a time,
      // and after a take that left no whole token not again until one is due (every 200 ms),
      // rather than once a request, which queued the statements past the timeout. So each
      // statement admitted some, or is one node's first after a token came due.
      expect(statements).toBeLessThanOrEqual(admitted + 3 * (1 + Math.ceil(5 * seconds)))
    }
    for (const server of servers) await stop(server, "SIGTERM")
  })
})
