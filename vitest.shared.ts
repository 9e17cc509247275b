import { defineConfig } from "vitest/config"

/** Settings every package's vitest config merges in. */
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000
  }
})
