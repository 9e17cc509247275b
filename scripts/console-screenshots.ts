/**
 * `npm run screenshots:console`: takes the console's screenshots shown in docs/operations.md
 * (docs/images/console-*.png) from a server on loopback that has run real tasks
 * (test/console-server.ts, the simulator's demo profile, so times to result are seconds, not
 * zero), in the Chromium the browser suites use (test/setup/chromium.ts unpacks it). Nothing
 * else writes these files: a test run leaves them as they are.
 */
import { Effect } from "effect"
import { mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { chromium, type Page } from "playwright-core"
import type { TestProject } from "vitest/node"
import { adminKey, call, consoleServer, origin, receiver, seed } from "../test/console-server.js"
import unpackChromium from "../test/setup/chromium.js"
import type { ChromiumFiles } from "../test/setup/chromium.js"

const images = new URL("../docs/images/", import.meta.url).pathname

/** The Chromium of @sparticuz/chromium, unpacked as the browser suites unpack it. */
const chromiumFiles = async (): Promise<ChromiumFiles> => {
  let files: ChromiumFiles | undefined
  await unpackChromium({ provide: (_name: string, value: ChromiumFiles) => void (files = value) } as unknown as TestProject)
  return files!
}

const shoot = async (page: Page, name: string) => {
  const path = join(images, `console-${name}.png`)
  await page.screenshot({ path, fullPage: true })
  console.log(`${path} (${Math.round(statSync(path).size / 1024)} KB)`)
}

const program = Effect.gen(function*() {
  const base = yield* origin
  const hook = yield* receiver
  const seeded = yield* Effect.promise(() => seed(base, hook))
  // A credit for the accounts page's ledger.
  yield* Effect.promise(() => call(base, adminKey, "POST", "/api/v1/admin/accounts/acct_shop/credits", { amount_usd: "40", note: "monthly top-up" }))
  yield* Effect.promise(async () => {
    const { executablePath, fontconfigPath } = await chromiumFiles()
    const profile = mkdtempSync(join(tmpdir(), "mediagate-screenshots-"))
    const context = await chromium.launchPersistentContext(profile, {
      executablePath,
      env: { ...process.env, FONTCONFIG_PATH: fontconfigPath },
      headless: true,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
      viewport: { width: 1280, height: 900 }
    })
    try {
      const page = context.pages()[0] ?? await context.newPage()
      page.on("dialog", (dialog) => void dialog.accept())
      mkdirSync(images, { recursive: true })
      await page.goto(`${base}/console`, { waitUntil: "load" })
      await shoot(page, "sign-in")
      await page.fill("#admin-key", adminKey)
      await page.click("#sign-in-button")
      await page.locator("#chart-spend[data-values] canvas").waitFor({ timeout: 10_000 })
      await shoot(page, "overview")
      await page.click("nav [data-view=accounts]")
      await page.click("button[aria-label='Open account Corner shop']")
      await page.locator("#account-ledger table").waitFor({ timeout: 10_000 })
      await shoot(page, "accounts")
      await page.click("nav [data-view=tasks]")
      await page.locator(`[data-open-task='${seeded.failed}']`).waitFor({ timeout: 10_000 })
      await page.click(`[data-open-task='${seeded.failed}']`)
      await page.locator("#task-status").waitFor({ timeout: 10_000 })
      await page.click("#task-redeliver")
      await page.locator("[data-callback-status=delivered]").waitFor({ timeout: 10_000 })
      await shoot(page, "tasks")
      await page.click("nav [data-view=providers]")
      await page.locator("#providers-list [data-circuit]").first().waitFor({ timeout: 10_000 })
      await shoot(page, "providers")
      await page.click("nav [data-view=audit]")
      await page.locator("#audit-list [data-action]").first().waitFor({ timeout: 10_000 })
      await shoot(page, "audit")
    } finally {
      await context.close()
      rmSync(profile, { recursive: true, force: true })
    }
  })
}).pipe(Effect.scoped, Effect.provide(consoleServer("demo")))

await Effect.runPromise(program)
