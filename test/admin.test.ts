/**
 * The admin CLI (`npm run admin`) against the standalone server's SQLite database, as the
 * README shows it, with the server running: an account and its key made by the CLI work at
 * the server; a second key works; a revoked key stops working within the server's 5 s key
 * cache; wrong and mistyped keys are 401; no key is in clear in the database file or the
 * server's output; failures are one line and exit 1. The server's first key is listed with
 * where it came from. Credits added by the CLI pay for tasks at the server, once per `--id`,
 * and a second run with the same `--id` says it changed nothing. Admin keys made by the CLI
 * open the admin API (a customer key is 403 there) until revoked; scoped keys carry their
 * models, cap and rate limit, shown by `account show` and enforced by the server; every
 * action is in `audit list` as `cli:<OS user>`, with no key in clear.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir, userInfo } from "node:os"
import { join } from "node:path"
import { setTimeout as pause } from "node:timers/promises"
import { nodeArgs } from "./programs.js"
import { api, awaitTerminal, killAll, startServer, stop } from "./standalone-process.js"
import { clientAt } from "./support.js"

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

/**
 * Runs `npm run admin -- <args>` as the README does (tsx directly, same thing). Not
 * spawnSync: blocking this process for the seconds a run takes would hold the test runner's
 * messages and outlast the server's keep-alive under fetch's idle connections.
 */
const admin = (args: ReadonlyArray<string>, databaseUrl = `sqlite:${database}`) =>
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

const submit = (port: number, key: string) =>
  clientAt(port, key).submit({ model: "alpha-image-2/text-to-image", input: { prompt: "a kite" } })

describe("admin CLI", () => {
  // Nine CLI runs, of several seconds each on a loaded machine.
  it("--help needs no database; unknown commands, accounts and keys are one line and exit 1", { timeout: 120_000 }, async () => {
    const help = await admin(["--help"], "sqlite:/nonexistent-folder/x.db")
    expect(help.code).toBe(0)
    expect(help.stdout).toContain("account")
    expect(help.stdout).toContain("key")
    const subHelp = await admin(["key", "create", "--help"], "sqlite:/nonexistent-folder/x.db")
    expect(subHelp.stdout).toContain("--expires-in")
    expect(await admin(["account", "show", "acct_nope"])).toMatchObject({ code: 1, stderr: "mediagate admin: no account acct_nope\n" })
    expect(await admin(["key", "revoke", "key_nope"])).toMatchObject({ code: 1, stderr: "mediagate admin: no key key_nope\n" })
    expect(await admin(["account", "list"], "memory")).toMatchObject({ code: 1, stderr: "mediagate admin: MEDIAGATE_DATABASE_URL is memory: there is no database to administer\n" })
    expect((await admin(["account", "list"], "sqlite:/nonexistent-folder/x.db")).code).toBe(1)
    expect((await admin(["acount", "list"])).code).toBe(1)
  })

  it("help is plain text in a pipe; a mistyped command is named at its own level, with the one meant", { timeout: 120_000 }, async () => {
    const nowhere = "sqlite:/nonexistent-folder/x.db"
    // stdout is a pipe here, as in `npm run admin -- --help | less`.
    const help = await admin(["--help"], nowhere)
    expect(help.code).toBe(0)
    expect(help.stdout).toContain("account")
    expect(help.stdout).not.toContain("\u001b")
    expect((await admin(["credits", "add", "--help"], nowhere)).stdout).not.toContain("\u001b")
    expect(await admin(["account", "creat"], nowhere)).toMatchObject({
      code: 1,
      stdout: "",
      stderr: "mediagate admin: unknown command account creat; did you mean account create?\n"
    })
    expect(await admin(["acount", "list"], nowhere)).toMatchObject({
      code: 1,
      stdout: "",
      stderr: "mediagate admin: unknown command acount; did you mean account?\n"
    })
    expect(await admin(["key", "zap"], nowhere)).toMatchObject({
      code: 1,
      stdout: "",
      stderr: "mediagate admin: unknown command key zap; the commands of key are create, revoke (mediagate admin key --help)\n"
    })
  })

  it("accounts and keys made by the CLI work at a running server; a revoked key stops within 5 s", { timeout: 120_000 }, async () => {
    const created = await admin(["account", "create", "--name", "acme", "--json"])
    expect(created.code).toBe(0)
    const { account, key, webhook_secret } = JSON.parse(created.stdout)
    expect(key).toMatch(/^mg_[0-9A-Za-z]{38}$/)
    expect(webhook_secret).toMatch(/^whsec_/)
    expect(account).toMatchObject({ name: "acme", keys: [{ state: "active", label: "first key", hint: `${key.slice(0, 7)}...` }] })

    const secret = await admin(["secret", "show", account.id, "--json"])
    expect(JSON.parse(secret.stdout)).toEqual({ account_id: account.id, current: webhook_secret, previous: null, previous_signs_until: null })
    const rotated = JSON.parse((await admin(["secret", "rotate", account.id, "--grace", "2h", "--json"])).stdout)
    expect(rotated.current).toMatch(/^whsec_/)
    expect(rotated.current).not.toBe(webhook_secret)
    expect(rotated.previous).toBe(webhook_secret)
    expect(Date.parse(rotated.previous_signs_until) - Date.now()).toBeGreaterThan(7_100_000)
    expect((await admin(["secret", "rotate", account.id, "--grace", "soon"])).code).toBe(1)

    const server = await startServer({
      MEDIAGATE_DATABASE_URL: `sqlite:${database}`,
      MEDIAGATE_SIMULATOR_PROFILE: "instant",
      MEDIAGATE_MEDIA_DIR: join(dir, "media")
    })
    const { port } = server
    expect((await submit(port, key)).status).toBe(200)
    const mistyped = key.slice(0, 12) + (key[12] === "A" ? "B" : "A") + key.slice(13)
    for (const wrong of [mistyped, `${key}x`, "mg_nope", "something-else"]) {
      expect(await submit(port, wrong)).toEqual({ status: 401, body: { code: 401, msg: "unauthorized" } })
    }

    const second = JSON.parse((await admin(["key", "create", account.id, "--label", "ci", "--expires-in", "30d", "--json"])).stdout)
    expect(second).toMatchObject({ account_id: account.id, label: "ci", state: "active" })
    expect((await submit(port, second.key)).status).toBe(200)

    const revoked = await admin(["key", "revoke", account.keys[0].id, "--json"])
    expect(JSON.parse(revoked.stdout)).toMatchObject({ id: account.keys[0].id, state: "revoked" })
    // The server keeps a key's account for 5 s: the revoked key stops working by then.
    let status = 200
    for (let i = 0; i < 40 && status !== 401; i++) {
      await pause(250)
      status = (await submit(port, key)).status
    }
    expect(status).toBe(401)
    expect((await submit(port, second.key)).status).toBe(200)

    const shown = JSON.parse((await admin(["account", "show", account.id, "--json"])).stdout)
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

  it("account list says where the server's first key came from: generated at its first start, or MEDIAGATE_API_KEY", { timeout: 120_000 }, async () => {
    const cases = [
      { file: join(dir, "generated.db"), env: {}, label: "generated at first start" },
      { file: join(dir, "from-env.db"), env: { MEDIAGATE_API_KEY: "label-test-key-0123456789" }, label: "from MEDIAGATE_API_KEY" }
    ]
    for (const { env, file, label } of cases) {
      const server = await startServer({
        MEDIAGATE_DATABASE_URL: `sqlite:${file}`,
        MEDIAGATE_SIMULATOR_PROFILE: "instant",
        MEDIAGATE_MEDIA_DIR: join(dir, "media"),
        ...env
      })
      await stop(server, "SIGTERM")
      const listed = JSON.parse((await admin(["account", "list", "--json"], `sqlite:${file}`)).stdout)
      expect(listed).toEqual([expect.objectContaining({ name: "default", keys: [expect.objectContaining({ label, state: "active" })] })])
      const text = await admin(["account", "list"], `sqlite:${file}`)
      expect(text).toMatchObject({ code: 0, stdout: expect.stringMatching(new RegExp(`^  key_\\S+  \\S+  active  "${label}"$`, "m")) })
    }
  })

  // Fifteen CLI runs, of several seconds each on a loaded machine.
  it("credits added by the CLI pay for tasks at a running server, once per --id", { timeout: 240_000 }, async () => {
    const { account, key } = JSON.parse((await admin(["account", "create", "--name", "payer", "--json"])).stdout)
    const server = await startServer({
      MEDIAGATE_DATABASE_URL: `sqlite:${database}`,
      MEDIAGATE_SIMULATOR_PROFILE: "instant",
      MEDIAGATE_MEDIA_DIR: join(dir, "media")
    })
    const { port } = server
    const held = async () => (await api(port, key, "/api/v1/account")).body
    const run = async () => {
      const answer = await submit(port, key)
      expect(answer.status).toBe(200)
      const taskId: string = answer.body.data.taskId
      return (await awaitTerminal(port, key, [taskId], 30_000)).get(taskId)!
    }

    // An account made by the CLI starts with nothing: its task fails, and nothing stays held.
    expect(await held()).toMatchObject({ code: 0, msg: "ok", data: { account_id: account.id, balance_micro_usd: 0, reserved_micro_usd: 0 } })
    expect(await run()).toMatchObject({ status: "FAILURE", failure_reason: "INSUFFICIENT_POINTS" })
    expect((await held()).data).toMatchObject({ balance_micro_usd: 0, reserved_micro_usd: 0, available_micro_usd: 0 })

    // The same --id twice credits once, and the second run says it changed nothing.
    for (const already of [false, true]) {
      const added = await admin(["credits", "add", account.id, "1.5", "--id", "topup-1", "--json"])
      expect(added.code).toBe(0)
      expect(JSON.parse(added.stdout)).toEqual({
        account_id: account.id,
        entry_id: "topup-1",
        amount_micro_usd: 1_500_000,
        already_credited: already,
        balance_micro_usd: 1_500_000,
        reserved_micro_usd: 0,
        available_micro_usd: 1_500_000
      })
    }
    const human = await admin(["credits", "add", account.id, "1.5", "--id", "topup-1"])
    expect(human).toMatchObject({
      code: 0,
      stdout: `already credited $1.50 to ${account.id} (topup-1): nothing changed; balance $1.50, reserved $0.00, available $1.50\n`
    })
    // The id of another amount is a mistake, not a replay.
    expect(await admin(["credits", "add", account.id, "2", "--id", "topup-1"])).toMatchObject({
      code: 1,
      stderr: `mediagate admin: entry topup-1 is already a credit of $1.50 for ${account.id}: nothing credited\n`
    })
    const shown = JSON.parse((await admin(["credits", "show", account.id, "--json"])).stdout)
    expect(shown).toMatchObject({ account_id: account.id, balance_micro_usd: 1_500_000, reserved_micro_usd: 0, available_micro_usd: 1_500_000 })
    expect(shown.entries.filter((entry: { kind: string }) => entry.kind === "credit")).toEqual([
      { id: "topup-1", kind: "credit", task_id: null, amount_micro_usd: 1_500_000, held_micro_usd: 0, created_at: expect.any(String), note: "added by admin" }
    ])
    expect((await held()).data).toMatchObject({ balance_micro_usd: 1_500_000, reserved_micro_usd: 0, available_micro_usd: 1_500_000 })

    // Now a task succeeds and costs exactly its price.
    const task = await run()
    expect(task).toMatchObject({ status: "SUCCESS" })
    expect(task.price_micro_usd).toBeGreaterThan(0)
    const after = (await held()).data
    expect(after).toMatchObject({
      balance_micro_usd: 1_500_000 - task.price_micro_usd,
      reserved_micro_usd: 0,
      available_micro_usd: 1_500_000 - task.price_micro_usd
    })

    // `credits show --json` has the account endpoint's fields, the charge newest.
    const listed = await admin(["credits", "show", account.id, "--json", "--limit", "5"])
    expect(listed.code).toBe(0)
    const view = JSON.parse(listed.stdout)
    expect(Object.keys(view)).toEqual(["account_id", "balance_micro_usd", "reserved_micro_usd", "available_micro_usd", "entries"])
    expect(view).toMatchObject({ account_id: account.id, balance_micro_usd: after.balance_micro_usd, reserved_micro_usd: 0 })
    expect(view.entries[0]).toMatchObject({ kind: "charge", task_id: task.taskId, amount_micro_usd: -task.price_micro_usd })
    expect(view.entries).toEqual(after.entries)
    const table = await admin(["credits", "show", account.id])
    expect(table.code).toBe(0)
    expect(table.stdout).toContain("balance $")
    expect(table.stdout).toMatch(/charge\s+-\$/)

    // Bad amounts and unknown accounts are one line and exit 1; nothing is credited.
    for (const args of [[account.id, "abc"], [account.id, "0"], [account.id, "1.1234567"], ["acct_nope", "1"]]) {
      const failed = await admin(["credits", "add", ...args])
      expect(failed.code).toBe(1)
      expect(failed.stderr).toMatch(/^mediagate admin: [^\n]+\n$/)
      expect(failed.stderr).not.toContain("    at ")
    }
    expect((await admin(["credits", "add", "acct_nope", "1"])).stderr).toBe("mediagate admin: no account acct_nope\n")
    expect(await admin(["credits", "show", "acct_nope"])).toMatchObject({ code: 1, stderr: "mediagate admin: no account acct_nope\n" })
    expect((await held()).data.balance_micro_usd).toBe(after.balance_micro_usd)

    // A new id credits, and says so.
    const topUp = await admin(["credits", "add", account.id, "0.5", "--id", "topup-2"])
    expect(topUp.code).toBe(0)
    expect(topUp.stdout).toMatch(new RegExp(`^credited \\$0\\.50 to ${account.id}; balance \\$[0-9.]+, reserved \\$0\\.00, available \\$[0-9.]+\n$`))
    expect((await held()).data.balance_micro_usd).toBe(after.balance_micro_usd + 500_000)
    await stop(server, "SIGTERM")
  })

  // Fourteen CLI runs, of several seconds each on a loaded machine.
  it("admin keys open the admin API until revoked; scoped keys are shown and enforced; every action is in the audit log", { timeout: 240_000 }, async () => {
    const file = join(dir, "operator.db")
    const run = (args: ReadonlyArray<string>) => admin(args, `sqlite:${file}`)
    const made = await run(["key", "create", "--admin", "--label", "console", "--expires-in", "30d", "--json"])
    expect(made.code).toBe(0)
    const adminKey = JSON.parse(made.stdout)
    expect(adminKey.key).toMatch(/^mga_[0-9A-Za-z]{38}$/)
    expect(adminKey).toMatchObject({ id: expect.stringMatching(/^adk_/), hint: `${adminKey.key.slice(0, 8)}...`, label: "console", state: "active" })
    const { account, key } = JSON.parse((await run(["account", "create", "--name", "scoped", "--json"])).stdout)
    const scoped = await run(["key", "create", account.id, "--label", "ci", "--models", "alpha-*", "--monthly-cap", "50", "--rate-limit", "10/s", "--json"])
    expect(scoped.code).toBe(0)
    const scopedKey = JSON.parse(scoped.stdout)
    expect(scopedKey).toMatchObject({
      account_id: account.id,
      label: "ci",
      scope: { models: ["alpha-*"], monthly_cap_micro_usd: 50_000_000, rate_limit: { per_second: 10, burst: 10 } }
    })
    const shown = await run(["account", "show", account.id])
    expect(shown.stdout).toContain(`  ${scopedKey.id}  ${scopedKey.hint}  active  "ci"\n    scope: models alpha-*; cap $50.00 a month; 10/s`)
    expect(JSON.parse((await run(["account", "show", account.id, "--json"])).stdout).keys[0].scope).toEqual({ models: null, monthly_cap_micro_usd: null, rate_limit: null })

    // Wrong uses are one line and exit 1; nothing is made.
    for (const args of [["--admin", account.id], ["--admin", "--models", "alpha-*"], []]) {
      const failed = await run(["key", "create", ...args])
      expect(failed.code).toBe(1)
      expect(failed.stderr).toMatch(/^mediagate admin: [^\n]+\n$/)
    }
    const badRate = await run(["key", "create", account.id, "--rate-limit", "fast"])
    expect(badRate.code).toBe(1)
    expect(badRate.stdout + badRate.stderr).toContain("the rate limit must be requests per second, minute or hour")

    const server = await startServer({ MEDIAGATE_DATABASE_URL: `sqlite:${file}`, MEDIAGATE_SIMULATOR_PROFILE: "instant", MEDIAGATE_MEDIA_DIR: join(dir, "media") })
    const { port } = server
    const accounts = await api(port, adminKey.key, "/api/v1/admin/accounts")
    expect(accounts.status).toBe(200)
    expect(accounts.body.data.accounts.map((each: { id: string }) => each.id)).toContain(account.id)
    expect((await api(port, key, "/api/v1/admin/accounts")).status).toBe(403)
    expect((await submit(port, scopedKey.key)).status).toBe(200)
    const refused = await clientAt(port, scopedKey.key).submit({ model: "clip3", input: { prompt: "a kite" } })
    expect(refused.status).toBe(403)
    expect(refused.body.msg).toContain("this key may not use clip3")

    expect(JSON.parse((await run(["admin-key", "list", "--json"])).stdout)).toEqual([expect.objectContaining({ id: adminKey.id, state: "active" })])
    const revoked = await run(["key", "revoke", adminKey.id, "--json"])
    expect(JSON.parse(revoked.stdout)).toMatchObject({ id: adminKey.id, state: "revoked" })
    let status = 200
    for (let i = 0; i < 40 && status === 200; i++) {
      status = (await api(port, adminKey.key, "/api/v1/admin/accounts")).status
      if (status === 200) await pause(250)
    }
    expect(status).toBe(401)
    expect(await run(["admin-key", "revoke", "adk_nope"])).toMatchObject({ code: 1, stderr: "mediagate admin: no admin key adk_nope\n" })
    await stop(server, "SIGTERM")

    const audit = await run(["audit", "list", "--json"])
    expect(audit.code).toBe(0)
    const entries = JSON.parse(audit.stdout)
    expect(entries.map((entry: { action: string }) => entry.action)).toEqual(["admin_key.revoke", "key.create", "account.create", "admin_key.create"])
    expect(new Set(entries.map((entry: { actor: string }) => entry.actor))).toEqual(new Set([`cli:${userInfo().username}`]))
    expect(entries[0]).toMatchObject({ target: adminKey.id, before: { revoked_at: null }, after: { revoked_at: expect.any(String) } })
    expect(entries[1]).toMatchObject({ target: scopedKey.id, before: null, after: { hint: scopedKey.hint, scope: { models: ["alpha-*"] } } })
    for (const clear of [adminKey.key, key, scopedKey.key]) expect(audit.stdout).not.toContain(clear)
    const text = await run(["audit", "list", "--limit", "1"])
    expect(text.stdout).toMatch(new RegExp(`^time +actor +action +target +before -> after\n\\S+ +cli:\\S+ +admin_key\\.revoke +${adminKey.id} +\\{`))
    expect(JSON.parse((await run(["audit", "list", "--target", account.id, "--json"])).stdout).map((entry: { action: string }) => entry.action)).toEqual(["account.create"])
  })
})
