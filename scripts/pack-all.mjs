// `npm run pack:all`: builds the packages (`npm run build`), packs each into a tarball under
// `.pack/` (or `--dest <dir>`), and prints the one `npm install` line that installs what an
// embedding host needs, with the peers at the ranges the packages declare. Run that line in
// your own project. `--json` prints the same as JSON (test/pack.test.ts reads it);
// `--no-build` packs what `dist/` holds.
import { execFileSync } from "node:child_process"
import { mkdirSync, readFileSync, rmSync } from "node:fs"
import { join, resolve } from "node:path"

const root = resolve(new URL("..", import.meta.url).pathname)
const args = process.argv.slice(2)
const option = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined)
const dest = resolve(option("--dest") ?? join(root, ".pack"))
const json = args.includes("--json")

/** What an embedding host installs: the standard composition, its parts, and the typed client. */
const embedding = [
  "@mediagate/server",
  "@mediagate/core",
  "@mediagate/http",
  "@mediagate/media",
  "@mediagate/scheduler",
  "@mediagate/store-memory",
  "@mediagate/upstream",
  "@mediagate/client"
]

/** The packages the build emits: the references of tsconfig.build.json. */
const dirs = JSON.parse(readFileSync(join(root, "tsconfig.build.json"), "utf8")).references.map((reference) =>
  reference.path.replace(/\/tsconfig\.build\.json$/, "")
)
const manifests = dirs.map((dir) => ({ dir, ...JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8")) }))

const log = (line) => {
  if (!json) console.log(line)
}

if (!args.includes("--no-build")) {
  log("building (npm run build) ...")
  execFileSync("npm", ["run", "build", "--silent"], { cwd: root, stdio: ["ignore", json ? "ignore" : "inherit", "inherit"] })
}

rmSync(dest, { recursive: true, force: true })
mkdirSync(dest, { recursive: true })
const packed = JSON.parse(
  execFileSync("npm", ["pack", "--json", "--pack-destination", dest, ...dirs.map((dir) => `./${dir}`)], {
    cwd: root,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
    stdio: ["ignore", "pipe", "inherit"]
  })
)
const tarballs = Object.fromEntries(packed.map((entry) => [entry.name, { file: join(dest, entry.filename), files: entry.files.map((file) => file.path) }]))

/** The peers the embedding packages declare, required ones only, at their declared ranges. */
const peers = {}
for (const manifest of manifests.filter((m) => embedding.includes(m.name))) {
  for (const [name, range] of Object.entries(manifest.peerDependencies ?? {})) {
    if (name.startsWith("@mediagate/") || manifest.peerDependenciesMeta?.[name]?.optional === true) continue
    peers[name] = range
  }
}

const quote = (word) => (/^[\w@./:-]+$/.test(word) ? word : `'${word}'`)
const install = (names, extraPeers = {}) =>
  ["npm", "install", ...names.map((name) => tarballs[name].file), ...Object.entries(extraPeers).map(([name, range]) => `${name}@${range}`)]
    .map(quote)
    .join(" ")

const peersOf = (name) => {
  const manifest = manifests.find((m) => m.name === name)
  return Object.fromEntries(Object.entries(manifest.peerDependencies ?? {}).filter(([peer]) => !peer.startsWith("@mediagate/") && peers[peer] === undefined))
}
/**
 * The typed client alone, for a program that calls a mediagate server without embedding it:
 * its tarball needs @mediagate/core's too (a dependency, and not on the npm registry).
 */
const clientAlone = ["@mediagate/client", "@mediagate/core"]
const clientPeers = Object.fromEntries(
  manifests
    .filter((m) => clientAlone.includes(m.name))
    .flatMap((m) => Object.entries(m.peerDependencies ?? {}).filter(([peer]) => !peer.startsWith("@mediagate/")))
)

const extras = {
  "@mediagate/store-sql":
    "SQLite or PostgreSQL backends (`@mediagate/server/sql`; better-sqlite3 compiles in its install script, which npm 11 runs once allowed: `npm pkg set allowScripts.better-sqlite3=true --json`)",
  "@mediagate/cli": "the `mediagate` command line"
}

if (json) {
  console.log(
    JSON.stringify({ dest, tarballs, embedding, peers, install: install(embedding, peers), clientAlone: install(clientAlone, clientPeers) }, null, 2)
  )
} else {
  console.log(`\n${packed.length} tarballs in ${dest}\n\nIn your project, install what embedding needs (Node 20, 22 or 24):\n\n  ${install(embedding, peers)}\n`)
  for (const [name, what] of Object.entries(extras)) {
    if (tarballs[name] !== undefined) console.log(`For ${what}, also:\n\n  ${install([name], peersOf(name))}\n`)
  }
  console.log(
    `For the typed client alone, in a program that calls a mediagate server without embedding it (the client's tarball needs core's):\n\n  ${install(clientAlone, clientPeers)}\n`
  )
  console.log("The README's Express example also needs Express itself: add 'express@^5' to the first line.\n")
}
