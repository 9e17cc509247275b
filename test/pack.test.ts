/**
 * The packages as a user installs them: `npm run pack:all` builds and packs them, and its
 * install line is checked; the tarballs are installed with npm into a scratch project
 * outside the workspace, and used from plain node (no TypeScript loader, no workspace links):
 * - `test/pack/embed.mjs`, a plain `node:http` host, serves the API, submits a task with a
 *   callBackUrl and exits 0 once the signed callback verifies;
 * - `test/pack/{hosts,exercise,main}.ts`, Express 5, Fastify 5 and Hono hosts, are typechecked
 *   with `skipLibCheck: false` (our declarations must not name packages a memory-only host
 *   lacks), compiled, and run: through each, submit, events, query, file, signed callback.
 *
 * Third-party packages are pinned to the versions of the workspace's package-lock.json (the
 * scratch project gets a lockfile cut from it), so npm takes them from its cache, the one
 * the workspace was installed from, and installs the same versions every run. Install
 * scripts are skipped: nothing the memory backends use needs one (sharp ships prebuilt).
 */
import { execFile, spawn } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { basename, join } from "node:path"
import { promisify } from "node:util"
import { rm } from "node:fs/promises"
import { afterAll, describe, expect, it } from "vitest"
import { closedPort } from "./ports.js"

const run = promisify(execFile)
const root = new URL("..", import.meta.url).pathname
const scratch = mkdtempSync(join(tmpdir(), "mediagate-pack-"))
// The scratch install holds several hundred packages: removing it took over vitest's 30 s hook
// limit on a loaded machine, so the removal has a limit of its own.
afterAll(() => rm(scratch, { recursive: true, force: true }), 300_000)

/** Runs a command; its standard output on success, or an error carrying all its output. */
const sh = async (command: string, args: ReadonlyArray<string>, cwd: string, timeout = 300_000) => {
  try {
    const { stdout } = await run(command, args, { cwd, timeout, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, NO_COLOR: "1" } })
    return stdout
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; message: string }
    throw new Error(`${command} ${args.join(" ")} failed in ${cwd}: ${failed.message}\n${failed.stdout ?? ""}${failed.stderr ?? ""}`)
  }
}

interface Manifest {
  readonly name: string
  readonly version: string
  readonly dependencies?: Record<string, string>
  readonly optionalDependencies?: Record<string, string>
  readonly peerDependencies?: Record<string, string>
  readonly peerDependenciesMeta?: Record<string, { readonly optional?: boolean }>
}

interface LockEntry extends Partial<Manifest> {
  readonly link?: boolean
  readonly optional?: boolean
}

/** The packages the build emits: the references of tsconfig.build.json. */
const built = (JSON.parse(readFileSync(join(root, "tsconfig.build.json"), "utf8")) as { references: Array<{ path: string }> })
  .references.map((reference) => reference.path.replace(/\/tsconfig\.build\.json$/, ""))

const manifest = (dir: string): Manifest => JSON.parse(readFileSync(join(root, dir, "package.json"), "utf8"))

/** What a package needs installed beside it: its dependencies and its required peers. */
const needs = (entry: Partial<Manifest>) => [
  ...Object.keys(entry.dependencies ?? {}),
  ...Object.keys(entry.optionalDependencies ?? {}),
  ...Object.keys(entry.peerDependencies ?? {}).filter((name) => entry.peerDependenciesMeta?.[name]?.optional !== true)
]

/**
 * The entries of the workspace's lockfile that `names`, needed by the package at `from`,
 * pull in, resolved the way node resolves them (nearest node_modules first), closed over
 * their own dependencies. Optional dependencies the lockfile lacks (other platforms') are
 * left out; a required one missing is an error.
 */
const lockClosure = (lock: Record<string, LockEntry>, start: ReadonlyArray<{ readonly from: string; readonly name: string }>) => {
  const found = new Map<string, LockEntry>()
  const resolve = (from: string, name: string) => {
    for (let base = from; ; base = base.includes("/node_modules/") ? base.slice(0, base.lastIndexOf("/node_modules/")) : "") {
      const location = `${base === "" ? "" : `${base}/`}node_modules/${name}`
      if (lock[location] !== undefined) return location
      if (base === "") return undefined
    }
  }
  const queue = [...start]
  while (queue.length > 0) {
    const { from, name } = queue.shift()!
    const location = resolve(from, name)
    if (location === undefined) {
      const parent = from === "" ? undefined : lock[from]
      if (parent?.optionalDependencies?.[name] !== undefined || parent?.peerDependenciesMeta?.[name]?.optional === true) continue
      throw new Error(`package-lock.json has no ${name} for ${from || "the workspace"}`)
    }
    if (found.has(location) || lock[location]!.link === true) continue
    found.set(location, lock[location]!)
    for (const dependency of needs(lock[location]!)) queue.push({ from: location, name: dependency })
  }
  return found
}

/** The lockfile entry of one of our tarballs. */
const lockEntryOf = ({ dependencies, peerDependencies, peerDependenciesMeta, version }: Manifest, resolved: string) => ({
  version,
  resolved,
  license: "MIT",
  ...(dependencies === undefined ? {} : { dependencies }),
  ...(peerDependencies === undefined ? {} : { peerDependencies }),
  ...(peerDependenciesMeta === undefined ? {} : { peerDependenciesMeta })
})

/** What `npm run pack:all -- --json` prints. */
interface PackAll {
  readonly dest: string
  readonly tarballs: Record<string, { readonly file: string; readonly files: ReadonlyArray<string> }>
  readonly embedding: ReadonlyArray<string>
  readonly peers: Record<string, string>
  readonly install: string
  readonly clientAlone: string
}

/** Runs a file of the scratch project with plain node and nothing but PATH. */
const runNode = (args: ReadonlyArray<string>, cwd: string, timeout: number) =>
  new Promise<{ code: number | null; output: string }>((done) => {
    execFile(process.execPath, args, { cwd, timeout, env: { PATH: process.env["PATH"] ?? "" } }, (error, stdout, stderr) =>
      done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, output: stdout + stderr })
    )
  })

/**
 * Starts the README's `server.mjs` with plain node on `port`; resolves once it says it
 * listens, or with undefined if the port was taken (it exits with EADDRINUSE).
 */
const startReadmeServer = async (app: string, port: number) => {
  const child = spawn(process.execPath, ["server.mjs"], { cwd: app, env: { PATH: process.env["PATH"] ?? "", PORT: String(port) } })
  let output = ""
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()))
  for (let waited = 0; !output.includes(`listening on http://localhost:${port}`); waited += 100) {
    if (child.exitCode !== null && output.includes("EADDRINUSE")) return undefined
    if (waited > 60_000 || child.exitCode !== null) {
      child.kill("SIGKILL")
      throw new Error(`server.mjs did not start: ${output}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return { child, port, output: () => output }
}

/**
 * Starts the README's `server.mjs` and does what the README does next with curl: submit,
 * query with `?wait=30` until SUCCESS, then downloads the file. As written there it builds
 * its URLs from PORT before it listens, so it is told a port: one the system handed out and
 * closed again, and another should something take it in between.
 */
const readmeServer = async (app: string) => {
  let started: Awaited<ReturnType<typeof startReadmeServer>>
  for (let tries = 0; started === undefined; tries++) {
    if (tries === 3) throw new Error("server.mjs found its port taken three times")
    started = await startReadmeServer(app, await closedPort())
  }
  const { child, output, port } = started
  try {
    const base = `http://localhost:${port}`
    const auth = { authorization: "Bearer demo-key" }
    expect(await (await fetch(`${base}/hello`)).json()).toEqual({ hello: "from the host" })
    const submitted = await fetch(`${base}/api/v1/task/submit`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse" } })
    })
    const { data } = await submitted.json() as { data: { taskId: string } }
    let task: { status: string; result: { urls: Array<string> } | null } = { status: "PENDING", result: null }
    for (let round = 0; round < 4 && task.status !== "SUCCESS"; round++) {
      task = (await (await fetch(`${base}/api/v1/task/${data.taskId}?wait=30`, { headers: auth })).json() as { data: typeof task }).data
    }
    expect(task.status, output()).toBe("SUCCESS")
    const file = await fetch(task.result!.urls[0]!)
    expect([file.status, file.headers.get("content-type")]).toEqual([200, "image/png"])
  } finally {
    child.kill("SIGKILL")
  }
}

/** Host frameworks and types the scratch project installs beside our tarballs, at the workspace's versions. */
const hostPackages = ["express", "fastify", "hono", "@hono/node-server", "@types/express", "@types/node"]

describe("the packages as a user installs them", () => {
  it("pack:all, install outside the workspace, then plain node: node:http, Express 5, Fastify 5 and Hono hosts", { timeout: 900_000 }, async () => {
    const tarballs = join(scratch, "tarballs")
    const pack = JSON.parse(await sh(process.execPath, ["scripts/pack-all.mjs", "--json", "--dest", tarballs], root)) as PackAll
    expect(Object.keys(pack.tarballs).sort()).toEqual(built.map((dir) => manifest(dir).name).sort())
    for (const [name, { files }] of Object.entries(pack.tarballs)) {
      expect(files, name).toEqual(expect.arrayContaining(["LICENSE", "package.json", "dist/index.js", "dist/index.d.ts"]))
      expect(files.filter((file) => file.startsWith("test/") || file.endsWith(".tsbuildinfo")), name).toEqual([])
    }
    // The one install line: the eight tarballs an embedding needs and the peers at working ranges.
    for (const name of pack.embedding) expect(pack.install).toContain(pack.tarballs[name]!.file)
    expect(pack.peers).toEqual({ effect: "^3.22.0", "@effect/platform": "^0.97.0", "@effect/platform-node": "^0.108.0" })
    expect(pack.install).toMatch(/^npm install /)
    // The client alone needs core's tarball (a dependency that is not on the npm registry).
    expect(pack.clientAlone.split(" ").slice(2).sort()).toEqual(
      [pack.tarballs["@mediagate/client"]!.file, pack.tarballs["@mediagate/core"]!.file, "'effect@^3.22.0'", "'@effect/platform@^0.97.0'"].sort()
    )

    // The scratch project: our tarballs, and the peers and frameworks a host installs itself, at the workspace's versions.
    const app = join(scratch, "app")
    mkdirSync(app)
    const lock = (JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as { packages: Record<string, LockEntry> }).packages
    // A memory-only host: no @mediagate/store-sql and none of its drivers.
    const ours = new Map(built.filter((dir) => manifest(dir).name !== "@mediagate/store-sql").map((dir) => [manifest(dir).name, { dir, manifest: manifest(dir), tarball: `../tarballs/${basename(pack.tarballs[manifest(dir).name]!.file)}` }]))
    const peers = ["effect", "@effect/platform", "@effect/platform-node", ...hostPackages]
    const dependencies: Record<string, string> = Object.fromEntries([
      ...[...ours].map(([name, { tarball }]) => [name, `file:${tarball}`]),
      ...peers.map((name) => [name, lock[`node_modules/${name}`]!.version!])
    ])
    const third = lockClosure(lock, [
      ...peers.map((name) => ({ from: "", name })),
      ...[...ours.values()].flatMap(({ dir, manifest }) => needs(manifest).filter((name) => !ours.has(name)).map((name) => ({ from: dir, name })))
    ])
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "mediagate-pack-app", private: true, type: "module", dependencies }, null, 2))
    writeFileSync(
      join(app, "package-lock.json"),
      JSON.stringify({
        name: "mediagate-pack-app",
        lockfileVersion: 3,
        requires: true,
        packages: {
          "": { name: "mediagate-pack-app", dependencies },
          ...Object.fromEntries([...ours].map(([name, { manifest, tarball }]) => [`node_modules/${name}`, lockEntryOf(manifest, `file:${tarball}`)])),
          ...Object.fromEntries(
            [...third].map(([location, entry]) => [location.replace(/^packages\/([^/]+)\//, "node_modules/@mediagate/$1/"), entry])
          )
        }
      }, null, 2)
    )
    await sh("npm", ["install", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], app)

    expect(existsSync(join(app, "node_modules/@mediagate/store-sql"))).toBe(false)

    // A plain node:http host, outside the workspace: only what npm installed is there.
    copyFileSync(join(root, "test/pack/embed.mjs"), join(app, "embed.mjs"))
    const embedded = await runNode(["embed.mjs"], app, 120_000)
    expect(embedded.code, embedded.output).toBe(0)
    const taskId = /^submitted (\S+)$/m.exec(embedded.output)?.[1]
    expect(taskId, embedded.output).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/)
    expect(embedded.output).toContain(`callback verified: ${taskId} SUCCESS`)

    // The README's server.mjs, as written there, on a free port: submit, wait, download.
    const readme = readFileSync(join(root, "README.md"), "utf8")
    const serverMjs = /```js\n(\/\/ server\.mjs\n[\s\S]*?)```/.exec(readme)?.[1]
    expect(serverMjs, "README.md has a ```js block starting with // server.mjs").toBeDefined()
    writeFileSync(join(app, "server.mjs"), serverMjs!)
    await readmeServer(app)

    // Express 5, Fastify 5 and Hono hosts in TypeScript: typechecked against the installed
    // declarations with skipLibCheck false, compiled, and run with plain node.
    mkdirSync(join(app, "src"))
    for (const file of ["hosts.ts", "exercise.ts", "main.ts"]) copyFileSync(join(root, "test/pack", file), join(app, "src", file))
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          skipLibCheck: false,
          types: ["node"],
          rootDir: "src",
          outDir: "dist"
        },
        include: ["src"]
      }, null, 2)
    )
    await sh(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"], app)
    const hosts = await runNode(["dist/main.js"], app, 180_000)
    expect(hosts.code, hosts.output).toBe(0)
    for (const name of ["express", "fastify", "hono"]) {
      expect(hosts.output).toMatch(new RegExp(`^${name}: task \\S+ events \\S*SUCCESS file image/png \\d+ bytes, callback verified: \\S+ SUCCESS$`, "m"))
    }

    // The installed command line runs its built JavaScript with plain node (no tsx here).
    const cli = await runNode([join(app, "node_modules/@mediagate/cli/bin/mediagate.mjs"), "--version"], app, 60_000)
    expect(cli.code, cli.output).toBe(0)
    expect(cli.output).toContain("0.1.0")
    expect(existsSync(join(app, "node_modules/tsx"))).toBe(false)
  })
})
