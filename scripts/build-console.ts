/** Writes packages/http/src/ConsoleScript.ts from packages/http/src/console/*.ts and uPlot. */
import { writeFileSync } from "node:fs"
import { render, target } from "./console-script.js"

writeFileSync(target, await render())
console.log("packages/http/src/ConsoleScript.ts written")
