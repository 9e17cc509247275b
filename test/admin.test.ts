/**
 * The admin CLI (`npm run admin`) against the standalone server's SQLite database, as the
 * README shows it, with the server running: an account and its key made by the CLI work at
 * the server; a second key works; a revoked key stops working within the server's 5 s key
 * cache; wrong and mistyped keys are 401; no key is in clear in the database file or the
 * server's output; failures are one line and exit 1.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as pause } from "node:timers/promises"
import { freePort } from "./ports.js"
import { api, killAll, startServer, stop } from "./standalone-process.js"

const root = new URL("..", import.meta.url).pathname
let dir: string
let database: string
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "mediagate-admin-"))
  database = join(dir, "mediagate.db")
})
afterAll(() => {
  killAll()
  rmSync(dir, { recursive: true, force: true })
})

/** Runs `npm run admin -- <args>` as the README does (tsx directly, same thing). */
const admin = (args: ReadonlyArray<string>, databaseUrl = `sqlite:${database}`) => {
  const result = spawnSync(process.execPath, ["--import", "tsx", join(root, "examples/standalone-server/src/admin.ts"), ...args], {
    cwd: root,
    env: { PATH: process.env["PATH"] ?? "", MEDIAGATE_DATABASE_URL: databaseUrl },
    encoding: "utf8"
  })
  return { code: result.status, stdout: result.stdout, stderr: result.stderr }
}

const submit = (port: number, key: string) =>
  api(port, key, "/api/v1/task/submit", { method: "POST", body: JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "a kite" } }) })

describe("admin CLI", () => {
  it("--help needs no database; unknown commands, accounts and keys are one line and exit 1", { timeout: 60_000 }, () => {
    const help = admin(["--help"], "sqlite:/nonexistent-folder/x.db")
    expect(help.code).toBe(0)
    expect(help.stdout).toContain("account")
    expect(help.stdout).toContain("key")
    const subHelp = admin(["key", "create", "--help"], "sqlite:/nonexistent-folder/x.db")
    expect(subHelp.stdout).toContain("--expires-in")
    expect(admin(["account", "show", "acct_nope"])).toMatchObject({ code: 1, stderr: "mediagate admin: no account acct_nope\n" })
    expect(admin(["key", "revoke", "key_nope"])).toMatchObject({ code: 1, stderr: "mediagate admin: no key key_nope\n" })
    expect(admin(["account", "list"], "memory")).toMatchObject({ code: 1, stderr: "mediagate admin: MEDIAGATE_DATABASE_URL is memory: there is no database to administer\n" })
    expect(admin(["account", "list"], "sqlite:/nonexistent-folder/x.db").code).toBe(1)
    expect(admin(["acount", "list"]).code).toBe(1)
  })

  it("accounts and keys made by the CLI work at a running server; a revoked key stops within 5 s", { timeout: 120_000 }, async () => {
    const created = admin(["account", "create", "--name", "acme", "--json"])
    expect(created.code).toBe(0)
    const { account, key, webhook_secret } = JSON.parse(created.stdout)
    expect(key).toMatch(/^mg_[0-9A-Za-z]{38}$/)
    expect(webhook_secret).toMatch(/^whsec_/)
    expect(account).toMatchObject({ name: "acme", keys: [{ state: "active", label: "first key", hint: `${key.slice(0, 7)}...` }] })

    const secret = admin(["secret", "show", account.id, "--json"])
    expect(JSON.parse(secret.stdout)).toEqual({ account_id: account.id, current: webhook_secret, previous: null, previous_signs_until: null })
    const rotated = JSON.parse(admin(["secret", "rotate", account.id, "--grace", "2h", "--json"]).stdout)
    expect(rotated.current).toMatch(/^whsec_/)
    expect(rotated.current).not.toBe(webhook_secret)
    expect(rotated.previous).toBe(webhook_secret)
    expect(Date.parse(rotated.previous_signs_until) - Date.now()).toBeGreaterThan(7_100_000)
    expect(admin(["secret", "rotate", account.id, "--grace", "soon"]).code).toBe(1)

    const port = await freePort()
    const server = await startServer(port, {
      MEDIAGATE_DATABASE_URL: `sqlite:${database}`,
      MEDIAGATE_SIMULATOR_PROFILE: "instant",
      MEDIAGATE_MEDIA_DIR: join(dir, "media")
    })
    expect((await submit(port, key)).status).toBe(200)
    const mistyped = key.slice(0, 12) + (key[12] === "A" ? "B" : "A") + key.slice(13)
    for (const wrong of [mistyped, `${key}x`, "mg_nope", "something-else"]) {
      expect(await submit(port, wrong)).toEqual({ status: 401, body: { code: 401, msg: "unauthorized" } })
    }

    const second = JSON.parse(admin(["key", "create", account.id, "--label", "ci", "--expires-in", "30d", "--json"]).stdout)
    expect(second).toMatchObject({ account_id: account.id, label: "ci", state: "active" })
    expect((await submit(port, second.key)).status).toBe(200)

    const revoked = admin(["key", "revoke", account.keys[0].id, "--json"])
    expect(JSON.parse(revoked.stdout)).toMatchObject({ id: account.keys[0].id, state: "revoked" })
    // The server keeps a key's account for 5 s: the revoked key stops working by then.
    let status = 200
    for (let i = 0; i < 40 && status !== 401; i++) {
      await pause(250)
      status = (await submit(port, key)).status
    }
    expect(status).toBe(401)
    expect((await submit(port, second.key)).status).toBe(200)

    const shown = JSON.parse(admin(["account", "show", account.id, "--json"]).stdout)
    expect(shown.keys.map((k: { state: string }) => k.state)).toEqual(["revoked", "active"])
    await stop(server, "SIGTERM")

    // Neither key is anywhere in clear: not in the database file (WAL included), not in the server's output.
    const stored = [database, `${database}-wal`].map((file) => {
      try {
        return readFileSync(file).toString("latin1")
      } catch {
        return ""
      }
    }).join("")
    for (const clear of [key, second.key]) {
      expect(stored.includes(clear)).toBe(false)
      expect(server.output().includes(clear)).toBe(false)
    }
  })
})
