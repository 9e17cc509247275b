/**
 * The browser of the browser suites (test/docs-page.test.ts, test/playground.test.ts): the
 * Chromium of the npm package @sparticuz/chromium, unpacked once per run by
 * test/setup/chromium.ts and driven by playwright-core. Nothing is installed on the machine
 * and nothing is downloaded.
 */
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { chromium } from "playwright-core"
import { inject } from "vitest"

/**
 * Chromium's own traffic (updates, sync, QUIC probes) is off: the page's requests are all that
 * is left. None of the package's suggested flags (`Chromium.args`) is taken: they are for
 * AWS Lambda, and some turn page security off (`--disable-web-security`,
 * `--allow-running-insecure-content`), which these suites check.
 */
const flags = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/** A browser with a fresh profile, closed (and its profile removed) with the scope. */
const launched = Effect.acquireRelease(
  Effect.promise(async () => {
    const { executablePath, fontconfigPath } = inject("chromium")
    const profile = mkdtempSync(join(tmpdir(), "mediagate-chromium-"))
    const context = await chromium.launchPersistentContext(profile, {
      executablePath,
      // The machine's fonts and the package's (setup/chromium.ts says why).
      env: { ...process.env, FONTCONFIG_PATH: fontconfigPath },
      headless: true,
      // Playwright passes the profile as --user-data-dir itself (and refuses it among the args).
      args: flags,
      viewport: { width: 1280, height: 900 }
    })
    return { context, profile }
  }),
  ({ context, profile }) =>
    Effect.promise(async () => {
      await context.close()
      rmSync(profile, { recursive: true, force: true })
    })
)

/**
 * The browser and its first page, with the page's uncaught errors gathered in `errors`
 * (each suite expects none).
 */
export const browser = Effect.gen(function*() {
  const { context } = yield* launched
  const page = context.pages()[0] ?? (yield* Effect.promise(() => context.newPage()))
  const errors: Array<string> = []
  page.on("pageerror", (error) => void errors.push(error.message))
  return { context, page, errors }
})
