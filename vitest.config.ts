import { defineConfig } from "vitest/config"

/**
 * The whole run's settings (the projects are in vitest.workspace.ts): besides the default
 * reporter, the watchdog that stops a test file whose worker no longer answers (see
 * scripts/watchdog/reporter.ts).
 */
export default defineConfig({
  test: {
    reporters: ["default", "./scripts/watchdog/reporter.ts"]
  }
})
