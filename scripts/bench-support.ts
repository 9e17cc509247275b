/**
 * What bench:e2e and bench:http both need: where a server process listens, the CPU it has
 * used, and a database of its own per run.
 */
import { freshPgDatabase } from "@mediagate/store-sql/testing"
import { Effect } from "effect"
import { type ChildProcess, execSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const clockTick = (() => {
  try {
    return Number(execSync("getconf CLK_TCK").toString().trim()) || 100
  } catch {
    return 100
  }
})()

/**
 * The URL a server started on MEDIAGATE_PORT=0 prints once it listens (mediagate's banner,
 * `ready on <url>` from bench/bare and the platform floor), read from its piped standard
 * output; what it prints after is drained and dropped.
 */
export const listeningUrl = (child: ChildProcess) =>
  new Promise<string>((resolve, reject) => {
    let output = ""
    const onData = (chunk: Buffer) => {
      const found = /(?:mediagate listening on|ready on) (http:\/\/\S+)/.exec(output += chunk.toString())
      if (found === null) return
      child.stdout!.off("data", onData).resume()
      resolve(found[1]!)
    }
    child.stdout!.on("data", onData)
    child.once("exit", (code) => reject(new Error(`exited (${code}) before it listened: ${output}`)))
  })

/** User + system CPU milliseconds of a /proc `stat` file (a process's, or one of its threads'). */
const statCpuMillis = (path: string): number => {
  const fields = readFileSync(path, "utf8").replace(/^.*\) /, "").split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTick
}

/** CPU milliseconds a process has used so far (Linux), or NaN elsewhere. */
export const cpuMillisOf = (pid: number): number => {
  try {
    return statCpuMillis(`/proc/${pid}/stat`)
  } catch {
    return Number.NaN
  }
}

/**
 * The V8 heap flags (`--max-semi-space-size=64` and the like) of a checkout's `npm start`,
 * so that a benchmark runs that checkout's standalone server with the heap it is started with
 * (none before issue 37's nursery change).
 */
export const startHeapFlags = (root: string): Array<string> => {
  const start = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { scripts?: { start?: string } }).scripts?.start ?? ""
  return start.split(/\s+/).filter((token) => /^--(max|min)-(semi|old)-space-size=\d+$/.test(token))
}

/** CPU milliseconds (user + system) of each thread of a process by thread id (Linux /proc); the main thread's id is the pid. */
export const threadCpuMillisOf = (pid: number): Map<number, number> => {
  const threads = new Map<number, number>()
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) threads.set(Number(tid), statCpuMillis(`/proc/${pid}/task/${tid}/stat`))
  } catch {
    // The process ended.
  }
  return threads
}

/**
 * Runs `f` on a database of its own: a SQLite file in a temporary folder, or a fresh
 * PostgreSQL database on `pgUrl` (named after `label`), dropped afterwards.
 */
export const withDatabase = <A>(
  store: "SQLite" | "PostgreSQL",
  pgUrl: string | undefined,
  label: string,
  f: (url: string, dir: string) => Promise<A>
): Promise<A> => {
  const inFolder = async (url: (dir: string) => string) => {
    const dir = mkdtempSync(join(tmpdir(), `mediagate-bench-${label}-`))
    try {
      return await f(url(dir), dir)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
  return store === "SQLite"
    ? inFolder((dir) => `sqlite:${join(dir, "bench.db")}`)
    : Effect.runPromise(Effect.scoped(Effect.flatMap(freshPgDatabase(pgUrl!, label), (url) => Effect.promise(() => inFolder(() => url)))))
}
