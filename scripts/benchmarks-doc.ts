/**
 * docs/benchmarks.md, as the benchmarks write it: each benchmark owns one section between
 * `<!-- bench:<name>:start -->` and `<!-- bench:<name>:end -->`, replaced in place on each
 * run (the prose around the sections is left as it is) or appended the first time.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"

const file = new URL("../docs/benchmarks.md", import.meta.url)

/** Writes `section`, which starts and ends with its markers, into docs/benchmarks.md. */
export const writeSection = (section: string): void => {
  const name = /^<!-- bench:([a-z0-9-]+):start -->/.exec(section)?.[1]
  if (name === undefined || !section.trimEnd().endsWith(`<!-- bench:${name}:end -->`)) {
    throw new Error("a benchmarks.md section starts with <!-- bench:<name>:start --> and ends with <!-- bench:<name>:end -->")
  }
  const text = existsSync(file)
    ? readFileSync(file, "utf8")
    : "# Benchmarks\n\nFigures measured on this project's machine; each section names the command that reproduces it.\n"
  const placed = new RegExp(`<!-- bench:${name}:start -->[\\s\\S]*<!-- bench:${name}:end -->`)
  // A function, so that `$` in the section is not read as a replacement pattern.
  writeFileSync(file, placed.test(text) ? text.replace(placed, () => section) : `${text.trimEnd()}\n\n${section}\n`)
}
