/**
 * Durability: the standalone server runs as a child process on a SQLite file, takes
 * tasks, is killed with SIGKILL, starts again, and every acknowledged task is there and
 * goes on to finish (test/crash-cycles.test.ts does the same several times under load). This suite waits on a real process, so it polls over HTTP with short
 * pauses; nothing in it measures time.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as pause } from "node:timers/promises"
import { nodeArgs } from "./programs.js"
import { api as shared, listeningUrl } from "./standalone-process.js"

const root = new URL("..", import.meta.url).pathname
const dir = mkdtempSync(join(tmpdir(), "mediagate-restart-"))
const key = "restart-test-key"
const children: Array<ChildProcess> = []
afterAll(() => {
  for (const child of children) child.kill("SIGKILL")
  rmSync(dir, { recursive: true, force: true })
})


/**
 * Starts the server and resolves once it prints that it listens, with the port the system
 * chose: a start does not need an earlier one's URLs.
 */
const start = () =>
  new Promise<{ readonly child: ChildProcess; readonly port: number }>((resolve, reject) => {
    // node itself runs the server (tsx as a loader), so SIGKILL hits the server process.
    const child = spawn(process.execPath, nodeArgs("server"), {
      cwd: root,
      env: {
        ...process.env,
        MEDIAGATE_PORT: "0",
        MEDIAGATE_DATABASE_URL: `sqlite:${join(dir, "mediagate.db")}`,
        MEDIAGATE_MEDIA_DIR: join(dir, "media"),
        MEDIAGATE_API_KEY: key,
        MEDIAGATE_SIMULATOR_PROFILE: "demo",
        // The killed server's tasks are taken over once their lease runs out: 2 s, not the default 15 s.
        MEDIAGATE_LEASE: "2s",
        // One key submits a burst of tasks; test/rate-limit.test.ts checks the limits.
        MEDIAGATE_RATE_LIMIT: "off"
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    children.push(child)
    let output = ""
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const url = listeningUrl(output)
      if (url !== undefined) resolve({ child, port: Number(new URL(url).port) })
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.on("exit", (code) => reject(new Error(`server exited with ${code}: ${output}`)))
  })

const api = (port: number, path: string, init: { readonly method?: "GET" | "POST"; readonly body?: string } = {}) => shared(port, key, path, init)

const killed = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    child.on("exit", () => resolve())
    child.kill("SIGKILL")
  })

describe("restart after SIGKILL", () => {
  it("every acknowledged task survives and finishes", { timeout: 90_000 }, async () => {
    const first = await start()
    const submitted: Array<{ taskId: string; prompt: string }> = []
    for (let i = 0; i < 25; i++) {
      const prompt = `task ${i}`
      const model = i % 2 === 0 ? "alpha-image-2/text-to-image" : "beta-imagine/text-to-video"
      const answer = await api(first.port, "/api/v1/task/submit", { method: "POST", body: JSON.stringify({ model, input: { prompt } }) })
      expect(answer.status).toBe(200)
      submitted.push({ taskId: answer.body.data.taskId, prompt })
    }
    // Killed right after the last acknowledgement, with work in flight.
    await killed(first.child)

    const { port } = await start()
    for (const { prompt, taskId } of submitted) {
      const answer = await api(port, `/api/v1/task/${taskId}`)
      expect(answer.status).toBe(200)
      expect(answer.body.data.input.prompt).toBe(prompt)
    }
    const unfinished = new Set(submitted.map((task) => task.taskId))
    for (let round = 0; round < 300 && unfinished.size > 0; round++) {
      for (const taskId of [...unfinished]) {
        const { body } = await api(port, `/api/v1/task/${taskId}`)
        if (body.data.status === "SUCCESS") unfinished.delete(taskId)
        else expect(["PENDING", "SUBMITTED", "PROCESSING"]).toContain(body.data.status)
      }
      if (unfinished.size > 0) await pause(200)
    }
    expect([...unfinished]).toEqual([])
  })
})
