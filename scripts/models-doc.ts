/** Writes docs/models.md from the model catalog. */
import { ModelCatalog, ModelDocs } from "@mediagate/core"
import { writeFileSync } from "node:fs"

writeFileSync(new URL("../docs/models.md", import.meta.url), ModelDocs.render(ModelCatalog.allModels))
console.log("docs/models.md written")
