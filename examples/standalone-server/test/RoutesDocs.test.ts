/**
 * The routes files shown in the README and docs/providers.md are valid: each parses with
 * every provider configured, and its routes serve the models it names.
 */
import { describe, expect, it } from "@effect/vitest"
import { RoutesFile } from "@mediagate/upstream"
import { Either } from "effect"
import { readFileSync } from "node:fs"

const root = new URL("../../../", import.meta.url)
/** The JSON of each code block that holds a routes file (after `$ cat routes.json` in a console block). */
const routesFiles = (file: string) =>
  [...readFileSync(new URL(file, root), "utf8").matchAll(/```(?:json|console)\n([\s\S]*?)```/g)]
    .map((match) => match[1]!)
    .filter((block) => block.includes('"routes"'))
    .map((block) => block.split("\n").filter((line) => !line.startsWith("$")).join("\n"))

describe("routes files in the docs", () => {
  for (const file of ["README.md", "docs/providers.md"]) {
    it(`${file}: every routes file shown is valid`, () => {
      const shown = routesFiles(file)
      expect(shown.length).toBeGreaterThan(0)
      const names = RoutesFile.routableModels()
      for (const text of shown) {
        const parsed = RoutesFile.parse(text, file, { providers: new Set(["fal", "replicate", "openai", "relay"]), models: new Set(names.keys()) })
        expect(Either.isRight(parsed) ? "valid" : parsed.left.message).toBe("valid")
        if (Either.isRight(parsed)) expect(RoutesFile.expandRoutes(parsed.right, names).length).toBeGreaterThanOrEqual(parsed.right.length)
      }
    })
  }
})
