import { defineConfig } from "vitest/config"
import { pgSkipMarker } from "./packages/store-sql/src/Testing.js"

/**
 * The whole run: its projects, each with its own vitest.config.ts (every package and example
 * that has tests, and the black-box suites in test/), and, besides the default reporter, the
 * watchdog that stops a test file whose worker no longer answers (see
 * scripts/watchdog/reporter.ts) and the summary at the end: the slowest files, the wall time
 * and the suites whose PostgreSQL cases did not run (scripts/run-summary/reporter.ts).
 * Reporters are the run's, not a project's, so they are set here.
 */
export default defineConfig({
  test: {
    projects: [
      "packages/*/vitest.config.ts",
      "examples/*/vitest.config.ts",
      "test/vitest.config.ts"
    ],
    reporters: ["default", "./scripts/watchdog/reporter.ts", "./scripts/run-summary/reporter.ts"],
    // A suite's "PostgreSQL cases not run" line is gathered into one by the summary, not printed where it happens.
    onConsoleLog: (log) => !log.startsWith(pgSkipMarker)
  }
})
