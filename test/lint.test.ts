/**
 * The repository's own rules (scripts/lint/rules.mjs, `npm run lint`): the script run as a
 * process on a small tree that breaks each rule once, on one that breaks none, and on the
 * repository itself; and the layer table in docs/architecture.md is the script's.
 */
import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"

const root = new URL("..", import.meta.url).pathname
const script = join(root, "scripts/lint/rules.mjs")

const lint = (...args: Array<string>) => {
  const run = spawnSync(process.execPath, [script, ...args], { encoding: "utf8" })
  return { status: run.status, lines: run.stdout.trim().split("\n"), stderr: run.stderr }
}

const inTree = (files: Record<string, string>, body: (tree: string) => void) => {
  const tree = mkdtempSync(join(tmpdir(), "mediagate-lint-"))
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(tree, path)), { recursive: true })
      writeFileSync(join(tree, path), text)
    }
    body(tree)
  } finally {
    rmSync(tree, { recursive: true, force: true })
  }
}

const lines = (count: number) => Array.from({ length: count }, (_, i) => `export const line${i} = ${i}\n`).join("")

/** A tree that keeps every rule: the layers' packages, with the imports they may make. */
const lawful: Record<string, string> = {
  "packages/core/package.json": JSON.stringify({ name: "@mediagate/core" }),
  "packages/core/src/index.ts": `export * as Progress from "./domain/Progress.js"\n`,
  "packages/core/src/domain/Progress.ts": lines(400),
  "packages/http/package.json": JSON.stringify({ name: "@mediagate/http", dependencies: { "@mediagate/core": "0.1.0" } }),
  "packages/http/src/index.ts": `import { Progress } from "@mediagate/core"\nimport * as HttpRouter from "@effect/platform/HttpRouter"\nexport const p = [Progress, HttpRouter]\n`,
  "packages/server/package.json": JSON.stringify({
    name: "@mediagate/server",
    dependencies: { "@mediagate/core": "0.1.0", "@mediagate/http": "0.1.0" }
  }),
  "packages/server/src/index.ts": `import type { p } from "@mediagate/http"\nexport * from "@mediagate/core/testing"\n`,
  "examples/demo/src/main.ts": `const s3 = await import("@mediagate/server")\n// import "@mediagate/cli" is a comment\n`
}

describe("scripts/lint/rules.mjs", () => {
  it("passes a tree that keeps every rule (a 400-line file, imports down the layers, index and main repeated)", () => {
    inTree(lawful, (tree) => {
      const run = lint(tree)
      expect(run.lines).toEqual(["lint: the rules hold (file length, layers, base names)"])
      expect(run.status).toBe(0)
    })
  })

  it("names each offence and exits 1: a 401-line file, imports up the layers, a relative import out of its package, @effect/platform's index, a repeated base name", () => {
    inTree({
      ...lawful,
      "packages/core/src/domain/Long.ts": lines(401),
      "packages/core/src/api/Up.ts": `\n\nexport { a } from "@mediagate/http/Handlers"\n`,
      "packages/http/src/Progress.ts": `import { s } from "@mediagate/server"\nimport { t } from "../../core/src/index.js"\n`,
      "packages/http/src/Routes.ts": `import type { HttpApp } from "@effect/platform/HttpApp"\nimport { HttpRouter } from "@effect/platform"\n`,
      "packages/http/package.json": JSON.stringify({
        name: "@mediagate/http",
        dependencies: { "@mediagate/core": "0.1.0" },
        peerDependencies: { "@mediagate/server": "0.1.0" }
      })
    }, (tree) => {
      const run = lint(tree)
      expect(run.status).toBe(1)
      expect(run.lines).toEqual(expect.arrayContaining([
        "packages/core/src/domain/Long.ts: 401 lines, over the limit of 400: split it by concept",
        "packages/core/src/api/Up.ts:3: imports @mediagate/http/Handlers, but the core layer (packages/core) may import nothing of ours",
        "packages/http/src/Progress.ts:1: imports @mediagate/server, but the adapters layer (packages/http) may import @mediagate/core",
        "packages/http/src/Progress.ts:2: imports ../../core/src/index.js, outside packages/http: import another package by its name",
        "packages/http/package.json: peerDependencies names @mediagate/server, but the adapters layer may import @mediagate/core",
        "packages/core/src/domain/Progress.ts: shares its base name with packages/http/src/Progress.ts: name each file for what it holds",
        "packages/http/src/Progress.ts: shares its base name with packages/core/src/domain/Progress.ts: name each file for what it holds",
        "packages/http/src/Routes.ts:2: imports @effect/platform's index: import each module by its own path (@effect/platform/HttpRouter)",
        "lint: 8 offences"
      ]))
      expect(run.lines).toHaveLength(9)
    })
  })

  it("names a package that is in no layer", () => {
    inTree({ ...lawful, "packages/extra/src/Extra.ts": `export const extra = 1\n` }, (tree) => {
      const run = lint(tree)
      expect(run.lines).toEqual([
        "packages/extra: is in no layer: add it to the table in scripts/lint/rules.mjs",
        "lint: 1 offence"
      ])
      expect(run.status).toBe(1)
    })
  })

  it("passes the repository", () => {
    const run = lint()
    expect(run.lines).toEqual(["lint: the rules hold (file length, layers, base names)"])
    expect(run.status).toBe(0)
  })

  it("docs/architecture.md shows the script's layer table", () => {
    const table = lint("--layers").lines.join("\n")
    expect(readFileSync(join(root, "docs/architecture.md"), "utf8")).toContain(table)
  })
})
