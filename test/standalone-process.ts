/**
 * The standalone server as a child process, for the suites that kill or stop it: started
 * with node itself (tsx as a loader), so a signal reaches the server, not a wrapper.
 */
import type { HttpMethod } from "@effect/platform"
import { type ChildProcess, spawn } from "node:child_process"
import { setTimeout as pause } from "node:timers/promises"
import { nodeArgs } from "./programs.js"
import { clientAt, Raw } from "./support.js"

const root = new URL("..", import.meta.url).pathname

/** A running server: its process, where it listens (from its banner) and what it printed so far. */
export interface Server {
  readonly child: ChildProcess
  readonly port: number
  /** `http://127.0.0.1:<port>`, as the banner printed it. */
  readonly url: string
  readonly output: () => string
  /** Resolves with how the process ended. */
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
}

/** Every server process started, so a suite can kill what is left in `afterAll`. */
const started: Array<ChildProcess> = []

/** Kills every server still running. */
export const killAll = () => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
}

/** The URL the banner says the server listens on, once that line is printed. */
export const listeningUrl = (output: string) => /mediagate listening on (http:\/\/\S+) /.exec(output)?.[1]

/**
 * Starts the server with `env` (MEDIAGATE_* variables) and resolves once it prints that it
 * listens. It listens on a port the system chooses (MEDIAGATE_PORT=0), read back from the
 * banner; a suite that needs a given one (the same URLs across a restart) sets MEDIAGATE_PORT.
 */
export const startServer = (env: Record<string, string>) =>
  new Promise<Server>((resolve, reject) => {
    const child = spawn(process.execPath, nodeArgs("server"), {
      cwd: root,
      // These suites drive one key hard (hundreds of tasks at once); test/rate-limit.test.ts
      // checks the limits, with their defaults, and test/credits.test.ts and admin.test.ts
      // what too little credit does.
      env: { ...process.env, MEDIAGATE_PORT: "0", MEDIAGATE_RATE_LIMIT: "off", MEDIAGATE_STARTING_CREDITS: "100000", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    let listening = false
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
      child.on("exit", (code, signal) => done({ code, signal }))
    )
    started.push(child)
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      const url = listening ? undefined : listeningUrl(output)
      if (url !== undefined) {
        listening = true
        resolve({ child, port: Number(new URL(url).port), url, output: () => output, exited })
      }
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    void exited.then(({ code, signal }) => {
      if (!listening) reject(new Error(`server exited (${code ?? signal}) before listening: ${output}`))
    })
  })

/** Sends `signal` and resolves with how the process ended. */
export const stop = (server: Server, signal: NodeJS.Signals) => {
  server.child.kill(signal)
  return server.exited
}

/** A call to the API of the server on `port` with `key` (the shared client's `call`); the body parsed as JSON. */
export const api = (
  port: number,
  key: string,
  path: string,
  init: { readonly method?: HttpMethod.HttpMethod; readonly body?: string; readonly headers?: Record<string, string> } = {}
) => clientAt(port, key).call(init.method ?? "GET", path, { body: init.body === undefined ? undefined : new Raw(init.body), headers: init.headers })

/** Submits a task; resolves with its id once the server acknowledged it. */
export const submit = (port: number, key: string, model: string, prompt: string) => clientAt(port, key).submitId({ model, input: { prompt } })

/** Statuses a task never leaves. */
export const terminal = new Set(["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"])

/**
 * Polls the tasks over the API of the server on `port` until each is terminal or `limitMs`
 * has passed; answers each task as last seen (its status is `HTTP <code>` if the query
 * failed). Waits on real processes, so it pauses between rounds; nothing in it measures time.
 */
export const awaitTerminal = async (port: number, key: string, taskIds: ReadonlyArray<string>, limitMs: number) => {
  const tasks = new Map<string, { readonly status: string } & Record<string, any>>()
  const until = Date.now() + limitMs
  for (;;) {
    const open = taskIds.filter((taskId) => !terminal.has(tasks.get(taskId)?.status ?? ""))
    if (open.length === 0 || Date.now() > until) return tasks
    for (const taskId of open) {
      const answer = await api(port, key, `/api/v1/task/${taskId}`)
      tasks.set(taskId, answer.status === 200 ? answer.body.data : { status: `HTTP ${answer.status}` })
    }
    await pause(200)
  }
}
