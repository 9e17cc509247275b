/**
 * The standalone server as an operator meets it: started as a child process, what it
 * prints and what it refuses. Each start runs until the banner is complete (or the
 * process exits), then it is stopped; nothing here measures time.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { nodeArgs } from "./programs.js"
import { awaitTerminal, killAll, listeningUrl, startServer, stop, submit } from "./standalone-process.js"

const root = new URL("..", import.meta.url).pathname
const dir = mkdtempSync(join(tmpdir(), "mediagate-standalone-"))
afterAll(() => {
  killAll()
  rmSync(dir, { recursive: true, force: true })
})


/**
 * As `npm start` does: its `prestart` (scripts/ensure-built.mjs, which builds
 * examples/standalone-server/dist/ when it is missing or older than the sources), then node
 * on the built server.
 */
const npmStartArgs = () => {
  execFileSync(process.execPath, [join(root, "scripts/ensure-built.mjs")], { cwd: root, stdio: "inherit" })
  return [join(root, "examples/standalone-server/dist/main.mjs")]
}

/** How a start runs the server: the bundle built for this run (test/setup/entries.ts), or as `npm start` does. */
const entries = {
  bundle: () => nodeArgs("server"),
  npmStart: npmStartArgs
}

/** Starts the server with `env` in `cwd`; resolves with its exit code (null if it was stopped after its banner) and output. */
const run = (env: Record<string, string>, cwd = dir, entry: keyof typeof entries = "bundle") =>
  new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn(process.execPath, entries[entry](), {
      cwd,
      env: {
        PATH: process.env["PATH"] ?? "",
        MEDIAGATE_PORT: "0",
        MEDIAGATE_MEDIA_DIR: join(dir, "media"),
        MEDIAGATE_SIMULATOR_PROFILE: "instant",
        ...env
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    let stopped = false
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      // The banner ends with the second curl line.
      if (!stopped && /curl -s http:\/\/\S+\/api\/v1\/task\/<taskId>.*\n/.test(output)) {
        stopped = true
        child.kill("SIGKILL")
      }
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.on("exit", (code) => resolve({ code: stopped ? null : code, output }))
  })

const secretPattern = /whsec_[A-Za-z0-9+/=]{20,}/g
const keyPattern = /mg_[0-9A-Za-z]{38}/g

const accountIds = (file: string) => {
  const db = new Sqlite(file, { readonly: true })
  try {
    return (db.prepare("SELECT id FROM mediagate_accounts ORDER BY created_at, id").all() as Array<{ id: string }>).map((row) => row.id)
  } finally {
    db.close()
  }
}

describe("standalone server configuration", () => {
  it("a variable that does not parse: one line naming it and the allowed values, exit 1", { timeout: 60_000 }, async () => {
    const { code, output } = await run({ MEDIAGATE_SIMULATOR_PROFILE: "fast", MEDIAGATE_PORT: "http" })
    expect(code).toBe(1)
    expect(output.trim().split("\n")).toEqual([
      `mediagate: cannot start: MEDIAGATE_PORT must be a whole number from 0 to 65535, 0 for any free port (got "http")`,
      `mediagate: cannot start: MEDIAGATE_SIMULATOR_PROFILE must be one of instant, demo, realistic (got "fast")`
    ])
  })

  it("a SQLite file in a folder that does not exist is refused, and the folder is not created", { timeout: 60_000 }, async () => {
    const missing = join(dir, "no-such-dir", "deeper")
    const { code, output } = await run({ MEDIAGATE_DATABASE_URL: `sqlite:${join(missing, "x.db")}` })
    expect(code).toBe(1)
    expect(output.trim()).toBe(
      `mediagate: cannot start: cannot open database ${join(missing, "x.db")}: the folder ${missing} does not exist`
    )
    expect(existsSync(join(dir, "no-such-dir"))).toBe(false)
  })

  // As `npm start` runs it, from its build: the README's first command.
  it("the default ./data folder is created at the first start", { timeout: 60_000 }, async () => {
    const home = mkdtempSync(join(dir, "home-"))
    const { code, output } = await run({}, home, "npmStart")
    expect(code, output).toBe(null)
    expect(existsSync(join(home, "data", "mediagate.db"))).toBe(true)
  })
})

describe("npm start", () => {
  // `prestart` (and `preadmin`): the build is made again when what it was made from changed,
  // and otherwise left as it is.
  it("prestart builds examples/standalone-server/dist again when a file it came from changed, and only then", { timeout: 120_000 }, () => {
    const ensure = () => spawnSync(process.execPath, [join(root, "scripts/ensure-built.mjs")], { cwd: root, encoding: "utf8" })
    const startedAt = () => (JSON.parse(readFileSync(join(root, "examples/standalone-server/dist/build.json"), "utf8")) as { startedAt: number }).startedAt
    expect(ensure().status).toBe(0)
    const built = startedAt()
    const unchanged = ensure()
    expect(unchanged.stderr).toBe("")
    expect(startedAt()).toBe(built)
    // The build's own definition, a file no other test reads: it now looks newer than the build.
    utimesSync(join(root, "scripts/bundle-programs.ts"), new Date(), new Date())
    const changed = ensure()
    expect(changed.status, changed.stderr).toBe(0)
    expect(changed.stderr).toContain("mediagate: building examples/standalone-server/dist (scripts/bundle-programs.ts changed)")
    expect(startedAt()).toBeGreaterThan(built)
    expect(ensure().stderr).toBe("")
  })

  /** The command lines of the processes of a process group (Linux /proc), arguments joined by spaces. */
  const groupCommands = (group: number) =>
    readdirSync("/proc").filter((name) => /^\d+$/.test(name)).flatMap((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ")
        if (Number(stat[2]) !== group) return []
        return [readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((arg) => arg !== "").join(" ")]
      } catch {
        return [] // gone meanwhile
      }
    })

  // Containers and process managers signal the process they started: `npm start` must be
  // that process's whole tree, not a shell or a tsx parent left behind with the server.
  it("SIGTERM to the npm start process drains the server and exits", { timeout: 60_000 }, async () => {
    const home = mkdtempSync(join(dir, "npm-start-"))
    const child = spawn("npm", ["start"], {
      cwd: root,
      detached: true,
      env: {
        PATH: process.env["PATH"] ?? "",
        HOME: home,
        MEDIAGATE_PORT: "0",
        MEDIAGATE_DATABASE_URL: `sqlite:${join(home, "mediagate.db")}`,
        MEDIAGATE_MEDIA_DIR: join(home, "media"),
        MEDIAGATE_SIMULATOR_PROFILE: "instant"
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)))
    let output = ""
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const onData = (chunk: Buffer) => {
          output += chunk.toString()
          const found = listeningUrl(output)
          if (found !== undefined) resolve(found)
        }
        child.stdout!.on("data", onData)
        child.stderr!.on("data", onData)
        void exited.then((code) => reject(new Error(`npm start exited (${code}) before listening: ${output}`)))
      })
      expect((await fetch(`${url}/healthz`)).status).toBe(200)
      // The server is the built one, with the young generation the docs give it
      // (docs/operations.md, "Node's young generation").
      const server = groupCommands(child.pid!).find((command) => command.includes("examples/standalone-server/dist/main.mjs"))
      expect(server, groupCommands(child.pid!).join("\n")).toMatch(/^node --max-semi-space-size=64 /)
      child.kill("SIGTERM")
      expect(await exited, output).toBe(0)
      expect(output).toContain("mediagate: SIGTERM: stopping")
      // Nothing of the tree is left listening.
      await expect(fetch(`${url}/healthz`)).rejects.toThrow()
    } finally {
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        // the whole group has exited
      }
    }
  })
})

describe("standalone server secrets", () => {
  it("a generated key and secret are printed at the start that made them, never again", { timeout: 60_000 }, async () => {
    const file = join(dir, "generated.db")
    const first = await run({ MEDIAGATE_DATABASE_URL: `sqlite:${file}` })
    expect(first.code, first.output).toBe(null)
    const keys = first.output.match(keyPattern) ?? []
    const secrets = first.output.match(secretPattern) ?? []
    expect(new Set(keys).size).toBe(1)
    expect(secrets).toHaveLength(1)
    expect(first.output).toContain(`Bearer ${keys[0]}`)

    const second = await run({ MEDIAGATE_DATABASE_URL: `sqlite:${file}` })
    expect(second.code, second.output).toBe(null)
    expect(second.output).not.toMatch(keyPattern)
    expect(second.output).not.toMatch(secretPattern)
    expect(second.output).toContain("cannot be shown again here; `npm run admin -- secret show <account-id>` shows it")
    expect(second.output).toContain("Bearer <your key>")
  })

  it("a key from MEDIAGATE_API_KEY is never printed; its new account's secret only at the start that made it", { timeout: 60_000 }, async () => {
    const file = join(dir, "operator.db")
    const key = "operator-chosen-key-0123456789"
    const env = { MEDIAGATE_DATABASE_URL: `sqlite:${file}`, MEDIAGATE_API_KEY: key }
    const first = await run(env)
    expect(first.code, first.output).toBe(null)
    expect(first.output).not.toContain(key)
    expect(first.output).toContain("Bearer <your MEDIAGATE_API_KEY>")
    expect(first.output.match(secretPattern) ?? []).toHaveLength(1)

    const second = await run(env)
    expect(second.code, second.output).toBe(null)
    expect(second.output).not.toContain(key)
    expect(second.output).not.toMatch(secretPattern)
    expect(second.output).toContain("cannot be shown again here; `npm run admin -- secret show <account-id>` shows it")
  })

  it("account ids are random, not derived from the key", { timeout: 60_000 }, async () => {
    const file = join(dir, "ids.db")
    const key = "another-operator-key-0123456789"
    await run({ MEDIAGATE_DATABASE_URL: `sqlite:${file}` })
    await run({ MEDIAGATE_DATABASE_URL: `sqlite:${file}`, MEDIAGATE_API_KEY: key })
    const ids = accountIds(file)
    expect(ids).toHaveLength(2)
    for (const id of ids) expect(id).toMatch(/^acct_[0-9a-f]{24}$/)
    const keyHash = createHash("sha256").update(key).digest("hex")
    for (const id of ids) expect(keyHash).not.toContain(id.slice("acct_".length, "acct_".length + 8))
  })
})

describe("MEDIAGATE_PORT=0", () => {
  it("the system chooses the port: the banner, the OpenAPI servers and a finished task's media URLs name it", { timeout: 60_000 }, async () => {
    const key = "port-zero-key-0123456789"
    const server = await startServer({ MEDIAGATE_API_KEY: key, MEDIAGATE_DATABASE_URL: "memory", MEDIAGATE_SIMULATOR_PROFILE: "instant" })
    const url = listeningUrl(server.output())!
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:[1-9]\d*$/)
    expect(server.output()).toContain(`curl -s -X POST ${url}/api/v1/task/submit`)
    const headers = { authorization: `Bearer ${key}` }
    const openapi = await fetch(`${url}/api/v1/openapi.json`, { headers }).then((response) => response.json() as Promise<{ servers: unknown }>)
    expect(openapi.servers).toEqual([{ url }])
    const taskId = await submit(server.port, key, "alpha-image-2/text-to-image", "a lighthouse at dawn")
    const task = (await awaitTerminal(server.port, key, [taskId], 30_000)).get(taskId)!
    expect(task.status).toBe("SUCCESS")
    const media: string = task.result.urls[0]
    expect(media).toMatch(new RegExp(`^${url}/media/[0-9a-f]{32}\\.png$`))
    expect((await fetch(media)).status).toBe(200)
    await stop(server, "SIGTERM")
  })

  it("a port 0 that cannot be bound (an address not on this machine): one line, exit 1", { timeout: 60_000 }, async () => {
    const { code, output } = await run({ MEDIAGATE_DATABASE_URL: "memory", MEDIAGATE_HOST: "192.0.2.1" })
    expect(code).toBe(1)
    expect(output.trim().split("\n")).toEqual([expect.stringMatching(/^mediagate: cannot start: listen EADDRNOTAVAIL: address not available 192\.0\.2\.1\b/)])
  })
})
