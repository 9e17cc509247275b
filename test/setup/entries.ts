/**
 * Vitest's global setup for the black-box suites: the programs they start as processes (the
 * standalone server, its admin CLI, the client CLI, the bare server of bench/) are built
 * once per run into one JavaScript file each, and every suite starts `node` on those files.
 *
 * Started through tsx, each process compiled the packages' TypeScript again and then loaded
 * effect and its packages module by module: 3.7 s to the "listening" line on the 2-core
 * machine, against 1.2 s for the bundle, and admin.test.ts alone runs the admin CLI about 30
 * times.
 * esbuild bundles the @mediagate/* sources (the "@mediagate/source" condition, as tsx
 * resolves them) with the packages they import, at the versions in node_modules; packages
 * with native code or files of their own (better-sqlite3, pg, sharp, ...) stay imports that
 * Node resolves from node_modules. `npm start` itself still goes through tsx;
 * test/standalone.test.ts starts the server that way too.
 */
import { build } from "esbuild"
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { join } from "node:path"
import type { TestProject } from "vitest/node"

const root = new URL("../..", import.meta.url).pathname

/** What is built: a name for each program, and its TypeScript entry. */
export const programs = {
  server: "examples/standalone-server/src/main.ts",
  admin: "examples/standalone-server/src/admin.ts",
  cli: "packages/cli/src/main.ts",
  bare: "bench/bare/server.ts"
} as const

export type Program = keyof typeof programs

/**
 * Packages left to Node: native addons (better-sqlite3, sharp, pg's optional pg-native),
 * ws's optional native helpers, and the AWS and OpenTelemetry SDKs (large, loaded only when
 * the configuration asks for them, and not effect's packages, so there is no second copy of
 * effect). Everything else, effect included, is in the bundle.
 */
const external = /^(better-sqlite3|pg|pg-native|sharp|ws|bufferutil|utf-8-validate|mp4box|@aws-sdk\/.*|@smithy\/.*|@opentelemetry\/.*)$/

/** `@scope/name` or `name` of an import path. */
const packageName = (path: string) => path.split("/").slice(0, path.startsWith("@") ? 2 : 1).join("/")

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
  await build({
    entryPoints: Object.fromEntries(Object.entries(programs).map(([name, entry]) => [name, join(root, entry)])),
    outdir,
    outExtension: { ".js": ".mjs" },
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    conditions: ["@mediagate/source"],
    logLevel: "warning",
    // ESM builds first: some packages' "main" is a UMD file whose requires esbuild cannot follow.
    mainFields: ["module", "main"],
    // For the CommonJS packages inside the bundle.
    banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
    plugins: [{
      name: "native-and-large-packages-from-node-modules",
      setup(build) {
        build.onResolve({ filter: /^[^./]/ }, (args) => (external.test(packageName(args.path)) ? { path: args.path, external: true } : undefined))
      }
    }]
  })
  project.provide(
    "programs",
    Object.fromEntries(Object.keys(programs).map((name) => [name, join(outdir, `${name}.mjs`)])) as Record<Program, string>
  )
  return () => rmSync(outdir, { recursive: true, force: true })
}
