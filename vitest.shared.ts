import { defineConfig } from "vitest/config"

/**
 * Every @mediagate/* import resolves to the package's TypeScript source (the
 * "@mediagate/source" export condition), so tests never need a build; Vite's default
 * conditions follow it.
 */
const conditions = ["@mediagate/source", "module", "node", "development|production"]

/** Settings every package's vitest config merges in. */
export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    include: ["test/**/*.test.ts"],
    // The packages' and examples' tests run in worker threads that are not isolated: a thread
    // loads effect and the packages once for all its files instead of once per file, which
    // was most of these suites' time (a package's 20 files: 36 s isolated, 8 s not). Their
    // files keep no state between them. The black-box suites (test/vitest.config.ts) keep a
    // process per file. The root vitest.config.ts sets how many of each run at once.
    pool: "threads",
    // Tells the run's watchdog (scripts/watchdog/reporter.ts) which file this worker runs.
    setupFiles: [new URL("./scripts/watchdog/setup.ts", import.meta.url).pathname],
    testTimeout: 30_000,
    hookTimeout: 30_000
  }
})
