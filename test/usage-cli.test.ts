/**
 * Usage agrees with `credits show` to the micro-dollar, on the standalone server and the
 * admin CLI as an operator runs them, on SQLite (and PostgreSQL when MEDIAGATE_TEST_PG_URL is
 * set): an account made and credited by the CLI runs tasks that succeed, fail and are
 * cancelled; its usage report (customer and admin form, JSON and CSV) spends exactly the
 * charges `credits show --json` lists, refunds its releases, and balance = credits - spend.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { freshDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { nodeArgs } from "./programs.js"
import { api, awaitTerminal, killAll, startServer, stop } from "./standalone-process.js"
import { clientAt } from "./support.js"

const root = new URL("..", import.meta.url).pathname
const adminKey = "mga_usage_cli_admin_key_0123456789abcdef"
let dir: string
const drops: Array<() => Promise<void>> = []
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "mediagate-usage-cli-"))
})
afterAll(async () => {
  killAll()
  await Promise.all(drops.map((drop) => drop()))
  rmSync(dir, { recursive: true, force: true })
})
const skipped = pgSkipReason("usage-cli")

const admin = (databaseUrl: string, args: ReadonlyArray<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, nodeArgs("admin", ...args), {
      cwd: root,
      env: { PATH: process.env["PATH"] ?? "", MEDIAGATE_DATABASE_URL: databaseUrl },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

const databases: ReadonlyArray<readonly [string, () => Promise<string>]> = [
  ["sqlite", async () => `sqlite:${join(dir, "usage.db")}`],
  ...(pgUrl === undefined ? [] : [[
    "postgres",
    async () => {
      const database = await freshDatabase(pgUrl!, "usage_cli")
      drops.push(database.drop)
      return database.url
    }
  ] as const])
]

describe(`usage and credits show${skipped}`, () => {
  for (const [name, make] of databases) {
    it(`on ${name}: spend = the charges credits show lists, refunds = its releases, balance = credits - spend`, { timeout: 240_000 }, async () => {
      const databaseUrl = await make()
      const created = await admin(databaseUrl, ["account", "create", "--name", "usage", "--json"])
      expect(created.code).toBe(0)
      const { account, key } = JSON.parse(created.stdout)
      expect((await admin(databaseUrl, ["credits", "add", account.id, "2.5", "--id", "usage-topup"])).code).toBe(0)
      const server = await startServer({
        MEDIAGATE_DATABASE_URL: databaseUrl,
        MEDIAGATE_SIMULATOR_PROFILE: "demo",
        MEDIAGATE_MEDIA_DIR: join(dir, `media-${name}`),
        MEDIAGATE_ADMIN_KEY: adminKey
      })
      const { port } = server
      const customer = clientAt(port, key)
      const ids = [
        await customer.submitId({ model: "alpha-image-2/text-to-image", input: { prompt: "a kite" } }),
        await customer.submitId({ model: "alpha-image-2/text-to-image", input: { prompt: "a kite [sim:fail]" } }),
        await customer.submitId({ model: "dream-4", input: { prompt: "a boat", n: 2 } }),
        await customer.submitId({ model: "dream-4", input: { prompt: "a slow boat [sim:slow]" } })
      ]
      expect((await api(port, key, `/api/v1/task/${ids[3]}/cancel`, { method: "POST" })).status).toBe(200)
      const tasks = await awaitTerminal(port, key, ids, 60_000)
      expect(ids.map((id) => tasks.get(id)!.status)).toEqual(["SUCCESS", "FAILURE", "SUCCESS", "CANCELLED"])

      const shown = await admin(databaseUrl, ["credits", "show", account.id, "--json", "--limit", "1000"])
      expect(shown.code).toBe(0)
      const credits = JSON.parse(shown.stdout) as {
        balance_micro_usd: number
        reserved_micro_usd: number
        entries: ReadonlyArray<{ kind: string; amount_micro_usd: number; held_micro_usd: number }>
      }
      const sum = (kind: string, field: "amount_micro_usd" | "held_micro_usd") =>
        credits.entries.filter((entry) => entry.kind === kind).reduce((total, entry) => total + entry[field], 0)
      const usage = (await api(port, key, "/api/v1/usage?group_by=model")).body.data
      const totals = usage.totals
      expect(totals.spend_micro_usd).toBe(-sum("charge", "amount_micro_usd"))
      expect(totals.spend_micro_usd).toBe(tasks.get(ids[0]!)!.price_micro_usd + tasks.get(ids[2]!)!.price_micro_usd)
      expect(totals.refunds_micro_usd).toBe(-sum("release", "held_micro_usd"))
      expect(totals.credits_micro_usd).toBe(2_500_000)
      expect(credits.balance_micro_usd).toBe(totals.credits_micro_usd - totals.spend_micro_usd)
      expect(credits.reserved_micro_usd).toBe(0)
      expect(totals.tasks).toMatchObject({ total: 4, SUCCESS: 2, FAILURE: 1, CANCELLED: 1 })
      expect(usage.groups.map((group: any) => [group.group, group.spend_micro_usd])).toEqual([
        ["alpha-image-2/text-to-image", tasks.get(ids[0]!)!.price_micro_usd],
        ["dream-4", tasks.get(ids[2]!)!.price_micro_usd]
      ])

      // The admin form of the same account answers the same; its CSV's total row too.
      const asAdmin = await api(port, adminKey, `/api/v1/admin/usage?group_by=model&account=${account.id}`)
      expect(asAdmin.body.data).toEqual(usage)
      const csv = await clientAt(port, adminKey).call("GET", `/api/v1/admin/usage?account=${account.id}`, { headers: { accept: "text/csv" }, text: true })
      const lines = csv.text.trimEnd().split("\r\n").map((line) => line.split(","))
      const total = Object.fromEntries(lines[0]!.map((column, i) => [column, lines.at(-1)![i]]))
      expect(total).toMatchObject({ group: "total", spend_micro_usd: String(totals.spend_micro_usd), credits_micro_usd: "2500000" })
      await stop(server, "SIGTERM")
    })
  }
})
