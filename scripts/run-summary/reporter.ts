/**
 * The end of a test run, in vitest's main process: the slowest files, the run's wall time,
 * one line for the suites whose PostgreSQL cases did not run, and one for those whose cases on
 * the signature-checking S3 server did not run. These are what a contributor needs to see
 * that the suite stays fast (issue 32) and that nothing was left out silently.
 *
 * The PostgreSQL suites each log `pgSkipMarker` and their name when MEDIAGATE_TEST_PG_URL is
 * not set (`pgSkipReason` of @mediagate/store-sql/testing); the root vitest config keeps
 * those lines out of the default reporter's output, and this reporter gathers them. The suites
 * with cases on the S3 server at MEDIAGATE_TEST_S3_URL (Ceph RGW, scripts/ceph/start.sh) do
 * the same with `s3SkipMarker` (`checkingS3SkipReason` of packages/media/test/CheckingS3.ts).
 *
 * With MEDIAGATE_TEST_TIMINGS set to a path, it also writes every file's time there as JSON
 * (`{ wallSeconds, files: [{ file, seconds, tests }] }`), for docs/testing.md's table and
 * for `.ci/run`'s limit.
 */
import { writeFileSync } from "node:fs"
import { relative } from "node:path"
import type { UserConsoleLog } from "vitest"
import type { Reporter, TestModule } from "vitest/node"
import { s3SkipMarker } from "../../packages/media/test/s3SkipMarker.js"
import { pgSkipMarker } from "../../packages/store-sql/src/internal/pgSkipMarker.js"

/** How many of the slowest files are listed. */
const listed = 10

export default class RunSummary implements Reporter {
  private readonly started = performance.now()
  private readonly pgSkipped = new Set<string>()
  private readonly s3Skipped = new Set<string>()

  onUserConsoleLog(log: UserConsoleLog) {
    for (const line of log.content.split("\n")) {
      if (line.startsWith(pgSkipMarker)) this.pgSkipped.add(line.slice(pgSkipMarker.length).trim())
      if (line.startsWith(s3SkipMarker)) this.s3Skipped.add(line.slice(s3SkipMarker.length).trim())
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
    if (this.s3Skipped.size > 0) {
      out.write(
        `S3 with signatures: MEDIAGATE_TEST_S3_URL is not set, so the cases on an S3 server that checks signatures of ${this.s3Skipped.size} ${
          this.s3Skipped.size === 1 ? "suite" : "suites"
        } did not run (${
          [...this.s3Skipped].sort().join(", ")
        }); set it to the URL scripts/ceph/start.sh prints to run them (.ci/run does)\n`
      )
    }
    const timings = process.env["MEDIAGATE_TEST_TIMINGS"]
    if (timings !== undefined) writeFileSync(timings, JSON.stringify({ wallSeconds, files }, null, 2))
  }
}
