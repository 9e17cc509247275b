/**
 * Runs in each test worker before a test file: writes which file this worker runs, for the
 * watchdog reporter in the main process (reporter.ts), which stops a worker whose file
 * stopped making progress. A worker is a process (the forks pool: its pid) or a thread of
 * the main process (the threads pool: `<pid>-<threadId>`).
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { isMainThread, threadId } from "node:worker_threads"
import { beforeAll } from "vitest"

const dir = process.env["MEDIAGATE_TEST_WATCHDOG_DIR"]
if (dir !== undefined) {
  beforeAll((suite) => {
    writeFileSync(join(dir, isMainThread ? String(process.pid) : `${process.pid}-${threadId}`), suite.file.filepath)
  })
}
