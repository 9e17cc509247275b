import { defineConfig } from "vitest/config"
import { s3SkipMarker } from "./packages/media/test/s3SkipMarker.js"
import { pgSkipMarker } from "./packages/store-sql/src/internal/pgSkipMarker.js"
import SlowestFirst from "./scripts/run-summary/sequencer.js"

/**
 * The whole run: its projects, each with its own vitest.config.ts (every package and example
 * that has tests, and the black-box suites in test/), and, besides the default reporter, the
 * watchdog that stops a test file whose worker no longer answers (see
 * scripts/watchdog/reporter.ts) and the summary at the end: the slowest files, the wall time
 * and the suites whose PostgreSQL cases, or cases on the signature-checking S3 server, did not
 * run (scripts/run-summary/reporter.ts).
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
    // Two pools side by side (docs/testing.md): the packages' tests in one thread that is not
    // isolated, and the black-box suites in two processes, one file each. Most black-box
    // suites wait on servers and processes they started, so three at once keep the 2-core
    // machine busy without starving them.
    poolOptions: {
      threads: { isolate: false, maxThreads: 1, minThreads: 1 },
      forks: { maxForks: 2, minForks: 1 }
    },
    // The slowest files first (scripts/run-summary/sequencer.ts).
    sequence: { sequencer: SlowestFirst },
    // A suite's "PostgreSQL cases not run" and "S3 signature cases not run" lines are gathered
    // into one each by the summary, not printed where they happen.
    onConsoleLog: (log) => !log.startsWith(pgSkipMarker) && !log.startsWith(s3SkipMarker)
  }
})
