import { defineConfig, mergeConfig } from "vitest/config"
import shared from "../vitest.shared.js"

export default mergeConfig(shared, defineConfig({
  test: {
    name: "black-box",
    include: ["**/*.test.ts"],
    // A process of its own for each file: these suites keep state in their modules (temporary
    // folders, servers, databases) and set process-wide handlers.
    pool: "forks",
    // The programs the suites start as processes, built once per run (setup/entries.ts).
    // The browser suites' Chromium, unpacked from its npm package once (setup/chromium.ts).
    globalSetup: ["./setup/entries.ts", "./setup/chromium.ts"]
  }
}))
