/**
 * Generated documentation is current.
 */
import { describe, expect, it } from "@effect/vitest"
import { ModelCatalog, ModelDocs } from "@mediagate/core"
import { readFileSync } from "node:fs"

describe("docs", () => {
  it("docs/models.md matches the catalog (run `npm run docs:models` after changing a model)", () => {
    const onDisk = readFileSync(new URL("../docs/models.md", import.meta.url), "utf8")
    expect(onDisk).toBe(ModelDocs.render(ModelCatalog.allModels))
  })
})
