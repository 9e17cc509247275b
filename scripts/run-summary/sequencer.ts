/**
 * The order test files start in: the files of `slowest.json` first, longest first, then the
 * rest in vitest's own order (its cached durations from an earlier run on this machine, or
 * the larger files first). Workers take files in this order, so the long files start at
 * once instead of being left for last, when the other workers would have nothing left to do
 * (on a fresh clone vitest has no durations of its own).
 *
 * `slowest.json` holds the slowest files of a run, as `npm test` on the 2-core machine timed
 * them; `MEDIAGATE_TEST_TIMINGS=<file> npm test` writes every file's time to refresh it
 * (docs/testing.md).
 */
import { readFileSync } from "node:fs"
import { relative } from "node:path"
import { BaseSequencer, type TestSpecification } from "vitest/node"

/** The slowest files, slowest first, relative to the repository. */
const slowest: ReadonlyArray<string> = JSON.parse(readFileSync(new URL("./slowest.json", import.meta.url), "utf8")).files

export default class SlowestFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const rank = (file: TestSpecification) => {
      const index = slowest.indexOf(relative(this.ctx.config.root, file.moduleId))
      return index === -1 ? slowest.length : index
    }
    // Array.prototype.sort is stable: files not listed keep vitest's order among themselves.
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b))
  }
}
