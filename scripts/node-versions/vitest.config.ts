import { defineConfig } from "vitest/config"
import shared from "../../vitest.shared.js"
import blackBox from "../../test/vitest.config.js"
import workspace from "../../vitest.config.js"

/**
 * What scripts/node-versions/run.sh runs on each other Node version (docs/testing.md says
 * why these): the runtime check (runtime.test.ts), every package's and example's own tests
 * (their vitest configs as the workspace has them), and the black-box suites that start the
 * standalone server as a process of its own (the "black-box" project of test/vitest.config.ts,
 * limited to those files). Not part of the workspace: `npm test` does not read it.
 */
const root = new URL("../..", import.meta.url).pathname

/**
 * The black-box suites that start the standalone server (test/standalone-process.ts or a
 * spawn of their own) and exercise what differs between Node versions, run on every version:
 * process start-up, signals and restarts over SQLite's WAL (standalone, restart,
 * crash-cycles, idempotency-restart, temp-cleanup), node:http's own answers and URL parsing
 * (hostile, url-corpus, rate-limit), and fetch/undici and streams against real servers on
 * loopback (client, webhooks, standalone-s3, media-rules, tracing).
 */
export const processSuites = [
  "standalone.test.ts",
  "restart.test.ts",
  "crash-cycles.test.ts",
  "idempotency-restart.test.ts",
  "standalone-s3.test.ts",
  "client.test.ts",
  "hostile.test.ts",
  "media-rules.test.ts",
  "rate-limit.test.ts",
  "tracing.test.ts",
  "url-corpus.test.ts",
  "webhooks.test.ts",
  "temp-cleanup.test.ts"
]

/**
 * Process suites whose runtime parts the ones above already cover (the same start-up,
 * signals, node:http and fetch), with more processes or PostgreSQL: two and three nodes
 * on one database, the relay, moderation. Together about 110 s a version; left out unless
 * MEDIAGATE_NODE_VERSIONS_SUITES=all.
 */
export const clusterSuites = ["nodes.test.ts", "cluster-limits.test.ts", "relay.test.ts", "moderation.test.ts"]

/**
 * The two that also start a server but mostly run a CLI, one process per command (about 30
 * for admin.test.ts, each loading the server's code through tsx): about 3 minutes of file
 * time a version. Left out unless MEDIAGATE_NODE_VERSIONS_SUITES=all.
 */
export const cliSuites = ["admin.test.ts", "cli.test.ts"]

const blackBoxSuites = process.env["MEDIAGATE_NODE_VERSIONS_SUITES"] === "all" ? [...processSuites, ...clusterSuites, ...cliSuites] : processSuites

export default defineConfig({
  root,
  test: {
    // The pools of `npm test` (the root vitest.config.ts): the packages' tests in one thread
    // that is not isolated, the black-box suites in two processes.
    poolOptions: workspace.test!.poolOptions!,
    projects: [
      {
        ...shared,
        test: { ...shared.test, name: "node-versions", include: ["scripts/node-versions/runtime.test.ts"] }
      },
      "packages/*/vitest.config.ts",
      "examples/*/vitest.config.ts",
      {
        ...blackBox,
        test: { ...blackBox.test, root: `${root}test`, include: blackBoxSuites }
      }
    ]
  }
})
