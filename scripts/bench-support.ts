/**
 * What bench:e2e and bench:http both need: the CPU a server process has used, and a
 * database of its own per run.
 */
import { freshPgDatabase } from "@mediagate/store-sql/testing"
import { Effect } from "effect"
import { execSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const clockTick = (() => {
  try {
    return Number(execSync("getconf CLK_TCK").toString().trim()) || 100
  } catch {
    return 100
  }
})()

/** CPU milliseconds a process has used so far (Linux), or NaN elsewhere. */
export const cpuMillisOf = (pid: number): number => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTick
  } catch {
    return Number.NaN
  }
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
