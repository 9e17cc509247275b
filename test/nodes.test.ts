/**
 * Two standalone servers as child processes on one PostgreSQL database: both take work;
 * one is killed (SIGKILL) or stopped (SIGTERM) with work in flight, and the other finishes
 * every acknowledged task. The simulator's demo profile (sync calls of 2 to 4 s) keeps work
 * in flight. These suites wait on real processes, so they poll with short pauses; the
 * bounds below are limits on a wait, chosen far from the behaviour they tell apart.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { freshDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as pause } from "node:timers/promises"
import pg from "pg"
import { awaitTerminal, killAll, type Server, startServer, stop, submit } from "./standalone-process.js"

const skip = pgSkipReason("nodes")
const dir = mkdtempSync(join(tmpdir(), "mediagate-nodes-"))
const key = "nodes-test-key"
const drops: Array<() => Promise<void>> = []
afterAll(async () => {
  killAll()
  for (const drop of drops) await drop()
  rmSync(dir, { recursive: true, force: true })
})

/** Two servers on a fresh database with `env`; B starts once A has migrated it. */
const twoServers = async (env: Record<string, string>) => {
  const database = await freshDatabase(pgUrl!)
  drops.push(database.drop)
  const common = {
    MEDIAGATE_DATABASE_URL: database.url,
    MEDIAGATE_MEDIA_DIR: join(dir, "media"),
    MEDIAGATE_API_KEY: key,
    MEDIAGATE_SIMULATOR_PROFILE: "demo",
    ...env
  }
  const a = await startServer(common)
  const b = await startServer(common)
  return { a, b, databaseUrl: database.url }
}

/** Submits `count` tasks, alternately to each server, sync images and async videos. */
const submitMany = async (servers: ReadonlyArray<Server>, count: number) => {
  const taskIds: Array<string> = []
  for (let i = 0; i < count; i++) {
    const model = i % 2 === 0 ? "alpha-image-2/text-to-image" : "beta-imagine/text-to-video"
    taskIds.push(await submit(servers[i % servers.length]!.port, key, model, `task ${i}`))
  }
  return taskIds
}

/**
 * Waits until two workers each hold a live lease on at least `least` unfinished tasks (both
 * nodes are busy); answers the count per worker. Fails after `limitMs`.
 */
const bothBusy = async (databaseUrl: string, least: number, limitMs: number) => {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const until = Date.now() + limitMs
    for (;;) {
      const { rows } = await client.query<{ lease_owner: string; held: string }>(
        `SELECT lease_owner, count(*) AS held FROM mediagate_tasks
         WHERE due_at IS NOT NULL AND lease_owner IS NOT NULL AND lease_until > $1 GROUP BY lease_owner`,
        [Date.now()]
      )
      const held = rows.map((row) => Number(row.held)).filter((count) => count >= least)
      if (held.length >= 2 || Date.now() > until) return rows.map((row) => Number(row.held))
      await pause(50)
    }
  } finally {
    await client.end()
  }
}

describe("two standalone servers on one PostgreSQL database", () => {
  it.skipIf(pgUrl === undefined)(`killing one mid-flight, the other finishes every acknowledged task once the lease runs out${skip}`, {
    timeout: 60_000
  }, async () => {
    const { a, b, databaseUrl } = await twoServers({ MEDIAGATE_LEASE: "3s" })
    const taskIds = await submitMany([a, b], 40)
    const held = await bothBusy(databaseUrl, 2, 5_000)
    expect(held.filter((count) => count >= 2).length).toBe(2)

    const killedAt = Date.now()
    expect(await stop(a, "SIGKILL")).toEqual({ code: null, signal: "SIGKILL" })
    // Without a takeover the killed node's tasks would stay unfinished for ever.
    const statuses = await awaitTerminal(b.port, key, taskIds, 30_000)
    console.log(`nodes: ${taskIds.length} tasks (held at the kill: ${held.join(" and ")}) done ${Date.now() - killedAt} ms after SIGKILL, lease 3 s`)
    expect([...statuses.values()].map((task) => task.status).filter((status) => status !== "SUCCESS")).toEqual([])
    expect(statuses.size).toBe(taskIds.length)
  })

  it.skipIf(pgUrl === undefined)(`SIGTERM: the server exits 0 within its grace period and gives its tasks back to the other${skip}`, {
    timeout: 60_000
  }, async () => {
    // A lease of a minute: the other node finishing well within it shows the leases were given back.
    const { a, b, databaseUrl } = await twoServers({ MEDIAGATE_LEASE: "60s", MEDIAGATE_SHUTDOWN_GRACE: "2s" })
    const taskIds = await submitMany([a, b], 40)
    const held = await bothBusy(databaseUrl, 2, 5_000)
    expect(held.filter((count) => count >= 2).length).toBe(2)

    const stoppedAt = Date.now()
    const exit = await stop(a, "SIGTERM")
    const stopping = Date.now() - stoppedAt
    expect(exit).toEqual({ code: 0, signal: null })
    expect(a.output()).toContain("mediagate: SIGTERM: stopping")
    expect(a.output()).toContain("mediagate: stopped")
    // The process ends itself with 1 past grace + 5 s; this bound is the grace with room for a slow machine.
    expect(stopping).toBeLessThan(2_000 + 5_000)

    const statuses = await awaitTerminal(b.port, key, taskIds, 30_000)
    console.log(`nodes: SIGTERM to exit ${stopping} ms; ${taskIds.length} tasks (held: ${held.join(" and ")}) done ${Date.now() - stoppedAt} ms after SIGTERM, lease 60 s`)
    expect([...statuses.values()].map((task) => task.status).filter((status) => status !== "SUCCESS")).toEqual([])
    expect(statuses.size).toBe(taskIds.length)
  })
})
