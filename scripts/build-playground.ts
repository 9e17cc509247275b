/** Writes packages/http/src/PlaygroundScript.ts from packages/http/src/playground/app.ts. */
import { writeFileSync } from "node:fs"
import { render, target } from "./playground-script.js"

writeFileSync(target, await render())
console.log("packages/http/src/PlaygroundScript.ts written")
