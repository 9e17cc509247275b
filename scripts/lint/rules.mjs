#!/usr/bin/env node
/**
 * The repository's own rules, checked (`npm run lint`, a step of .ci/run):
 *
 * - no source file of `packages/<name>/src` or `examples/<name>/src` has more than 400 lines;
 * - imports go down the layers only (the table below): core imports nothing of ours, the
 *   adapters import core only, the composition and the command line sit on top. A package's
 *   declared dependencies on our packages obey the same table, and no relative import leaves
 *   its package;
 * - no two of those source files share a base name (entry points, `index` and `main`, aside),
 *   so that no import needs an alias;
 * - `@effect/platform` is imported by module (`@effect/platform/HttpRouter`), never from its
 *   index: with the index in a bundle, esbuild keeps every module it names, Scalar's 3.4 MB
 *   page among them, in the chunk every program loads (docs/decisions.md).
 *
 * Each offence is printed on a line of its own, `path[:line]: what`, and the exit code is 1;
 * with none it is 0. `node scripts/lint/rules.mjs [root]` checks the tree at root (the
 * repository by default); `--layers` prints the layer table as docs/architecture.md shows it.
 * Imports are read with TypeScript's parser, so comments and strings never count.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve, sep } from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

/** A source file over this many lines is an offence. */
export const maxLines = 400

/** Base names (without extension) any package may use: entry points, named by convention. */
export const entryNames = ["index", "main"]

/** The folders whose `<name>/src` trees hold the checked sources. */
export const sourceRoots = ["packages", "examples"]

/**
 * The layers, lowest first. `packages` names folders under packages/ ("examples/*" is every
 * example); `mayImport` the packages of ours the members may import (`@mediagate/<name>`).
 */
export const layers = [
  { layer: "core", packages: ["core"], mayImport: [] },
  {
    layer: "adapters",
    packages: ["store-memory", "store-sql", "media", "upstream", "scheduler", "http", "client"],
    mayImport: ["core"]
  },
  {
    layer: "composition",
    packages: ["server"],
    mayImport: ["core", "store-memory", "store-sql", "media", "upstream", "scheduler", "http"]
  },
  { layer: "command line", packages: ["cli"], mayImport: ["client"] },
  {
    layer: "examples",
    packages: ["examples/*"],
    mayImport: ["core", "store-memory", "store-sql", "media", "upstream", "scheduler", "http", "client", "server"]
  }
]

/** The layer table in Markdown, as docs/architecture.md holds it. */
export const layerTable = () =>
  [
    "| Layer | Packages | May import |",
    "| --- | --- | --- |",
    ...layers.map(({ layer, mayImport, packages }) =>
      `| ${layer} | ${packages.map((name) => `\`${name}\``).join(", ")} | ${
        mayImport.length === 0 ? "nothing of ours" : mayImport.map((name) => `\`${name}\``).join(", ")
      } |`
    )
  ].join("\n")

const sourceFile = /\.(?:[cm]?[jt]sx?)$/
const ours = "@mediagate/"

/** The layer entry of a unit (`packages/<name>` or `examples/<name>`), if the table has one. */
const layerOf = (kind, name) =>
  layers.find(({ packages }) => packages.includes(kind === "examples" ? "examples/*" : name))

const walk = (directory) =>
  readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name)
    if (entry.isDirectory()) return walk(path)
    return entry.isFile() && sourceFile.test(entry.name) ? [path] : []
  })

/** The package or example folders under root: `{ kind, name, dir }`. */
const units = (root) =>
  sourceRoots.flatMap((kind) => {
    const base = join(root, kind)
    if (!existsSync(base)) return []
    return readdirSync(base)
      .filter((name) => statSync(join(base, name)).isDirectory())
      .map((name) => ({ kind, name, dir: join(base, name) }))
  })

const lineCount = (text) => {
  if (text.length === 0) return 0
  const lines = text.split("\n").length
  return text.endsWith("\n") ? lines - 1 : lines
}

/** Every module specifier the file names, with its line (1-based): imports, re-exports, import(), require(). */
export const importsOf = (path, text) => {
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true)
  const found = []
  const add = (node) => {
    if (node && ts.isStringLiteralLike(node)) {
      found.push({ specifier: node.text, line: source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1 })
    }
  }
  const visit = (node) => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) add(node.moduleSpecifier)
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      add(node.moduleReference.expression)
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal)
    else if (
      ts.isCallExpression(node) &&
      (node.expression.kind === ts.SyntaxKind.ImportKeyword ||
        (ts.isIdentifier(node.expression) && node.expression.text === "require"))
    ) add(node.arguments[0])
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

/** The offences in the tree at root: `{ path, line?, message }`, path relative to root. */
export const check = (root) => {
  const offences = []
  const byBase = new Map()
  const show = (path) => relative(root, path).split(sep).join("/")
  const allowedText = (entry) =>
    entry.mayImport.length === 0 ? "nothing of ours" : entry.mayImport.map((name) => ours + name).join(", ")

  for (const unit of units(root)) {
    const entry = layerOf(unit.kind, unit.name)
    const label = `${unit.kind}/${unit.name}`
    const manifest = join(unit.dir, "package.json")
    if (entry === undefined) {
      offences.push({ path: label, message: `is in no layer: add it to the table in scripts/lint/rules.mjs` })
    } else if (existsSync(manifest)) {
      const json = JSON.parse(readFileSync(manifest, "utf8"))
      for (const field of ["dependencies", "peerDependencies"]) {
        for (const dependency of Object.keys(json[field] ?? {})) {
          const name = dependency.startsWith(ours) ? dependency.slice(ours.length) : undefined
          if (name !== undefined && !entry.mayImport.includes(name)) {
            offences.push({
              path: show(manifest),
              message: `${field} names ${dependency}, but the ${entry.layer} layer may import ${allowedText(entry)}`
            })
          }
        }
      }
    }
    const src = join(unit.dir, "src")
    if (!existsSync(src)) continue
    for (const path of walk(src)) {
      const text = readFileSync(path, "utf8")
      const lines = lineCount(text)
      if (lines > maxLines) {
        offences.push({ path: show(path), message: `${lines} lines, over the limit of ${maxLines}: split it by concept` })
      }
      const base = path.slice(path.lastIndexOf(sep) + 1).replace(sourceFile, "")
      if (!entryNames.includes(base)) {
        const key = base.toLowerCase()
        byBase.set(key, [...(byBase.get(key) ?? []), show(path)])
      }
      for (const { line, specifier } of importsOf(path, text)) {
        if (specifier.startsWith(ours)) {
          const name = specifier.slice(ours.length).split("/")[0]
          if (entry !== undefined && name !== unit.name && !entry.mayImport.includes(name)) {
            offences.push({
              path: show(path),
              line,
              message: `imports ${specifier}, but the ${entry.layer} layer (${label}) may import ${allowedText(entry)}`
            })
          }
        } else if (specifier === "@effect/platform") {
          offences.push({
            path: show(path),
            line,
            message: `imports @effect/platform's index: import each module by its own path (@effect/platform/HttpRouter)`
          })
        } else if (specifier.startsWith(".")) {
          const target = resolve(dirname(path), specifier)
          if (relative(unit.dir, target).startsWith("..")) {
            offences.push({
              path: show(path),
              line,
              message: `imports ${specifier}, outside ${label}: import another package by its name`
            })
          }
        }
      }
    }
  }
  for (const paths of byBase.values()) {
    if (paths.length > 1) {
      for (const path of paths) {
        offences.push({
          path,
          message: `shares its base name with ${paths.filter((other) => other !== path).join(", ")}: name each file for what it holds`
        })
      }
    }
  }
  return offences
}

const main = () => {
  const args = process.argv.slice(2)
  if (args.includes("--layers")) {
    console.log(layerTable())
    return 0
  }
  const root = resolve(args.find((arg) => !arg.startsWith("--")) ?? join(dirname(fileURLToPath(import.meta.url)), "..", ".."))
  const offences = check(root)
  for (const { line, message, path } of offences) console.log(`${path}${line === undefined ? "" : `:${line}`}: ${message}`)
  if (offences.length > 0) {
    console.log(`lint: ${offences.length} offence${offences.length === 1 ? "" : "s"}`)
    return 1
  }
  console.log("lint: the rules hold (file length, layers, base names)")
  return 0
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main()
}
