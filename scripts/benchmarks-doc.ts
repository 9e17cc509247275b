/**
 * docs/benchmarks.md, as the benchmarks write it: each recorded benchmark owns one section between
 * `<!-- bench:<name>:start -->` and `<!-- bench:<name>:end -->`, replaced in place on each
 * run (the prose around the sections is left as it is) or appended the first time.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"

const file = new URL("../docs/benchmarks.md", import.meta.url)

/**
 * The benchmarks whose sections docs/benchmarks.md records: those that measure mediagate
 * against the bare yardstick in the same run, as ratios. The others print absolute figures,
 * which move by 40% from run to run on a shared machine: good for comparing two commits in
 * one sitting, not for keeping.
 */
const recorded: ReadonlySet<string> = new Set(["e2e", "e2e-nodes", "http"])

/** Writes `section`, which starts and ends with its markers, into docs/benchmarks.md (recorded benchmarks only). */
export const writeSection = (section: string): void => {
  const name = /^<!-- bench:([a-z0-9-]+):start -->/.exec(section)?.[1]
  if (name === undefined || !section.trimEnd().endsWith(`<!-- bench:${name}:end -->`)) {
    throw new Error("a benchmarks.md section starts with <!-- bench:<name>:start --> and ends with <!-- bench:<name>:end -->")
  }
  if (!recorded.has(name)) {
    console.log(`(bench:${name} prints absolute figures; docs/benchmarks.md records only the ratios of bench:e2e and bench:http)`)
    return
  }
  const text = existsSync(file)
    ? readFileSync(file, "utf8")
    : "# Benchmarks\n\nFigures measured on this project's machine; each section names the command that reproduces it.\n"
  const placed = new RegExp(`<!-- bench:${name}:start -->[\\s\\S]*<!-- bench:${name}:end -->`)
  // A function, so that `$` in the section is not read as a replacement pattern.
  writeFileSync(file, placed.test(text) ? text.replace(placed, () => section) : `${text.trimEnd()}\n\n${section}\n`)
}
