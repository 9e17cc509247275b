/**
 * Store benchmark: inserts, point reads and claims per second through the SQL TaskStore,
 * each beside the same operation done with the bare driver (better-sqlite3, pg) in the
 * same run, on the same machine. Writes the figures into docs/benchmarks.md.
 *
 *   npm run bench:store            (PostgreSQL from MEDIAGATE_BENCH_PG_URL or
 *                                   MEDIAGATE_TEST_PG_URL, else 127.0.0.1:5432/test)
 */
import { Ids, Task, TaskStore } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { Database, SqlTaskStore, TaskRow } from "@mediagate/store-sql"
import Sqlite from "better-sqlite3"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { writeSection } from "../scripts/benchmarks-doc.js"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"

const N = Number(process.env["BENCH_N"] ?? 5_000)
const ROUNDS = Number(process.env["BENCH_ROUNDS"] ?? 3)
const prefix = "bench_"

const makeTasks = (count: number, base: number) =>
  Array.from({ length: count }, (_, i) =>
    Testing.record({
      id: Ids.uuidV7(base + i, Array.from(randomBytes(10))),
      ownerId: "acct_bench",
      input: { model: "alpha-image-2/text-to-image", prompt: "a lighthouse at dawn", ratio: "16:9", n: 2 },
      job: Testing.job({ prompt: "a lighthouse at dawn", n: 2, priceMicroUsd: 40_000 }),
      createdAt: base + i,
      dueAt: i
    }))

const perSecond = (count: number, millis: number) => Math.round((count / millis) * 1000)
const time = async (f: () => Promise<unknown>) => {
  const start = performance.now()
  await f()
  return performance.now() - start
}

type Row = { backend: string; operation: string; store: number; bare: number }

type Times = { insert: number; read: number; claim: number }

/** The three operations through the TaskStore. */
const storeRun = async (
  runtime: ManagedRuntime.ManagedRuntime<TaskStore.TaskStore, unknown>,
  tasks: ReadonlyArray<Task.TaskRecord>
): Promise<Times> => {
  const store = await runtime.runPromise(TaskStore.TaskStore)
  const insert = await time(() => runtime.runPromise(Effect.forEach(tasks, (task) => store.create(task), { discard: true })))
  const ids = tasks.map((t) => t.id)
  const read = await time(() =>
    runtime.runPromise(Effect.forEach(ids, (_, i) => store.getOwned(ids[(i * 7919) % ids.length]!, Ids.AccountId.make("acct_bench")), { discard: true }))
  )
  const claim = await time(() =>
    runtime.runPromise(
      Effect.forEach(ids, () => store.claimDue({ now: N, limit: 1, worker: "w", leaseUntil: 10 * N }), { discard: true })
    )
  )
  return { insert, read, claim }
}

const sqliteBare = (db: Sqlite.Database, tasks: ReadonlyArray<Task.TaskRecord>): Times => {
  const t = `${prefix}tasks`
  const columns = TaskRow.columns
  const insertStatement = db.prepare(`INSERT INTO ${t} (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`)
  const getStatement = db.prepare(`SELECT * FROM ${t} WHERE id = ? AND owner_id = ?`)
  const claimStatement = db.prepare(`UPDATE ${t} SET lease_owner = ?, lease_until = ?, version = version + 1
    WHERE id IN (SELECT id FROM ${t} WHERE due_at IS NOT NULL AND due_at <= ? AND (lease_until IS NULL OR lease_until <= ?) ORDER BY due_at LIMIT ?)
    RETURNING *`)
  const insert = performance.now()
  for (const task of tasks) insertStatement.run(...TaskRow.values(TaskRow.toRow(task)))
  const insertMs = performance.now() - insert
  const ids = tasks.map((t) => t.id)
  const read = performance.now()
  for (let i = 0; i < ids.length; i++) TaskRow.fromRow(getStatement.get(ids[(i * 7919) % ids.length], "acct_bench") as never)
  const readMs = performance.now() - read
  const claim = performance.now()
  for (let i = 0; i < ids.length; i++) (claimStatement.all("w", 10 * N, N, N, 1) as Array<never>).map(TaskRow.fromRow)
  const claimMs = performance.now() - claim
  return { insert: insertMs, read: readMs, claim: claimMs }
}

const pgBare = async (client: pg.Client, tasks: ReadonlyArray<Task.TaskRecord>): Promise<Times> => {
  const t = `${prefix}tasks`
  const columns = TaskRow.columns
  const insertSql = `INSERT INTO ${t} (${columns.join(", ")}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(", ")})`
  const insert = await time(async () => {
    for (const task of tasks) await client.query(insertSql, TaskRow.values(TaskRow.toRow(task)))
  })
  const ids = tasks.map((t) => t.id)
  const read = await time(async () => {
    for (let i = 0; i < ids.length; i++) {
      const result = await client.query(`SELECT * FROM ${t} WHERE id = $1 AND owner_id = $2`, [ids[(i * 7919) % ids.length], "acct_bench"])
      result.rows.map(TaskRow.fromRow)
    }
  })
  const claim = await time(async () => {
    for (let i = 0; i < ids.length; i++) {
      const result = await client.query(
        `UPDATE ${t} SET lease_owner = $1, lease_until = $2, version = version + 1
         WHERE id IN (SELECT id FROM ${t} WHERE due_at IS NOT NULL AND due_at <= $3 AND (lease_until IS NULL OR lease_until <= $3)
         ORDER BY due_at LIMIT $4 FOR UPDATE SKIP LOCKED) RETURNING *`,
        ["w", 10 * N, N, 1]
      )
      result.rows.map(TaskRow.fromRow)
    }
  })
  return { insert, read, claim }
}

/** Builds a store layer once, which runs its migrations, and closes it. */
const migrateOnly = async (layer: Layer.Layer<TaskStore.TaskStore, unknown>) => {
  const runtime = ManagedRuntime.make(layer)
  await runtime.runPromise(TaskStore.TaskStore)
  await runtime.dispose()
}

/**
 * Warms both sides up, then alternates store and bare driver for several rounds (fresh
 * tasks each round) and keeps each side's median: neither side gains from running second.
 */
const compare = async (store: (tasks: ReadonlyArray<Task.TaskRecord>) => Promise<Times>, bare: (tasks: ReadonlyArray<Task.TaskRecord>) => Promise<Times>) => {
  let base = 1_800_000_000_000
  const fresh = (count: number) => makeTasks(count, (base += 10 * N))
  await store(fresh(Math.ceil(N / 5)))
  await bare(fresh(Math.ceil(N / 5)))
  const rounds: Array<{ store: Times; bare: Times }> = []
  for (let round = 0; round < ROUNDS; round++) {
    const storeTimes = await store(fresh(N))
    const bareTimes = await bare(fresh(N))
    rounds.push({ store: storeTimes, bare: bareTimes })
  }
  const median = (values: Array<number>) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  const pick = (side: "store" | "bare"): Times => ({
    insert: median(rounds.map((r) => r[side].insert)),
    read: median(rounds.map((r) => r[side].read)),
    claim: median(rounds.map((r) => r[side].claim))
  })
  return { store: pick("store"), bare: pick("bare") }
}

const rowsOf = (backend: string, store: Times, bare: Times): Array<Row> => [
  { backend, operation: "insert", store: perSecond(N, store.insert), bare: perSecond(N, bare.insert) },
  { backend, operation: "point read", store: perSecond(N, store.read), bare: perSecond(N, bare.read) },
  { backend, operation: "claim (1 task)", store: perSecond(N, store.claim), bare: perSecond(N, bare.claim) }
]

const main = async () => {
  const rows: Array<Row> = []

  // SQLite: the store and the bare driver on files of their own, same schema.
  const dir = mkdtempSync(join(tmpdir(), "mediagate-bench-"))
  const storeFile = join(dir, "store.db")
  const bareFile = join(dir, "bare.db")
  const sqliteStore = ManagedRuntime.make(SqlTaskStore.layerWith({ tablePrefix: prefix }).pipe(Layer.provide(Database.layerSqlite(storeFile))))
  // Create the bare database's tables with the store's own migrations.
  await migrateOnly(SqlTaskStore.layerWith({ tablePrefix: prefix }).pipe(Layer.provide(Database.layerSqlite(bareFile))))
  const db = new Sqlite(bareFile)
  db.pragma("journal_mode = WAL")
  db.pragma("busy_timeout = 5000")
  const sqlite = await compare((tasks) => storeRun(sqliteStore, tasks), async (tasks) => sqliteBare(db, tasks))
  rows.push(...rowsOf("SQLite", sqlite.store, sqlite.bare))
  db.close()
  await sqliteStore.dispose()
  rmSync(dir, { recursive: true, force: true })

  // PostgreSQL: two fresh databases.
  const url = process.env["MEDIAGATE_BENCH_PG_URL"] ?? process.env["MEDIAGATE_TEST_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"
  const admin = new pg.Client({ connectionString: url })
  const available = await admin.connect().then(() => true, () => false)
  if (available) {
    const names = [`bench_store_${process.pid}`, `bench_bare_${process.pid}`]
    for (const name of names) await admin.query(`CREATE DATABASE ${name}`)
    const urlOf = (name: string) => Object.assign(new URL(url), { pathname: `/${name}` }).toString()
    const pgLayer = (name: string) => SqlTaskStore.layerWith({ tablePrefix: prefix }).pipe(Layer.provide(Database.layerPg(Redacted.make(urlOf(name)))))
    await migrateOnly(pgLayer(names[1]!))
    const pgStore = ManagedRuntime.make(pgLayer(names[0]!))
    const client = new pg.Client({ connectionString: urlOf(names[1]!) })
    await client.connect()
    const postgres = await compare((tasks) => storeRun(pgStore, tasks), (tasks) => pgBare(client, tasks))
    rows.push(...rowsOf("PostgreSQL", postgres.store, postgres.bare))
    await client.end()
    await pgStore.dispose()
    for (const name of names) await admin.query(`DROP DATABASE ${name} WITH (FORCE)`)
    await admin.end()
  } else {
    console.warn(`PostgreSQL at ${url} is not reachable; its rows are left out`)
  }

  const table = [
    "| backend | operation | store (ops/s) | bare driver (ops/s) | store / bare |",
    "|---|---|---|---|---|",
    ...rows.map((r) => `| ${r.backend} | ${r.operation} | ${r.store} | ${r.bare} | ${Math.round((r.store / r.bare) * 100)}% |`)
  ].join("\n")
  console.log(table)

  const section = [
    "<!-- bench:store:start -->",
    "## Task store",
    "",
    `Command: \`npm run bench:store\` (${N} operations each, one at a time, as the engine and the`,
    "API issue them). Each store operation is the same single statement the bare driver runs,",
    "including turning task records into rows and rows into records (a statement is its own",
    "transaction; several statements, such as a transition with its callback row, run in one",
    "`BEGIN IMMEDIATE` transaction on SQLite). Target: the store at 70% or more of the bare driver",
    "for inserts and reads. Both sides are warmed up, then alternate for",
    `${ROUNDS} rounds; each figure is the median round. On this shared 2-core machine figures`,
    "move by 10 to 20% between runs; compare the two columns of a row, not rows of different runs.",
    "Claims get slower over the run because the benchmark leaves every claimed task leased, so",
    "each claim passes over more leased rows; both sides pay that equally.",
    "",
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}.`,
    "",
    table,
    "<!-- bench:store:end -->"
  ].join("\n")
  writeSection(section)
}

main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
