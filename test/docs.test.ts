/**
 * The documentation says what the code does: generated docs are current, and every claim
 * that can be checked mechanically is checked here.
 */
import { describe, expect, it } from "@effect/vitest"
import { variables } from "@mediagate/example-standalone-server/Config"
import { MediaStore, ModelCatalog, ModelDocs, Task } from "@mediagate/core"
import { Effect } from "effect"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join } from "node:path"

const root = new URL("..", import.meta.url).pathname
const read = (path: string) => readFileSync(join(root, path), "utf8")
const docs = ["README.md", ...readdirSync(join(root, "docs")).filter((name) => name.endsWith(".md")).map((name) => `docs/${name}`)]

describe("docs", () => {
  it("docs/models.md matches the catalog (run `npm run docs:models` after changing a model)", () => {
    const onDisk = readFileSync(new URL("../docs/models.md", import.meta.url), "utf8")
    expect(onDisk).toBe(ModelDocs.render(ModelCatalog.allModels))
  })

  it("the README's configuration table lists exactly the variables the server reads", () => {
    const names = /(?:MEDIAGATE|FAL|REPLICATE|OPENAI)_[A-Z_]+/
    const table = [...read("README.md").matchAll(new RegExp(`^\\| \`(${names.source})\` \\|`, "gm"))].map((match) => match[1])
    const config = [...new Set(read("examples/standalone-server/src/Config.ts").match(new RegExp(names.source, "g")))]
    expect([...table].sort()).toEqual([...variables].sort())
    expect([...config].sort()).toEqual([...variables].sort())
  })

  it("the docs stand on their own: no files outside the repository, no 'later issue'", () => {
    for (const path of docs) {
      const text = read(path)
      for (const outside of ["../shared", "DESIGN.md", "spec/media-generation-service.md", "later issue"]) {
        expect(text.includes(outside), `${path} mentions ${outside}`).toBe(false)
      }
    }
  })

  it("every relative link in the docs names a file of the repository", () => {
    for (const path of docs) {
      for (const [, target] of read(path).matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue
        expect(existsSync(join(root, dirname(path), target!)), `${path} links to ${target}`).toBe(true)
      }
    }
  })

  it("every sample task in the docs has the fields a query answers, no more and no fewer", () => {
    const fields = Object.keys(Task.Task.fields).sort()
    let samples = 0
    for (const path of docs) {
      for (const line of read(path).split("\n")) {
        if (!line.startsWith('{"code":0,"msg":"ok","data":{"taskId":') || !line.includes('"status":')) continue
        samples++
        const task = JSON.parse(line).data as Record<string, unknown>
        expect(Object.keys(task).sort(), `${path}: ${line.slice(0, 120)}...`).toEqual(fields)
      }
    }
    expect(samples).toBeGreaterThanOrEqual(3)
  })

  it("the README names exactly the simulator's prompt markers", () => {
    const source = readdirSync(join(root, "packages/upstream/src")).map((name) => read(`packages/upstream/src/${name}`)).join("\n")
    const markers = (text: string) => [...new Set(text.match(/\[sim:[a-z]+\]/g))].sort()
    expect(markers(read("README.md"))).toEqual(markers(source))
  })

  it("bench/ holds only benchmarks that an npm script runs", () => {
    const scripts = Object.values(JSON.parse(read("package.json")).scripts as Record<string, string>).join("\n")
    for (const file of readdirSync(join(root, "bench"))) {
      expect(scripts.includes(`bench/${file}`), `bench/${file} is not run by any npm script`).toBe(true)
    }
  })

  it("media file names are described as what they are: a content hash, the same for the same bytes, not random", async () => {
    const bytes = new TextEncoder().encode("the same bytes")
    const [first, second] = await Effect.runPromise(Effect.all([MediaStore.keyOf(bytes, "png"), MediaStore.keyOf(bytes, "png")]))
    expect(first).toBe(second)
    const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))
    expect(first).toBe(`${Buffer.from(hash.subarray(0, 16)).toString("hex")}.png`)
    expect(read("docs/api.md").replace(/\s+/g, " ")).toContain("the first 32 hex characters (128 bits) of the SHA-256 of its bytes")
    // decisions.md is a log: it quotes the old claim when it says why it was wrong.
    for (const path of docs.filter((path) => path !== "docs/decisions.md")) expect(read(path), path).not.toMatch(/random bits/)
  })

  it("the secrets the standalone server shows are described as shown once", () => {
    for (const path of docs) {
      expect(read(path), path).not.toMatch(/prints? (it|its secret|the secret) at (every )?start/)
    }
  })
})
