/**
 * Runs in each test worker before a test file: writes which file this worker process runs,
 * for the watchdog reporter in the main process (reporter.ts), which kills a worker whose
 * file stopped making progress.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { beforeAll } from "vitest"

const dir = process.env["MEDIAGATE_TEST_WATCHDOG_DIR"]
if (dir !== undefined) {
  beforeAll((suite) => {
    writeFileSync(join(dir, String(process.pid)), suite.file.filepath)
  })
}
