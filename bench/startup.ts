/**
 * `npm run bench:startup`: how long a standalone node takes to answer, from spawning its
 * process to the first 200 from `/healthz`, on a database that is already migrated (and holds
 * its account): a SQLite file, and a PostgreSQL database when MEDIAGATE_TEST_PG_URL is set (or
 * `--pg <url>`). One node alone, and three started together (SQLite: a file each, as three
 * services on one host; PostgreSQL: one database, as a cluster), the latest of the three
 * counted. Two ways to start, taking turns round by round:
 *
 * - `built`: `node examples/standalone-server/dist/main.mjs`, what `npm start` runs (after its
 *   `prestart` makes the build current; that check is not timed, and neither is npm);
 * - `tsx`: `node --conditions=@mediagate/source --import tsx examples/standalone-server/src/main.ts`,
 *   how `npm start` ran before issue 37.
 *
 * Each start is polled every 10 ms (each try given 200 ms) on a port chosen beforehand; the figure is the median over
 * `BENCH_ROUNDS` (default 5) rounds, with the process's CPU (Linux /proc) at that moment.
 * `BENCH_STARTUP_WAYS=built` measures one way only; `BENCH_SERVER_ROOT=<checkout>` runs another
 * checkout's server (its dist/ must be built). Nothing here writes docs/benchmarks.md.
 */
import { pgUrl as envPgUrl } from "@mediagate/store-sql/testing"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { createServer } from "node:net"
import { join, resolve } from "node:path"
import { performance } from "node:perf_hooks"
import { cpuMillisOf, startHeapFlags, withDatabase } from "../scripts/bench-support.js"

const env = (name: string, fallback: string) => process.env[name] ?? fallback
const rounds = Number(env("BENCH_ROUNDS", "5"))
const serverRoot = resolve(env("BENCH_SERVER_ROOT", "."))
const pgUrl = (process.argv.includes("--pg") ? process.argv[process.argv.indexOf("--pg") + 1] : envPgUrl) || undefined

const ways = {
  // With the heap flags `npm start` gives it.
  built: [...startHeapFlags(serverRoot), join(serverRoot, "examples/standalone-server/dist/main.mjs")],
  tsx: ["--conditions=@mediagate/source", "--import", "tsx", join(serverRoot, "examples/standalone-server/src/main.ts")]
} as const
type Way = keyof typeof ways
const chosen = env("BENCH_STARTUP_WAYS", "tsx,built").split(",").map((way) => way.trim()) as Array<Way>

/** A port free now (the system's choice, released at once). */
const freePort = () =>
  new Promise<number>((done) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      server.close(() => done(port))
    })
  })

const sleep = (millis: number) => new Promise((done) => setTimeout(done, millis))

interface Started {
  readonly child: ChildProcess
  /** Milliseconds from the spawn to the first 200 from /healthz, and the CPU the process had used then. */
  readonly ready: Promise<{ readonly millis: number; readonly cpu: number }>
}

/** Spawns the server on `databaseUrl`; `ready` resolves at its first 200 from /healthz. */
const start = async (way: Way, databaseUrl: string, dir: string): Promise<Started> => {
  const port = await freePort()
  let output = ""
  const spawned = performance.now()
  const child = spawn(process.execPath, [...ways[way]], {
    // tsx resolves from the folder it starts in.
    cwd: serverRoot,
    env: {
      PATH: env("PATH", ""),
      MEDIAGATE_PORT: String(port),
      MEDIAGATE_HOST: "127.0.0.1",
      MEDIAGATE_DATABASE_URL: databaseUrl,
      MEDIAGATE_MEDIA_DIR: join(dir, "media"),
      MEDIAGATE_SIMULATOR_PROFILE: "instant"
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()))
  const ready = (async () => {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the server exited (${child.exitCode}) before answering: ${output}`)
      // A short limit on each try: a request the server accepts before its handler is in place
      // (the port listens while the services start) gets no answer, so a try may hang.
      const ok = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(200) }).then((response) => response.status === 200, () => false)
      if (ok) return { millis: performance.now() - spawned, cpu: cpuMillisOf(child.pid!) }
      await sleep(10)
    }
  })()
  return { child, ready }
}

/** SIGTERM, as an orchestrator stops a node, and its exit. */
const stop = (child: ChildProcess) =>
  new Promise<void>((done) => {
    if (child.exitCode !== null || child.signalCode !== null) return done()
    const killer = setTimeout(() => child.kill("SIGKILL"), 20_000)
    child.once("exit", () => (clearTimeout(killer), done()))
    child.kill("SIGTERM")
  })

/** Starts `databaseUrls.length` servers at once (one per URL); the slowest one's figures. */
const together = async (way: Way, databaseUrls: ReadonlyArray<string>, dir: string) => {
  const started = await Promise.all(databaseUrls.map((url) => start(way, url, dir)))
  try {
    const figures = await Promise.all(started.map(({ ready }) => ready))
    return figures.reduce((slowest, figure) => (figure.millis > slowest.millis ? figure : slowest))
  } finally {
    await Promise.all(started.map(({ child }) => stop(child)))
  }
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** One store: migrate its databases with a first start, then the rounds; a table row per way and node count. */
const measure = (store: "SQLite" | "PostgreSQL") =>
  withDatabase(store, pgUrl, "startup", async (url, dir) => {
    const urls = store === "SQLite" ? [0, 1, 2].map((n) => `sqlite:${join(dir, `node${n}.db`)}`) : [url, url, url]
    // Migrated, with an account: the first start of each database, not timed.
    for (const databaseUrl of new Set(urls)) await together(chosen.includes("built") ? "built" : chosen[0]!, [databaseUrl], dir)
    const results = new Map<string, Array<{ millis: number; cpu: number }>>()
    for (let round = 0; round < rounds; round++) {
      for (const way of chosen) {
        for (const count of [1, 3]) {
          const figure = await together(way, urls.slice(0, count), dir)
          const key = `${way} ${count}`
          results.set(key, [...(results.get(key) ?? []), figure])
          console.error(`${store}, ${way}, ${count} node${count === 1 ? "" : "s"}, round ${round + 1}: ${figure.millis.toFixed(0)} ms (CPU ${figure.cpu.toFixed(0)} ms)`)
        }
      }
    }
    const seconds = (millis: number) => (millis / 1000).toFixed(2)
    return [...results].map(([key, figures]) => {
      const [way, count] = key.split(" ")
      const millis = figures.map((figure) => figure.millis)
      return `| ${store} | ${way} | ${count} | ${seconds(median(millis))} s | ${seconds(Math.min(...millis))}-${seconds(Math.max(...millis))} s | ${
        median(figures.map((figure) => figure.cpu)).toFixed(0)
      } ms |`
    })
  })

if (chosen.includes("built") && serverRoot === resolve(".")) {
  // As `npm start`'s prestart: build dist/ if it is missing or older than the sources.
  execFileSync(process.execPath, ["scripts/ensure-built.mjs"], { stdio: "inherit" })
}
const rows: Array<string> = []
for (const store of pgUrl === undefined ? ["SQLite" as const] : ["SQLite" as const, "PostgreSQL" as const]) rows.push(...await measure(store))
console.log(
  [
    `spawn -> first 200 from /healthz, ${rounds} rounds, ways taking turns; with 3 nodes, the slowest of the three`,
    "",
    "| store | start | nodes | median | range | CPU (median) |",
    "|---|---|---|---|---|---|",
    ...rows
  ].join("\n")
)
