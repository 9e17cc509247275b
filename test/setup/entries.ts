/**
 * Vitest's global setup for the black-box suites: the programs they start as processes (the
 * standalone server, its admin CLI, the client CLI, the bare server of bench/) are built
 * once per run into one JavaScript file each, and every suite starts `node` on those files.
 *
 * Started through tsx, each process compiled the packages' TypeScript again and then loaded
 * effect and its packages module by module: 3.7 s to the "listening" line on the 2-core
 * machine, against 1.2 s for the bundle, and admin.test.ts alone runs the admin CLI about 30
 * times.
 * The esbuild options are scripts/bundle-programs.ts's, the same that build the standalone
 * server's dist/ for `npm start` (which test/standalone.test.ts also starts).
 */
import { build } from "esbuild"
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { join } from "node:path"
import type { TestProject } from "vitest/node"
import { bundleOptions, root, standalone } from "../../scripts/bundle-programs.js"

/** What is built: a name for each program, and its TypeScript entry. */
export const programs = {
  server: standalone.entries.main,
  admin: standalone.entries.admin,
  cli: "packages/cli/src/main.ts",
  bare: "bench/bare/server.ts"
} as const

export type Program = keyof typeof programs

declare module "vitest" {
  export interface ProvidedContext {
    /** The built file of each program (an absolute path). */
    readonly programs: Record<Program, string>
  }
}

export default async function setup(project: TestProject) {
  // Inside the repository, so that Node resolves the bundles' packages from its node_modules.
  const cache = join(root, "node_modules", ".cache", "mediagate")
  mkdirSync(cache, { recursive: true })
  const outdir = mkdtempSync(join(cache, "programs-"))
  await build(bundleOptions(programs, outdir))
  project.provide(
    "programs",
    Object.fromEntries(Object.keys(programs).map((name) => [name, join(outdir, `${name}.mjs`)])) as Record<Program, string>
  )
  return () => rmSync(outdir, { recursive: true, force: true })
}
