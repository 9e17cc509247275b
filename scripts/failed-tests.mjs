// Prints the failed tests of vitest JSON reports, one line each with the first line of the
// failure, so that the end of a CI log names what failed (the failures themselves are far
// above it, in the middle of the run's output).
// Usage: node scripts/failed-tests.mjs <report.json> [<report.json> ...]
import { existsSync, readFileSync } from "node:fs"
import { relative } from "node:path"

for (const path of process.argv.slice(2)) {
  if (!existsSync(path)) continue
  const report = JSON.parse(readFileSync(path, "utf8"))
  for (const file of report.testResults ?? []) {
    const failed = (file.assertionResults ?? []).filter((test) => test.status === "failed")
    const name = relative(process.cwd(), file.name)
    if (failed.length === 0 && file.status === "failed") {
      console.log(`failed: ${name}: ${firstLine(file.message)}`)
    }
    for (const test of failed) {
      console.log(`failed: ${name} > ${test.fullName}: ${firstLine(test.failureMessages?.[0])}`)
    }
  }
}

function firstLine(message) {
  return String(message ?? "").split("\n").find((line) => line.trim() !== "")?.trim().slice(0, 300) ?? ""
}
