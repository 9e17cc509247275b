#!/usr/bin/env node
// The `mediagate` command. Until @mediagate/cli ships built JavaScript it runs its
// TypeScript source through tsx, resolving the workspace's @mediagate/* packages to their
// sources (the "@mediagate/source" export condition) as the repository's scripts do.
import { register } from "node:module"
import { register as registerTsx } from "tsx/esm/api"

register(
  "data:text/javascript," +
    encodeURIComponent(
      "export const resolve = (specifier, context, next) => next(specifier, { ...context, conditions: [...new Set([...context.conditions, '@mediagate/source'])] })"
    )
)
registerTsx()
await import("../src/main.ts")
