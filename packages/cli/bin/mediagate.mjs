#!/usr/bin/env node
// The `mediagate` command. Installed from its package it runs the built JavaScript
// (dist/main.js). Inside the repository (its tsconfig.json, which the package does not
// ship, is beside it) it runs the TypeScript source through tsx, whether or not a build
// left dist/ behind, resolving the workspace's @mediagate/* packages to their sources (the
// "@mediagate/source" export condition) as the repository's scripts do.
import { existsSync } from "node:fs"

if (!existsSync(new URL("../tsconfig.json", import.meta.url))) {
  await import(new URL("../dist/main.js", import.meta.url).href)
} else {
  const { register } = await import("node:module")
  const { register: registerTsx } = await import("tsx/esm/api")
  register(
    "data:text/javascript," +
      encodeURIComponent(
        "export const resolve = (specifier, context, next) => next(specifier, { ...context, conditions: [...new Set([...context.conditions, '@mediagate/source'])] })"
      )
  )
  registerTsx()
  await import("../src/main.ts")
}
