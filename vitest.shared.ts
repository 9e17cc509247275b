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
    // Tells the run's watchdog (scripts/watchdog/reporter.ts) which file this worker runs.
    setupFiles: [new URL("./scripts/watchdog/setup.ts", import.meta.url).pathname],
    testTimeout: 30_000,
    hookTimeout: 30_000
  }
})
