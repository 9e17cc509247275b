/**
 * The test run's watchdog, in vitest's main process (issue 20). A test file whose worker
 * stops giving the event loop a turn (a fiber spinning in microtasks) never fires its own
 * timeouts, so nothing inside the worker can end it. Here, outside it: every running file's
 * last sign of life (its start, each finished test) is watched; a file silent for longer
 * than the limit is named on stderr and its worker process is killed. Vitest then ends the
 * whole run with an error (its pool does not survive a worker's death), so the watchdog
 * first writes what the run has counted so far, the stopped file counted as a failure, to
 * `MEDIAGATE_TEST_WATCHDOG_REPORT` when set (`.ci/run` reads it when vitest wrote no
 * results). A run can then never hang until CI's limit.
 *
 * The limit is `MEDIAGATE_TEST_STALL_SECONDS` (default 420: above the longest test timeout
 * in the suite, 240 s, with its hooks). Workers tell which file they run through
 * `setup.ts` (a file per worker pid in a directory this reporter names).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import type { Reporter, TestCase, TestModule } from "vitest/node"

const limitSeconds = Number(process.env["MEDIAGATE_TEST_STALL_SECONDS"] ?? 420)

export default class StallWatchdog implements Reporter {
  private readonly dir = mkdtempSync(join(tmpdir(), "mediagate-watchdog-"))
  /** Running files and when each last showed life (epoch ms). */
  private readonly running = new Map<string, number>()
  private readonly timer: NodeJS.Timeout
  /** Files this watchdog stopped, for the summary at the end. */
  private readonly stopped: Array<string> = []
  private passed = 0
  private failed = 0

  constructor() {
    // Read by setup.ts in every worker (forks inherit the environment when they start).
    process.env["MEDIAGATE_TEST_WATCHDOG_DIR"] = this.dir
    this.timer = setInterval(() => this.check(), 5_000)
    this.timer.unref()
  }

  onTestModuleStart(module: TestModule) {
    this.running.set(module.moduleId, Date.now())
  }

  onTestCaseResult(test: TestCase) {
    const state = test.result().state
    if (state === "passed") this.passed++
    if (state === "failed") this.failed++
    if (this.running.has(test.module.moduleId)) this.running.set(test.module.moduleId, Date.now())
  }

  onTestModuleEnd(module: TestModule) {
    this.running.delete(module.moduleId)
  }

  onTestRunEnd() {
    clearInterval(this.timer)
    for (const file of this.stopped) {
      process.stderr.write(`watchdog: ${relative(process.cwd(), file)} was stopped after ${limitSeconds} s without progress\n`)
    }
    rmSync(this.dir, { recursive: true, force: true })
  }

  /** The workers running `file`, as they wrote them: a process's pid, or `<pid>-<threadId>` for a thread. */
  private workersOf(file: string): Array<string> {
    const pids: Array<string> = []
    for (const name of readdirSync(this.dir)) {
      try {
        if (readFileSync(join(this.dir, name), "utf8") === file) pids.push(name)
      } catch {
        // Removed meanwhile: that worker moved on.
      }
    }
    return pids
  }

  private check() {
    const now = Date.now()
    for (const [file, since] of this.running) {
      if (now - since < limitSeconds * 1_000) continue
      this.running.delete(file)
      this.stopped.push(file)
      const pids = this.workersOf(file)
      const report = process.env["MEDIAGATE_TEST_WATCHDOG_REPORT"]
      if (report !== undefined) {
        const stalled = this.stopped.map((stopped) => relative(process.cwd(), stopped))
        writeFileSync(report, JSON.stringify({ numPassedTests: this.passed, numFailedTests: this.failed + this.stopped.length, stalled }))
      }
      // Synchronously: the run may end right after (a worker thread, below).
      writeSync(
        2,
        `\nwatchdog: ${relative(process.cwd(), file)} made no progress for ${limitSeconds} s (its worker does not answer: a fiber spinning without giving the event loop a turn?); stopping worker ${pids.join(", ") || "(unknown)"}\n`
      )
      for (const worker of pids) {
        if (worker.includes("-")) {
          // A thread of this process, which cannot be stopped from here while it spins: the
          // run ends now, with the report above written and this said on stderr.
          writeSync(2, `watchdog: ${relative(process.cwd(), file)} runs in a worker thread of vitest's own process; ending the run\n`)
          process.exit(1)
        }
        try {
          process.kill(Number(worker), "SIGKILL")
        } catch {
          // Gone already.
        }
      }
    }
  }
}
