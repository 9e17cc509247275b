/**
 * The packages as a user installs them: built (`npm run build`), packed with `npm pack`,
 * installed with npm into a scratch project outside the workspace, and used from plain
 * node (no TypeScript loader, no workspace links): `test/pack/embed.mjs` serves the API,
 * submits a task with a callBackUrl and exits 0 once the signed callback verifies.
 *
 * Third-party packages are pinned to the versions of the workspace's package-lock.json (the
 * scratch project gets a lockfile cut from it), so npm takes them from its cache, the one
 * the workspace was installed from, and installs the same versions every run. Install
 * scripts are skipped: nothing the memory backends use needs one (sharp ships prebuilt).
 */
import { execFile } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { afterAll, describe, expect, it } from "vitest"

const run = promisify(execFile)
const root = new URL("..", import.meta.url).pathname
const scratch = mkdtempSync(join(tmpdir(), "mediagate-pack-"))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

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

describe("the packages as a user installs them", () => {
  it("build, pack, install outside the workspace and embed with plain node: the signed callback arrives", { timeout: 600_000 }, async () => {
    await sh("npm", ["run", "build"], root)

    // Pack every built package; each tarball carries its JavaScript, declarations and LICENSE.
    const tarballs = join(scratch, "tarballs")
    mkdirSync(tarballs)
    const packed = JSON.parse(
      await sh("npm", ["pack", "--json", "--pack-destination", tarballs, ...built.map((dir) => `./${dir}`)], root)
    ) as Array<{ readonly name: string; readonly filename: string; readonly files: Array<{ readonly path: string }> }>
    expect(packed.map((entry) => entry.name).sort()).toEqual(built.map((dir) => manifest(dir).name).sort())
    for (const entry of packed) {
      const files = entry.files.map((file) => file.path)
      expect(files, entry.name).toEqual(expect.arrayContaining(["LICENSE", "package.json", "dist/index.js", "dist/index.d.ts"]))
      expect(files.filter((file) => file.startsWith("test/") || file.endsWith(".tsbuildinfo")), entry.name).toEqual([])
    }

    // The scratch project: our tarballs, and the peers a host installs itself, at the workspace's versions.
    const app = join(scratch, "app")
    mkdirSync(app)
    const lock = (JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as { packages: Record<string, LockEntry> }).packages
    const ours = new Map(built.map((dir) => [manifest(dir).name, { dir, manifest: manifest(dir), tarball: packed.find((entry) => entry.name === manifest(dir).name)!.filename }]))
    const peers = ["effect", "@effect/platform", "@effect/platform-node"]
    const dependencies: Record<string, string> = Object.fromEntries([
      ...[...ours].map(([name, { tarball }]) => [name, `file:../tarballs/${tarball}`]),
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
          ...Object.fromEntries([...ours].map(([name, { manifest, tarball }]) => [`node_modules/${name}`, lockEntryOf(manifest, `file:../tarballs/${tarball}`)])),
          ...Object.fromEntries(
            [...third].map(([location, entry]) => [location.replace(/^packages\/([^/]+)\//, "node_modules/@mediagate/$1/"), entry])
          )
        }
      }, null, 2)
    )
    await sh("npm", ["install", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], app)

    // Plain node, outside the workspace: only what npm installed is there.
    copyFileSync(join(root, "test/pack/embed.mjs"), join(app, "embed.mjs"))
    const { code, output } = await new Promise<{ code: number | null; output: string }>((done) => {
      execFile(process.execPath, ["embed.mjs"], { cwd: app, timeout: 120_000, env: { PATH: process.env["PATH"] ?? "" } }, (error, stdout, stderr) =>
        done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, output: stdout + stderr })
      )
    })
    expect(code, output).toBe(0)
    const taskId = /^submitted (\S+)$/m.exec(output)?.[1]
    expect(taskId, output).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/)
    expect(output).toContain(`callback verified: ${taskId} SUCCESS`)

    // The installed command line runs its built JavaScript with plain node (no tsx here).
    const cli = await new Promise<{ code: number | null; output: string }>((done) => {
      execFile(process.execPath, [join(app, "node_modules/@mediagate/cli/bin/mediagate.mjs"), "--help"], { cwd: app, timeout: 60_000, env: { PATH: process.env["PATH"] ?? "" } }, (error, stdout, stderr) =>
        done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, output: stdout + stderr })
      )
    })
    expect(cli.code, cli.output).toBe(0)
    expect(cli.output).toContain("mediagate 0.1.0")
    expect(existsSync(join(app, "node_modules/tsx"))).toBe(false)
  })
})
