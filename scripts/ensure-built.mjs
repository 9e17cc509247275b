#!/usr/bin/env node
/**
 * npm's `prestart` and `preadmin`: makes sure `examples/standalone-server/dist/` (the
 * standalone server and its admin CLI, bundled by scripts/bundle-programs.ts) is current,
 * then `npm start` runs `node --max-semi-space-size=64 examples/standalone-server/dist/main.mjs` and `npm run admin`
 * `node examples/standalone-server/dist/admin.mjs`.
 *
 * Current means: every file the build wrote is there, and none of the repository's files it
 * was made from, nor the build's own definition, nor node_modules/.package-lock.json (an
 * install), changed since the build started. Checking reads the build's record and stats a
 * few hundred files (milliseconds); otherwise it builds, through tsx, which takes seconds.
 * Plain JavaScript, so that the check itself compiles nothing. `--force` always builds.
 */
import { spawnSync } from "node:child_process"
import { readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const definition = "scripts/bundle-programs.ts"
const recordFile = join(root, "examples/standalone-server/dist/build.json")

/** Why the build must be made again, or undefined when it is current. */
export const staleness = () => {
  let record
  try {
    record = JSON.parse(readFileSync(recordFile, "utf8"))
  } catch {
    return "not built yet"
  }
  for (const output of record.outputs) {
    try {
      statSync(join(root, output))
    } catch {
      return `${output} is missing`
    }
  }
  for (const input of [...record.inputs, definition]) {
    let modified
    try {
      modified = statSync(join(root, input)).mtimeMs
    } catch {
      return `${input} is gone`
    }
    if (modified >= record.startedAt) return `${input} changed`
  }
  // npm rewrites it on every install that changes node_modules (other package managers have none).
  const installed = statSync(join(root, "node_modules/.package-lock.json"), { throwIfNoEntry: false })
  if (installed !== undefined && installed.mtimeMs >= record.startedAt) return "node_modules changed"
  return undefined
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const reason = process.argv.includes("--force") ? "asked to" : staleness()
  if (reason !== undefined) {
    console.error(`mediagate: building examples/standalone-server/dist (${reason})`)
    const { status, error } = spawnSync(process.execPath, ["--import", "tsx", definition], { cwd: root, stdio: "inherit" })
    if (status !== 0) {
      console.error(`mediagate: the build failed${error === undefined ? "" : `: ${error.message}`}`)
      process.exit(1)
    }
  }
}
