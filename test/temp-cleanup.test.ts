/**
 * Suites that write to the temp directory clean up after themselves. They run here in a
 * child vitest whose temp directory is a fresh folder; afterwards nothing of ours is left.
 * (A `process.on("exit")` hook is not enough: vitest's workers do not fire it.)
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const root = new URL("..", import.meta.url).pathname
const scratch = mkdtempSync(join(tmpdir(), "mediagate-tmpcheck-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** The suites that create temp folders (restart.test.ts too, but it runs a server for a minute). */
const suites = ["test/store-contract.test.ts", "test/ffprobe.test.ts", "packages/media/test/FileMediaStore.test.ts"]

describe("temp folders", () => {
  it("suites that create mediagate-* temp folders remove them when they finish", { timeout: 120_000 }, async () => {
    const outcome = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        [join(root, "node_modules/vitest/vitest.mjs"), "run", ...suites],
        { cwd: root, env: { ...process.env, TMPDIR: scratch, TMP: scratch, TEMP: scratch, NO_COLOR: "1", FORCE_COLOR: "0" }, maxBuffer: 16 * 1024 * 1024 },
        (error, stdout, stderr) => resolve({ code: error === null ? 0 : (error.code as number | null) ?? 1, output: stdout + stderr })
      )
      child.stdin?.end()
    })
    expect(outcome.code, outcome.output).toBe(0)
    expect(outcome.output).toMatch(/Test Files\s+\d+ passed/)
    expect(readdirSync(scratch).filter((name) => name.startsWith("mediagate-"))).toEqual([])
  })
})
