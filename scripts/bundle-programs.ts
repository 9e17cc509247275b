/**
 * The programs built into plain JavaScript with esbuild, one definition for both of their
 * builds: the test setup's (test/setup/entries.ts: the standalone server, its admin CLI, the
 * client CLI and the bare server of bench/, once per test run) and the standalone server's own
 * (`examples/standalone-server/dist/`, what `npm start` and `npm run admin` run).
 *
 * esbuild bundles the @mediagate/* sources (the "@mediagate/source" condition, as tsx
 * resolves them) with the packages they import, at the versions in node_modules; packages
 * with native code or files of their own (better-sqlite3, pg, sharp, ...) stay imports that
 * Node resolves from node_modules, so a bundle runs inside the repository (or beside its
 * node_modules). Loading one file instead of compiling TypeScript and loading effect module
 * by module is what makes a start fast (docs/benchmarks.md, "Issue 37: start time").
 *
 * `node --import tsx scripts/bundle-programs.ts` builds the standalone server's dist/;
 * `scripts/ensure-built.mjs` (npm's `prestart` and `preadmin`) runs it when that build is
 * missing or older than its sources.
 */
import { build, type BuildOptions } from "esbuild"
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

/** The repository's root (absolute, with a trailing slash). */
export const root = fileURLToPath(new URL("..", import.meta.url))

/**
 * Packages left to Node: native addons (better-sqlite3, sharp, pg's optional pg-native),
 * ws's optional native helpers, and the AWS and OpenTelemetry SDKs (large, loaded only when
 * the configuration asks for them, and not effect's packages, so there is no second copy of
 * effect). Everything else, effect included, is in the bundle.
 */
const external = /^(better-sqlite3|pg|pg-native|sharp|ws|bufferutil|utf-8-validate|mp4box|@aws-sdk\/.*|@smithy\/.*|@opentelemetry\/.*)$/

/** `@scope/name` or `name` of an import path. */
const packageName = (path: string) => path.split("/").slice(0, path.startsWith("@") ? 2 : 1).join("/")

/**
 * esbuild's options for `entries` (an output name for each TypeScript entry, relative to the
 * repository) into `outdir`: `<name>.mjs` each, ES modules for Node 20, and their chunks in
 * `chunks/`. Split into chunks so that what a program imports only when its configuration
 * asks (`import()`: the S3 store, the OpenTelemetry SDK) stays out of its start, with the
 * packages those parts import from node_modules: in one file, esbuild would hoist their
 * imports to the top, and every start would load the AWS SDK.
 */
export const bundleOptions = (entries: Record<string, string>, outdir: string): BuildOptions => ({
  entryPoints: Object.fromEntries(Object.entries(entries).map(([name, entry]) => [name, join(root, entry)])),
  outdir,
  // Paths in the metafile are relative to the root.
  absWorkingDir: root,
  outExtension: { ".js": ".mjs" },
  bundle: true,
  splitting: true,
  chunkNames: "chunks/[name]-[hash]",
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

/** The standalone server's own build: its entries, and where they go. */
export const standalone = {
  entries: { main: "examples/standalone-server/src/main.ts", admin: "examples/standalone-server/src/admin.ts" },
  outdir: join(root, "examples/standalone-server/dist")
} as const

/**
 * What scripts/ensure-built.mjs reads to tell whether the build is current: when it started,
 * the repository's files it was made from and the files it wrote (paths from the root).
 */
export interface BuildRecord {
  readonly startedAt: number
  readonly inputs: ReadonlyArray<string>
  readonly outputs: ReadonlyArray<string>
}

/** The record's file, beside the build. */
export const recordFile = join(standalone.outdir, "build.json")

/**
 * Builds the standalone server into its dist/. Each file is written under a temporary name
 * and renamed over the old one, so a server starting meanwhile (or another build, when
 * several `npm start` run at once) reads whole files; the record comes last.
 */
export const buildStandalone = async (): Promise<BuildRecord> => {
  const startedAt = Date.now()
  const result = await build({ ...bundleOptions(standalone.entries, standalone.outdir), write: false, metafile: true })
  mkdirSync(standalone.outdir, { recursive: true })
  const place = (path: string, contents: string | Uint8Array) => {
    const temporary = `${path}.${process.pid}.tmp`
    writeFileSync(temporary, contents)
    renameSync(temporary, path)
  }
  for (const file of result.outputFiles) {
    mkdirSync(dirname(file.path), { recursive: true })
    place(file.path, file.contents)
  }
  const record: BuildRecord = {
    startedAt,
    // Sources only: a package's files change with node_modules/.package-lock.json, which the check reads instead.
    inputs: Object.keys(result.metafile.inputs).filter((path) => !path.split("/").includes("node_modules")),
    outputs: result.outputFiles.map((file) => relative(root, file.path))
  }
  place(recordFile, `${JSON.stringify(record, null, 1)}\n`)
  // The chunks of earlier builds (a chunk's name changes with its contents).
  const chunks = join(standalone.outdir, "chunks")
  for (const name of existsSync(chunks) ? readdirSync(chunks) : []) {
    if (name.endsWith(".mjs") && !record.outputs.includes(relative(root, join(chunks, name)))) rmSync(join(chunks, name), { force: true })
  }
  return record
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const record = await buildStandalone()
  console.error(`mediagate: built ${record.outputs.length} files in ${relative(root, standalone.outdir)} from ${record.inputs.length} source files`)
}
