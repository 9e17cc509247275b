/**
 * Crash safety under load: the standalone server on a SQLite file is killed with SIGKILL
 * several times while clients keep submitting, each time started again; every task it
 * acknowledged (answered 200) is there afterwards and ends SUCCESS, in one upstream attempt.
 * Submits cut off by a kill were never acknowledged and are not counted. The lease is 2 s
 * (MEDIAGATE_LEASE) so that a restarted server takes over the killed one's tasks soon. This
 * suite waits on real processes, so it polls with short pauses; nothing in it measures time.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as pause } from "node:timers/promises"
import { awaitTerminal, killAll, startServer, stop, submit } from "./standalone-process.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-crash-"))
const key = "crash-test-key"
afterAll(() => {
  killAll()
  rmSync(dir, { recursive: true, force: true })
})

const env = {
  MEDIAGATE_DATABASE_URL: `sqlite:${join(dir, "mediagate.db")}`,
  MEDIAGATE_MEDIA_DIR: join(dir, "media"),
  MEDIAGATE_API_KEY: key,
  MEDIAGATE_SIMULATOR_PROFILE: "demo",
  MEDIAGATE_LEASE: "2s"
}

const cycles = 4
const clients = 3
/** Acknowledged submits per cycle before the kill; the clients go on submitting until it. */
const perCycle = 20

describe("SIGKILL cycles under load", () => {
  it("every acknowledged task survives every crash and ends SUCCESS", { timeout: 90_000 }, async () => {
    const acknowledged: Array<{ readonly taskId: string; readonly prompt: string }> = []
    let refused = 0
    for (let cycle = 0; cycle < cycles; cycle++) {
      // Each start on a port of its own: nothing here needs the URLs of an earlier one.
      const server = await startServer(env)
      const before = acknowledged.length
      let killing = false
      const client = async (id: number) => {
        for (let i = 0; !killing; i++) {
          const prompt = `cycle ${cycle} client ${id} task ${i}`
          const model = i % 2 === 0 ? "alpha-image-2/text-to-image" : "beta-imagine/text-to-video"
          try {
            acknowledged.push({ taskId: await submit(server.port, key, model, prompt), prompt })
          } catch {
            // Cut off by the kill: never acknowledged.
            refused++
          }
        }
      }
      const load = Array.from({ length: clients }, (_, id) => client(id))
      while (acknowledged.length - before < perCycle) await pause(10)
      // Later cycles run a little longer, so the kill finds calls at different stages.
      await pause(250 * cycle)
      killing = true
      expect(await stop(server, "SIGKILL")).toEqual({ code: null, signal: "SIGKILL" })
      await Promise.all(load)
    }

    const server = await startServer(env)
    const tasks = await awaitTerminal(server.port, key, acknowledged.map((task) => task.taskId), 45_000)
    console.log(`crash-cycles: ${acknowledged.length} acknowledged over ${cycles} kills (${refused} submits cut off)`)
    expect(tasks.size).toBe(acknowledged.length)
    for (const { prompt, taskId } of acknowledged) {
      const task = tasks.get(taskId)!
      expect({ taskId, status: task.status, prompt: task["input"]?.prompt }).toEqual({ taskId, status: "SUCCESS", prompt })
      // A crash resumes the attempt it interrupted (same idempotency key); it never starts another.
      expect(task["attempts"].map((attempt: any) => [attempt.attempt, attempt.outcome])).toEqual([[1, "succeeded"]])
    }
    // The simulator counts its jobs per idempotency key (`Simulator.Stats`, tested in
    // packages/upstream), but in memory: a killed server takes its count with it, so across
    // kills this test checks the attempts each task records, which survive in the store.
    await stop(server, "SIGTERM")
  })
})
