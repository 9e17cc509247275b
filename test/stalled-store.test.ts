/**
 * A SQLite store that stops answering (issue 33: a 25 s fsfreeze of the data folder left
 * /healthz unanswered, 0 of 6 probes, because the driver's calls held the event loop). The
 * standalone server as a process on a real SQLite file: while its statements wait on the
 * disk, /healthz still answers at once and /readyz says not ready within about 2 s, and
 * once the disk answers again so does everything else.
 *
 * Two ways to stall the store: another process holding the write lock, so the server's
 * writes wait out their busy timeout (5 s) on every try, which needs nothing special; and
 * a real `fsfreeze` of a loop-mounted ext4 folder, which needs root and loop devices and is
 * skipped, saying why, where it cannot run.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as pause } from "node:timers/promises"
import { killAll, type Server, startServer, submit } from "./standalone-process.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-stalled-store-"))
const key = "mg_stalled_store_key_0123456789"

const mount = join(dir, "frozen")

afterAll(() => {
  killAll()
  try {
    execFileSync("umount", ["-l", mount], { stdio: "ignore" })
  } catch {
    // Not mounted: the fsfreeze case did not run here.
  }
  rmSync(dir, { recursive: true, force: true })
})

/** One GET with a time limit: its status and body and how long it took, or `timeout`. */
const probe = async (url: string, limitMs: number) => {
  const started = performance.now()
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(limitMs) })
    const body = await response.json() as { code: number; msg: string; data: unknown }
    return { status: response.status, body, ms: performance.now() - started }
  } catch {
    return { status: "timeout" as const, body: undefined, ms: performance.now() - started }
  }
}

/**
 * While the store is stalled: /healthz probed every 200 ms with a 1 s limit, and /readyz
 * asked (3 s limit) until it says not ready. Answers every /healthz probe and every
 * /readyz answer. Waits on a real process, so it pauses between probes; nothing in it
 * measures the server by the pause.
 */
const probeWhileStalled = async (server: Server) => {
  // A write on its way, so that the store really waits: reads alone may not touch the disk
  // (the page cache) or the lock (WAL), and the engine's own writes may have paused. Its
  // answer comes once the store answers again (or never, if the server is killed first).
  void submit(server.port, key, "dream-4", "written while the store is stalled").catch(() => undefined)
  const health: Array<Awaited<ReturnType<typeof probe>>> = []
  let stop = false
  const prober = (async () => {
    while (!stop) {
      health.push(await probe(`${server.url}/healthz`, 1000))
      await pause(200)
    }
  })()
  const ready: Array<Awaited<ReturnType<typeof probe>>> = []
  for (let round = 0; round < 4; round++) {
    const answer = await probe(`${server.url}/readyz`, 3000)
    ready.push(answer)
    if (answer.status === 503) break
  }
  // However soon readiness answered: enough liveness probes while the store is still stalled.
  while (health.length < 5) await pause(50)
  stop = true
  await prober
  return { health, ready }
}

/** Tasks of the demo profile (a few seconds each), so the engine writes to the store while they run. */
const busy = (server: Server) => Promise.all([1, 2, 3].map((n) => submit(server.port, key, "dream-4", `stalled store ${n}`)))

/** /readyz asked (3 s limit each) until it answers 200, at most 10 times: the status it last answered. */
const readyAgain = async (server: Server) => {
  let again = await probe(`${server.url}/readyz`, 3000)
  for (let round = 0; again.status !== 200 && round < 10; round++) again = await probe(`${server.url}/readyz`, 3000)
  return again.status
}

const expectStalledButAnswering = ({ health, ready }: Awaited<ReturnType<typeof probeWhileStalled>>) => {
  expect(health.length).toBeGreaterThanOrEqual(5)
  // Every liveness probe answered, and quickly: the event loop is free while the store waits.
  expect(health.filter((answer) => answer.status !== 200)).toEqual([])
  expect(Math.max(...health.map((answer) => answer.ms))).toBeLessThan(1000)
  // Readiness says not ready, in the envelope, within about 2 s of asking (its store check's time limit).
  const last = ready[ready.length - 1]!
  expect(last.status, JSON.stringify(ready)).toBe(503)
  expect(last.body).toMatchObject({ code: 503, msg: "not ready: store (did not answer within 2s)", data: { status: "not_ready" } })
  expect(last.ms).toBeLessThan(2900)
}

describe("a SQLite store that does not answer", () => {
  it("another process holding the write lock: /healthz answers within 1 s and /readyz is 503 within about 2 s; ready again once the lock goes", async () => {
    const folder = join(dir, "locked")
    mkdirSync(folder)
    const file = join(folder, "mediagate.db")
    const server = await startServer({ MEDIAGATE_API_KEY: key, MEDIAGATE_DATABASE_URL: `sqlite:${file}`, MEDIAGATE_MEDIA_DIR: join(folder, "media") })
    expect((await probe(`${server.url}/readyz`, 3000)).status).toBe(200)
    await busy(server)
    const holder = new Sqlite(file)
    try {
      holder.exec("BEGIN IMMEDIATE")
      expectStalledButAnswering(await probeWhileStalled(server))
    } finally {
      holder.close()
    }
    // The store's writes that waited out their busy timeout failed and are retried; readiness comes back.
    expect(await readyAgain(server)).toBe(200)
  }, 60_000)

  /** Why the fsfreeze case cannot run here, or undefined once a loop-mounted ext4 is ready at `mount`. */
  const unfreezable = (() => {
    if (process.getuid?.() !== 0) return "not root (mount and fsfreeze need root)"
    try {
      const image = join(dir, "disk.img")
      mkdirSync(mount)
      execFileSync("truncate", ["-s", "64M", image])
      execFileSync("mkfs.ext4", ["-q", "-F", image], { stdio: "pipe" })
      execFileSync("mount", ["-o", "loop", image, mount], { stdio: "pipe" })
    } catch (error) {
      return `no loop-mounted ext4 here (${(error as Error).message.split("\n")[0]})`
    }
    try {
      execFileSync("fsfreeze", ["-f", mount], { stdio: "pipe" })
      execFileSync("fsfreeze", ["-u", mount], { stdio: "pipe" })
      return undefined
    } catch (error) {
      execFileSync("umount", ["-l", mount])
      return `fsfreeze does not work here (${(error as Error).message.split("\n")[0]})`
    }
  })()
  if (unfreezable !== undefined) console.log(`stalled-store: the fsfreeze case does not run here: ${unfreezable}`)

  it.skipIf(unfreezable !== undefined)("a real fsfreeze of the data folder: /healthz answers within 1 s and /readyz is 503 within about 2 s; nothing is lost after the thaw", async () => {
    let frozen = false
    try {
      const server = await startServer({
        MEDIAGATE_API_KEY: key,
        MEDIAGATE_DATABASE_URL: `sqlite:${join(mount, "mediagate.db")}`,
        MEDIAGATE_MEDIA_DIR: join(mount, "media")
      })
      expect((await probe(`${server.url}/readyz`, 3000)).status).toBe(200)
      const before = await busy(server)
      execFileSync("fsfreeze", ["-f", mount])
      frozen = true
      const stalled = await probeWhileStalled(server)
      execFileSync("fsfreeze", ["-u", mount])
      frozen = false
      expectStalledButAnswering(stalled)
      expect(await readyAgain(server)).toBe(200)
      // The tasks submitted before the freeze are all still there.
      for (const taskId of before) {
        const task = await fetch(`${server.url}/api/v1/task/${taskId}`, { headers: { authorization: `Bearer ${key}` } })
        expect(task.status).toBe(200)
      }
      server.child.kill("SIGKILL")
      await server.exited
    } finally {
      if (frozen) execFileSync("fsfreeze", ["-u", mount])
      killAll()
    }
  }, 60_000)
})
