/**
 * The console in a real browser: Chromium from the npm registry (test/browser.ts) opens
 * `/console` of one server on loopback (test/console-server.ts) that has run real tasks, and
 * an operator signs in with the admin key, reads the overview's charts, adds credits, revokes
 * a key, finds the failed task and sends its callback again to the receiver that refused it.
 * A customer key cannot sign in. One server and one browser for the whole file; the cases run
 * in order on the same page, as one operator's visit. The page asks nothing of any other host,
 * throws no error, and keeps the key out of every URL and out of storage.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Console } from "@mediagate/http"
import { Context, Effect, Layer } from "effect"
import { readFileSync } from "node:fs"
import * as ConsoleScript from "../scripts/console-script.js"
import { browser } from "./browser.js"
import { adminKey, call, consoleServer, origin, receiver, seed, shopKey } from "./console-server.js"
import type { Seeded } from "./console-server.js"

/** The browser, the server's origin, the receiver and what the seed made: one of each for the file. */
class Visit extends Context.Tag("test/Visit")<Visit, {
  readonly base: string
  readonly page: Effect.Effect.Success<typeof browser>["page"]
  readonly errors: ReadonlyArray<string>
  readonly requested: ReadonlyArray<string>
  readonly hook: Effect.Effect.Success<typeof receiver>
  readonly seeded: Seeded
}>() {}

const visit = Layer.scoped(
  Visit,
  Effect.gen(function*() {
    const base = yield* origin
    const hook = yield* receiver
    const seeded = yield* Effect.promise(() => seed(base, hook))
    const { context, errors, page } = yield* browser
    const requested: Array<string> = []
    context.on("request", (request) => void requested.push(request.url()))
    // The console asks before revoking or cancelling; the operator says yes.
    page.on("dialog", (dialog) => void dialog.accept())
    return { base, page, errors, requested, hook, seeded }
  })
).pipe(Layer.provide(consoleServer("instant")))

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

/** Saturated pixels drawn on a chart's canvas: the series' colours, not the grey axes and grid. */
const drawnPixels = (page: Context.Tag.Service<Visit>["page"], id: string) =>
  promise(() =>
    page.evaluate((id) => {
      const canvas = document.querySelector<HTMLCanvasElement>(`#${id} canvas`)
      if (!canvas) return 0
      const { data } = canvas.getContext("2d")!.getImageData(0, 0, canvas.width, canvas.height)
      let count = 0
      for (let i = 0; i < data.length; i += 4) {
        if (data[i + 3]! > 0 && Math.max(data[i]!, data[i + 1]!, data[i + 2]!) - Math.min(data[i]!, data[i + 1]!, data[i + 2]!) > 80) count++
      }
      return count
    }, id)
  )

/** The cells of a table's rows. */
const cells = (page: Context.Tag.Service<Visit>["page"], selector: string) =>
  promise(() =>
    page.locator(`${selector} tbody tr`).evaluateAll((rows) => rows.map((row) => [...row.querySelectorAll("td")].map((cell) => cell.textContent ?? "")))
  )

/** The rows of the table of figures beside a chart. */
const figures = (page: Context.Tag.Service<Visit>["page"], id: string) => cells(page, `#${id}-table`)

describe("the console page", () => {
  layer(visit, { excludeTestServices: true, timeout: "120 seconds" })("an operator's visit", (it) => {
    it.effect("a customer key cannot sign in: the page shows the API's refusal", () =>
      Effect.gen(function*() {
        const { base, page } = yield* Visit
        const response = yield* promise(() => page.goto(`${base}/console`, { waitUntil: "load" }))
        expect(response?.status()).toBe(200)
        expect(response?.headers()["content-security-policy"]).toBe(Console.contentSecurityPolicy)
        const refusal = yield* promise(() => call(base, shopKey, "GET", "/api/v1/admin/accounts"))
        expect(refusal.status).toBe(403)
        yield* promise(() => page.fill("#admin-key", shopKey))
        yield* promise(() => page.click("#sign-in-button"))
        yield* promise(() => page.locator("#sign-in-note.error").waitFor({ timeout: 10_000 }))
        expect(yield* promise(() => page.textContent("#sign-in-note"))).toBe(`Sign-in refused: ${refusal.body.msg}`)
        // A key that is nobody's: the API's 401.
        yield* promise(() => page.fill("#admin-key", "not-a-key-of-anyone-0123456789abcdef"))
        yield* promise(() => page.click("#sign-in-button"))
        yield* promise(() => page.waitForFunction(() => document.getElementById("sign-in-note")?.textContent === "Sign-in refused: unauthorized", undefined, { timeout: 10_000 }))
        expect(yield* promise(() => page.isHidden("#nav"))).toBe(true)
        expect(yield* promise(() => page.isHidden("#view-accounts"))).toBe(true)
      }))

    it.effect("signs in with the admin key and draws the overview's charts from the tasks that ran", () =>
      Effect.gen(function*() {
        const { page, seeded } = yield* Visit
        yield* promise(() => page.fill("#admin-key", adminKey))
        yield* promise(() => page.click("#sign-in-button"))
        yield* promise(() => page.locator("#view-overview").waitFor({ state: "visible", timeout: 10_000 }))
        expect(yield* promise(() => page.isHidden("#sign-in"))).toBe(true)
        for (const chart of ["chart-tasks", "chart-latency", "chart-failures", "chart-spend"]) {
          yield* promise(() => page.locator(`#${chart}[data-values] canvas`).waitFor({ state: "attached", timeout: 10_000 }))
          expect(Number(yield* promise(() => page.getAttribute(`#${chart}`, "data-values"))), chart).toBeGreaterThan(0)
          expect(yield* drawnPixels(page, chart), chart).toBeGreaterThan(50)
        }
        // The figures drawn are the tasks that ran: 4 succeeded, 1 failed, 1 still running.
        const perMinute = yield* figures(page, "chart-tasks")
        const header = yield* promise(() => page.locator("#chart-tasks-table thead th").allTextContents())
        const total = (status: string) => perMinute.reduce((sum, row) => sum + Number(row[header.indexOf(status)] ?? 0), 0)
        expect([total("SUCCESS"), total("FAILURE"), total("PENDING") + total("SUBMITTED") + total("PROCESSING")]).toEqual([seeded.succeeded.length, 1, 1])
        expect(header).not.toContain("CANCELLED")
        expect((yield* figures(page, "chart-latency")).map((row) => row[0])).toEqual(["alpha-image-2/text-to-image", "beta-imagine/text-to-image-lite"])
        expect((yield* figures(page, "chart-failures")).map((row) => row[1])).toEqual(["1"])
      }))

    it.effect("shows an account's keys with their scopes", () =>
      Effect.gen(function*() {
        const { page, seeded } = yield* Visit
        yield* promise(() => page.click("nav [data-view=accounts]"))
        yield* promise(() => page.locator("[data-balance=acct_studio]").waitFor({ timeout: 10_000 }))
        yield* promise(() => page.click("button[aria-label='Open account Studio North']"))
        yield* promise(() => page.locator(`[data-key-state='${seeded.scopedKeyId}']`).waitFor({ timeout: 10_000 }))
        const rows = yield* cells(page, "#account-keys")
        expect(rows.map((row) => [row[1], row[2], row[5]])).toEqual([
          ["", "unscoped", "active"],
          ["mobile app", "models alpha-*; cap $50.00 a month; rate 10/s, bursts of 10", "active"]
        ])
      }))

    it.effect("rotates an account's signing secret, the old one signing for the grace chosen", () =>
      Effect.gen(function*() {
        const { base, page } = yield* Visit
        const before = (yield* promise(() => call(base, adminKey, "GET", "/api/v1/admin/accounts/acct_studio/secrets"))).body.data
        yield* promise(() => page.fill("#secret-grace", "2"))
        yield* promise(() => page.click("#secret-rotate"))
        yield* promise(() => page.locator("#account-note.ok").waitFor({ timeout: 10_000 }))
        const after = (yield* promise(() => call(base, adminKey, "GET", "/api/v1/admin/accounts/acct_studio/secrets"))).body.data
        expect(after.current).toMatch(/^whsec_/)
        expect(after.current).not.toBe(before.current)
        expect(yield* promise(() => page.textContent("#account-secrets"))).toContain(`Current: ${after.current}`)
        if (before.current !== null) {
          expect(after.previous).toBe(before.current)
          expect(Date.parse(after.previous_signs_until) - Date.now()).toBeGreaterThan(2 * 3600_000 - 60_000)
        }
      }))

    it.effect("adds credits to an account and shows its new balance", () =>
      Effect.gen(function*() {
        const { base, page } = yield* Visit
        yield* promise(() => page.locator("[data-balance=acct_shop]").waitFor({ timeout: 10_000 }))
        yield* promise(() => page.click("button[aria-label='Open account Corner shop']"))
        const before = (yield* promise(() => call(base, adminKey, "GET", "/api/v1/admin/accounts/acct_shop"))).body.data
        yield* promise(() =>
          page.waitForFunction((text) => document.getElementById("account-balance")?.textContent === text, usd(before.balance_micro_usd), { timeout: 10_000 })
        )
        yield* promise(() => page.locator("#account-keys table").waitFor({ timeout: 10_000 }))
        yield* promise(() => page.fill("#credits-amount", "12.5"))
        yield* promise(() => page.fill("#credits-note", "top-up by phone"))
        yield* promise(() => page.click("#credits-add"))
        const after = usd(before.balance_micro_usd + 12_500_000)
        yield* promise(() => page.waitForFunction((text) => document.getElementById("account-balance")?.textContent === text, after, { timeout: 10_000 }))
        yield* promise(() => page.waitForFunction((text) => document.querySelector("[data-balance=acct_shop]")?.textContent === text, after, { timeout: 10_000 }))
        const now = (yield* promise(() => call(base, adminKey, "GET", "/api/v1/admin/accounts/acct_shop"))).body.data
        expect(now.balance_micro_usd).toBe(before.balance_micro_usd + 12_500_000)
        expect(yield* promise(() => page.textContent("#account-ledger tbody tr:first-child"))).toContain("top-up by phone")
        // What the API refuses is shown as its message, and nothing is added.
        const refused = yield* promise(() =>
          call(base, adminKey, "POST", "/api/v1/admin/accounts/acct_shop/credits", { amount_usd: "2000000000", note: "too much" })
        )
        expect(refused.status).toBe(400)
        yield* promise(() => page.fill("#credits-amount", "2000000000"))
        yield* promise(() => page.fill("#credits-note", "too much"))
        yield* promise(() => page.click("#credits-add"))
        yield* promise(() => page.locator("#account-note.error").waitFor({ timeout: 10_000 }))
        expect(yield* promise(() => page.textContent("#account-note"))).toBe(refused.body.msg)
        expect(yield* promise(() => page.textContent("#account-balance"))).toBe(after)
      }))

    it.effect("revokes a key, and the key's next request is refused", () =>
      Effect.gen(function*() {
        const { base, page } = yield* Visit
        expect((yield* promise(() => call(base, shopKey, "GET", "/api/v1/account"))).status).toBe(200)
        const account = (yield* promise(() => call(base, adminKey, "GET", "/api/v1/admin/accounts/acct_shop"))).body.data
        const keyId = account.keys[0].id as string
        yield* promise(() => page.click(`[data-revoke='${keyId}']`))
        yield* promise(() => page.locator(`[data-key-state='${keyId}']`, { hasText: "revoked" }).waitFor({ timeout: 10_000 }))
        const refused = yield* promise(() => call(base, shopKey, "GET", "/api/v1/account"))
        expect(refused.status).toBe(401)
        expect(refused.body.code).toBe(401)
      }))

    it.effect("finds the failed task and sends its refused callback again; the receiver gets it", () =>
      Effect.gen(function*() {
        const { base, hook, page, seeded } = yield* Visit
        expect(hook.deliveries.map((delivery) => delivery.answered)).toEqual([410])
        yield* promise(() => page.click("nav [data-view=tasks]"))
        // An id that is no task's: the API's 404, as its message.
        const missing = yield* promise(() => call(base, adminKey, "GET", "/api/v1/admin/tasks/no-such-task"))
        expect(missing.status).toBe(404)
        yield* promise(() => page.fill("#tasks-id", "no-such-task"))
        yield* promise(() => page.click("#tasks-search"))
        yield* promise(() => page.locator("#task-note.error").waitFor({ timeout: 10_000 }))
        expect(yield* promise(() => page.textContent("#task-note"))).toBe(missing.body.msg)
        yield* promise(() => page.fill("#tasks-id", ""))
        yield* promise(() => page.selectOption("#tasks-status", "FAILURE"))
        yield* promise(() => page.click("#tasks-search"))
        // The failed task is in the unfiltered list too: wait for the filtered list itself, one row.
        yield* promise(() => page.waitForFunction(() => document.querySelectorAll("#tasks-list tbody tr").length === 1, undefined, { timeout: 10_000 }))
        yield* promise(() => page.locator(`[data-open-task='${seeded.failed}']`).waitFor({ timeout: 10_000 }))
        expect(yield* promise(() => page.locator("#tasks-list tbody tr").count())).toBe(1)
        yield* promise(() => page.click(`[data-open-task='${seeded.failed}']`))
        yield* promise(() => page.locator("#task-status[data-status=FAILURE]").waitFor({ timeout: 10_000 }))
        expect(yield* promise(() => page.textContent("#task-summary"))).toContain("simulated upstream failure")
        expect(yield* promise(() => page.locator("#task-attempts li").count())).toBeGreaterThan(0)
        expect(yield* promise(() => page.getAttribute("[data-callback-status]", "data-callback-status"))).toBe("failed")
        expect(yield* promise(() => page.textContent("#task-callbacks tbody"))).toContain("HTTP 410")
        expect(yield* promise(() => page.isDisabled("#task-cancel"))).toBe(true)
        yield* promise(() => page.click("#task-redeliver"))
        yield* promise(() => hook.next(2))
        expect(hook.deliveries.map((delivery) => delivery.answered)).toEqual([410, 204])
        expect(hook.deliveries[1]!.webhookId).toBe(hook.deliveries[0]!.webhookId)
        expect(JSON.parse(hook.deliveries[1]!.body).data.taskId).toBe(seeded.failed)
        // The page shows the delivery once it is recorded.
        yield* promise(() => page.locator("[data-callback-status=delivered]").waitFor({ timeout: 10_000 }))
        expect(yield* promise(() => page.textContent("#task-callbacks tbody"))).toContain("HTTP 204")
      }))

    it.effect("cancels the task that runs on; its held price goes back", () =>
      Effect.gen(function*() {
        const { base, page, seeded } = yield* Visit
        yield* promise(() => page.selectOption("#tasks-status", ""))
        yield* promise(() => page.fill("#tasks-account", "acct_studio"))
        yield* promise(() => page.click("#tasks-search"))
        yield* promise(() => page.locator(`[data-open-task='${seeded.running}']`).waitFor({ timeout: 10_000 }))
        expect(yield* promise(() => page.locator("#tasks-list tbody tr").count())).toBe(3)
        yield* promise(() => page.click(`[data-open-task='${seeded.running}']`))
        yield* promise(() => page.locator("#task-id", { hasText: seeded.running }).waitFor({ timeout: 10_000 }))
        yield* promise(() => page.locator("#task-status:not([data-status=FAILURE])").waitFor({ timeout: 10_000 }))
        expect(yield* promise(() => page.isDisabled("#task-redeliver"))).toBe(true)
        yield* promise(() => page.click("#task-cancel"))
        yield* promise(() => page.locator("#task-status[data-status=CANCELLED]").waitFor({ timeout: 10_000 }))
        expect(yield* promise(() => page.isDisabled("#task-cancel"))).toBe(true)
        const task = (yield* promise(() => call(base, adminKey, "GET", `/api/v1/admin/tasks/${seeded.running}`))).body.data
        expect(task.task.status).toBe("CANCELLED")
        expect(task.ledger.map((entry: { kind: string }) => entry.kind)).toEqual(["reserve", "release"])
        expect(yield* promise(() => page.locator("#task-ledger tbody tr").count())).toBe(2)
      }))

    it.effect("lists the visit's actions in the audit log, with the admin key as their actor", () =>
      Effect.gen(function*() {
        const { page, seeded } = yield* Visit
        yield* promise(() => page.click("nav [data-view=audit]"))
        yield* promise(() => page.locator("#audit-list tbody [data-action]").first().waitFor({ timeout: 10_000 }))
        const rows = yield* cells(page, "#audit-list")
        expect(rows.map((row) => [row[1], row[2]])).toEqual([
          ["admin_key:adk_configured", "task.cancel"],
          ["admin_key:adk_configured", "task.redeliver"],
          ["admin_key:adk_configured", "key.revoke"],
          ["admin_key:adk_configured", "credits.add"],
          ["admin_key:adk_configured", "secret.rotate"],
          ["admin_key:adk_configured", "key.create"]
        ])
        expect(rows.slice(0, 2).map((row) => row[3])).toEqual([seeded.running, seeded.failed])
      }))

    it.effect("shows the providers, and asked nothing of any other host, with no page error and the key in no URL or storage", () =>
      Effect.gen(function*() {
        const { base, errors, page, requested } = yield* Visit
        yield* promise(() => page.click("nav [data-view=providers]"))
        yield* promise(() => page.locator("#providers-list tbody [data-circuit]").first().waitFor({ timeout: 10_000 }))
        expect(yield* promise(() => page.getAttribute("#providers-list [data-circuit]", "data-circuit"))).toBe("closed")
        const elsewhere = requested.filter((url) => !url.startsWith(`${base}/`) && !/^(data|blob):/.test(url))
        expect(elsewhere).toEqual([])
        expect(requested.filter((url) => url.includes(adminKey))).toEqual([])
        expect(yield* promise(() => page.evaluate(() => [localStorage.length, sessionStorage.length, document.cookie]))).toEqual([0, 0, ""])
        expect(errors).toEqual([])
      }))
  })

  it("is one document with nothing to load from anywhere, under a policy that allows this origin only", () => {
    expect(Console.page).not.toMatch(/<(script|link|img|iframe)[^>]*\s(src|href)=/i)
    expect(Console.page).not.toMatch(/@import|@font-face|url\((?!["']?data:)/)
    expect(Console.contentSecurityPolicy).toContain("default-src 'none'")
    expect(Console.contentSecurityPolicy).toContain("connect-src 'self'")
  })

  it("embeds the bundle of console/*.ts and uPlot as they are now (run `npm run build:console` after changing them)", async () => {
    expect(readFileSync(ConsoleScript.target, "utf8")).toBe(await ConsoleScript.render())
  }, 30_000)
})

/** Micro-USD as the page shows money. */
const usd = (micro: number) => {
  const fraction = String(micro % 1_000_000).padStart(6, "0").replace(/0+$/, "")
  return `$${Math.floor(micro / 1_000_000)}.${fraction.length < 2 ? fraction.padEnd(2, "0") : fraction}`
}
