/**
 * The end of a test run, in vitest's main process: the slowest files, the run's wall time,
 * and one line for the suites whose PostgreSQL cases did not run. The last two are what a
 * contributor needs to see that the suite stays fast (issue 32) and that nothing was left
 * out silently.
 *
 * The PostgreSQL suites each log `pgSkipMarker` and their name when MEDIAGATE_TEST_PG_URL is
 * not set (`pgSkipReason` of @mediagate/store-sql/testing); the root vitest config keeps
 * those lines out of the default reporter's output, and this reporter gathers them.
 *
 * With MEDIAGATE_TEST_TIMINGS set to a path, it also writes every file's time there as JSON
 * (`{ wallSeconds, files: [{ file, seconds, tests }] }`), for docs/testing.md's table and
 * for `.ci/run`'s limit.
 */
import { writeFileSync } from "node:fs"
import { relative } from "node:path"
import type { UserConsoleLog } from "vitest"
import type { Reporter, TestModule } from "vitest/node"
import { pgSkipMarker } from "../../packages/store-sql/src/internal/pgSkipMarker.js"

/** How many of the slowest files are listed. */
const listed = 10

export default class RunSummary implements Reporter {
  private readonly started = performance.now()
  private readonly pgSkipped = new Set<string>()

  onUserConsoleLog(log: UserConsoleLog) {
    for (const line of log.content.split("\n")) {
      if (line.startsWith(pgSkipMarker)) this.pgSkipped.add(line.slice(pgSkipMarker.length).trim())
    }
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>) {
    const wallSeconds = (performance.now() - this.started) / 1_000
    const files = modules
      .map((module) => ({
        file: relative(process.cwd(), module.moduleId),
        seconds: module.diagnostic().duration / 1_000,
        tests: [...module.children.allTests()].length
      }))
      .sort((a, b) => b.seconds - a.seconds)
    const out = process.stdout
    out.write(`\nslowest ${Math.min(listed, files.length)} of ${files.length} files:\n`)
    for (const { file, seconds } of files.slice(0, listed)) out.write(`  ${seconds.toFixed(1).padStart(7)} s  ${file}\n`)
    out.write(`wall time: ${wallSeconds.toFixed(0)} s\n`)
    if (this.pgSkipped.size > 0) {
      out.write(
        `PostgreSQL: MEDIAGATE_TEST_PG_URL is not set, so the PostgreSQL cases of ${this.pgSkipped.size} ${
          this.pgSkipped.size === 1 ? "suite" : "suites"
        } did not run (${
          [...this.pgSkipped].sort().join(", ")
        }); set it to a database URL to run them (.ci/run does)\n`
      )
    }
    const timings = process.env["MEDIAGATE_TEST_TIMINGS"]
    if (timings !== undefined) writeFileSync(timings, JSON.stringify({ wallSeconds, files }, null, 2))
  }
}
