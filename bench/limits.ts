/**
 * The cost of one cluster-wide rate-limit take (issue 24): a token bucket kept where every
 * node sees it, on PostgreSQL (one `INSERT ... ON CONFLICT DO UPDATE ... RETURNING` on an
 * UNLOGGED table) or on Redis (a Lua script by EVALSHA, spoken in RESP over node:net so
 * that no client library is added), each beside its bare yardstick in the same run: a
 * `SELECT 1` and a `PING`, the cheapest round trip to the same server. The in-process take
 * (`TokenBuckets`) is the floor. Prints absolute figures (microseconds a take) and ratios.
 *
 *   npm run bench:limits     (PostgreSQL from MEDIAGATE_BENCH_PG_URL or MEDIAGATE_TEST_PG_URL,
 *                            else 127.0.0.1:5432/test; Redis from MEDIAGATE_BENCH_REDIS, else
 *                            127.0.0.1:6379)
 */
import { SharedLimits } from "@mediagate/core"
import { Database, PgLimits, Schema } from "@mediagate/store-sql"
import { freshPgDatabase } from "@mediagate/store-sql/testing"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import * as Net from "node:net"
import pg from "pg"
import { TokenBuckets } from "@mediagate/http"

const N = Number(process.env["BENCH_N"] ?? 5_000)
const CONCURRENCY = Number(process.env["BENCH_CONCURRENCY"] ?? 8)
const ROUNDS = Number(process.env["BENCH_ROUNDS"] ?? 3)
const KEYS = 1_000
const perSecond = 50
const burst = 100

const digests = Array.from({ length: KEYS }, (_, i) => `digest_${i.toString(36).padStart(8, "0")}`)
let clock = Date.now()
/** Whole milliseconds, moving on a little each take so that buckets refill as in use. */
const now = () => (clock += 1)

/** CPU of this process (the node's side of a take) in the last `measure`, microseconds a call. */
let lastCpu = 0

/** The best of `ROUNDS` runs of `n` calls of `f`, `concurrency` at once: microseconds a call (wall time). */
const measure = async (n: number, concurrency: number, f: (i: number) => Promise<unknown>): Promise<number> => {
  let best = Infinity
  lastCpu = Infinity
  for (let round = 0; round < ROUNDS; round++) {
    let next = 0
    const start = performance.now()
    const cpu = process.cpuUsage()
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (next < n) await f(next++)
    }))
    const used = process.cpuUsage(cpu)
    best = Math.min(best, ((performance.now() - start) * 1000) / n)
    lastCpu = Math.min(lastCpu, (used.user + used.system) / n)
  }
  return best
}

/** A row's figures: wall time one at a time, wall time and this process's CPU `CONCURRENCY` at once. */
const figures = async (what: string, f: (i: number) => Promise<unknown>, sequential = f): Promise<Row> => {
  const one = await measure(N, 1, sequential)
  const concurrent = await measure(N, CONCURRENCY, f)
  return { what, sequential: one, concurrent, cpu: lastCpu }
}

/** A minimal RESP client: one connection, replies in order. */
const resp = async (host: string, port: number) => {
  const socket = Net.connect({ host, port })
  socket.setNoDelay(true)
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject))
  const waiting: Array<{ resolve: (value: unknown) => void; reject: (error: Error) => void }> = []
  let buffer: Buffer = Buffer.alloc(0)
  /** One reply from `at`, or undefined if the buffer ends first. */
  const parse = (at: number): [unknown, number] | undefined => {
    const end = buffer.indexOf("\r\n", at)
    if (end < 0) return undefined
    const line = buffer.toString("utf8", at + 1, end)
    switch (String.fromCharCode(buffer[at]!)) {
      case "+":
        return [line, end + 2]
      case "-":
        return [new Error(line), end + 2]
      case ":":
        return [Number(line), end + 2]
      case "$": {
        const length = Number(line)
        if (length < 0) return [null, end + 2]
        if (buffer.length < end + 2 + length + 2) return undefined
        return [buffer.toString("utf8", end + 2, end + 2 + length), end + 2 + length + 2]
      }
      case "*": {
        const items: Array<unknown> = []
        let from = end + 2
        for (let i = 0; i < Number(line); i++) {
          const item = parse(from)
          if (item === undefined) return undefined
          items.push(item[0])
          from = item[1]
        }
        return [items, from]
      }
      default:
        throw new Error(`unexpected RESP reply: ${line}`)
    }
  }
  socket.on("data", (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk])
    for (;;) {
      const reply = parse(0)
      if (reply === undefined) return
      buffer = buffer.subarray(reply[1])
      const waiter = waiting.shift()!
      if (reply[0] instanceof Error) waiter.reject(reply[0])
      else waiter.resolve(reply[0])
    }
  })
  return {
    call: (...args: ReadonlyArray<string | number>): Promise<unknown> =>
      new Promise((resolve, reject) => {
        waiting.push({ resolve, reject })
        socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join("")}`)
      }),
    close: () => socket.destroy()
  }
}

/** The bucket on Redis: refill, take, and an expiry once it would be full again (an idle bucket is no bucket). */
const redisScript = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 't', 'a')
local t = tonumber(b[1]) or burst
local at = tonumber(b[2]) or now
t = math.min(burst, t + math.max(0, now - at) * rate / 1000)
local allowed = 0
if t >= 1 then t = t - 1; allowed = 1 end
redis.call('HSET', KEYS[1], 't', tostring(t), 'a', math.max(at, now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000))
return {allowed, tostring(t)}
`

type Row = { readonly what: string; readonly sequential: number; readonly concurrent: number; readonly cpu: number }

const pgRows = async (url: string): Promise<Array<Row>> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const target = yield* freshPgDatabase(url, "bench_limits")
    const pool = new pg.Pool({ connectionString: target, max: 10 })
    // The database is dropped WITH (FORCE) at the end: idle connections are cut.
    pool.on("error", () => {})
    yield* Effect.addFinalizer(() => Effect.promise(() => pool.end()))
    // The bare rows' tables; PgLimits's layer below migrates the same prefix (IF NOT EXISTS).
    for (const statement of Schema.limitTables("bench_")) yield* Effect.promise(() => pool.query(statement))
    const take = (i: number) => pool.query({ name: "take", text: PgLimits.statements("bench_").take, values: [digests[i % KEYS], perSecond, burst, now(), 1] })
    const select1 = () => pool.query({ name: "select1", text: "SELECT 1" })
    // The same take through mediagate's own (PgLimits on @effect/sql's pool), and a held place taken and given back.
    const runtime = ManagedRuntime.make(PgLimits.layer({ tablePrefix: "bench_" }).pipe(Layer.provide(Database.layerPg(Redacted.make(target)))))
    yield* Effect.addFinalizer(() => Effect.promise(() => runtime.dispose()))
    const limits = yield* Effect.promise(() => runtime.runPromise(SharedLimits.SharedLimits))
    const rate = { perSecond, burst }
    const caps = { perKey: 1_000_000, total: 1_000_000 }
    const ownTake = (i: number) => runtime.runPromise(limits.take(digests[i % KEYS]!, rate, 1))
    const holdAndRelease = (i: number) =>
      runtime.runPromise(Effect.flatMap(limits.hold(digests[i % KEYS]!, caps), (hold) => hold._tag === "Held" ? limits.release(hold.id) : Effect.void))
    return yield* Effect.promise(async () => {
      await measure(500, 1, take)
      await measure(500, 1, ownTake)
      return [
        await figures("PostgreSQL SELECT 1 (yardstick)", select1),
        await figures("PostgreSQL take (row locked, then UPDATE or INSERT)", take),
        await figures("PostgreSQL take through PgLimits (@effect/sql)", ownTake),
        await figures("PostgreSQL held place taken and given back (PgLimits)", holdAndRelease)
      ]
    })
  })))

const redisRows = async (host: string, port: number): Promise<Array<Row>> => {
  const clients = await Promise.all(Array.from({ length: CONCURRENCY }, () => resp(host, port)))
  try {
    const sha = String(await clients[0]!.call("SCRIPT", "LOAD", redisScript))
    await clients[0]!.call("DEL", ...digests.map((d) => `bench:rate:${d}`))
    // One connection per concurrent caller, as a pool would have.
    const take = (i: number) => clients[i % CONCURRENCY]!.call("EVALSHA", sha, 1, `bench:rate:${digests[i % KEYS]}`, perSecond, burst, now())
    const ping = (i: number) => clients[i % CONCURRENCY]!.call("PING")
    const sequentialTake = (i: number) => clients[0]!.call("EVALSHA", sha, 1, `bench:rate:${digests[i % KEYS]}`, perSecond, burst, now())
    await measure(500, 1, sequentialTake)
    return [
      await figures("Redis PING (yardstick)", ping, () => clients[0]!.call("PING")),
      await figures("Redis take (EVALSHA)", take, sequentialTake)
    ]
  } finally {
    for (const client of clients) client.close()
  }
}

const inProcessRow = async (): Promise<Row> => {
  const buckets = TokenBuckets.make({ perSecond, burst, maxKeys: 10_000 })
  const n = N * 40
  const run = () => {
    const start = performance.now()
    for (let i = 0; i < n; i++) buckets.take(digests[i % KEYS]!, now())
    return ((performance.now() - start) * 1000) / n
  }
  run()
  const best = Math.min(run(), run(), run())
  return { what: "in process (TokenBuckets)", sequential: best, concurrent: best, cpu: best }
}

const main = async () => {
  const url = process.env["MEDIAGATE_BENCH_PG_URL"] ?? process.env["MEDIAGATE_TEST_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"
  const [host = "127.0.0.1", port = "6379"] = (process.env["MEDIAGATE_BENCH_REDIS"] ?? "127.0.0.1:6379").split(":")
  const rows: Array<Row> = [await inProcessRow()]
  try {
    rows.push(...(await pgRows(url)))
  } catch (error) {
    console.warn(`PostgreSQL at ${url} is not usable (${(error as Error).message}); its rows are left out`)
  }
  try {
    rows.push(...(await redisRows(host, Number(port))))
  } catch (error) {
    console.warn(`Redis at ${host}:${port} is not usable (${(error as Error).message}); its rows are left out`)
  }
  const yardstick = (what: string) => rows.find((r) => r.what.startsWith(what.split(" ")[0]!) && r.what.includes("yardstick"))
  console.log(`${N} takes over ${KEYS} keys, best of ${ROUNDS}; concurrent: ${CONCURRENCY} at once (wall time / takes)`)
  console.log("| what | µs a take, one at a time | µs a take, concurrent | CPU µs of this process a take (concurrent) | ratio to its yardstick (one at a time) |")
  console.log("|---|---:|---:|---:|---:|")
  for (const row of rows) {
    const base = yardstick(row.what)
    const ratio = base === undefined || base === row ? "" : (row.sequential / base.sequential).toFixed(2)
    const shown = (µs: number) => µs.toFixed(µs < 1 ? 3 : 0)
    console.log(`| ${row.what} | ${shown(row.sequential)} | ${shown(row.concurrent)} | ${shown(row.cpu)} | ${ratio} |`)
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
