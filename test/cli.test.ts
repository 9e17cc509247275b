/**
 * The `mediagate` command line against the standalone server as a child process on
 * loopback (memory database, instant simulator), run with node and tsx as its bin does:
 * `run --out` downloads real PNG files, `run --image` uploads a real PNG first,
 * `--json` prints one parseable task, `models` lists
 * the catalog, and failures (a bad model, a wrong or missing key, a mistyped option) are one
 * line on stderr and a non-zero exit; `--help` piped is plain text.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { nodeArgs } from "./programs.js"
import { closedPort } from "./ports.js"
import { killAll, type Server, startServer, stop } from "./standalone-process.js"

const root = new URL("..", import.meta.url).pathname
const key = "cli-test-key-0123456789"
let server: Server
let baseUrl: string
let dir: string

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "mediagate-cli-"))
  server = await startServer({
    MEDIAGATE_API_KEY: key,
    MEDIAGATE_DATABASE_URL: "memory",
    MEDIAGATE_SIMULATOR_PROFILE: "instant"
  })
  baseUrl = server.url
}, 60_000)

afterAll(async () => {
  if (server !== undefined) await stop(server, "SIGTERM")
  killAll()
  rmSync(dir, { recursive: true, force: true })
})

/** Runs the CLI with `args`; `env` replaces the MEDIAGATE_* variables (URL and key by default). */
const mediagate = (
  args: ReadonlyArray<string>,
  env: Record<string, string> = { MEDIAGATE_URL: baseUrl, MEDIAGATE_API_KEY: key },
  entry = nodeArgs("cli"),
  cwd = root
) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [...entry, ...args], {
      cwd,
      env: { PATH: process.env["PATH"] ?? "", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

/** An image-to-image model whose imageUrls take this loopback server's http URLs. */
const imageModel = "dream-4"

const pngSignature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

describe("mediagate CLI", () => {
  it("run --out downloads the result PNGs; status changes go to stderr", { timeout: 60_000 }, async () => {
    const out = join(dir, "out")
    const result = await mediagate(["run", "alpha-image-2/text-to-image", "--prompt", "a lighthouse at dawn", "--input", `{"n":2,"ratio":"16:9"}`, "--out", out])
    expect(result.stderr).toMatch(/ SUCCESS\n/)
    expect(result.code).toBe(0)
    const files = readdirSync(out).sort()
    expect(files).toHaveLength(2)
    const taskId = files[0]!.replace(/-1\.png$/, "")
    expect(files).toEqual([`${taskId}-1.png`, `${taskId}-2.png`])
    for (const file of files) expect(readFileSync(join(out, file)).subarray(0, 8)).toEqual(pngSignature)
    // stdout: the task line, then the files saved.
    expect(result.stdout.split("\n")).toEqual([
      expect.stringMatching(new RegExp(`^${taskId}  SUCCESS  alpha-image-2/text-to-image  `)),
      join(out, files[0]!),
      join(out, files[1]!),
      ""
    ])
  })

  it("run alpha-image-2/image-to-image --image ./cat.png uploads the file first and the task succeeds with its http URL", { timeout: 60_000 }, async () => {
    // The command, from the folder the file is in, against a server on plain http:
    // the model takes https image URLs only, yet the server's own upload URL is its to judge.
    const png = join(root, "packages/media/test/fixtures/image-64x48.png")
    copyFileSync(png, join(dir, "cat.png"))
    const model = "alpha-image-2/image-to-image"
    const result = await mediagate(["run", model, "--prompt", "autumn leaves", "--image", "./cat.png", "--json"], undefined, undefined, dir)
    expect(result.stderr).toMatch(/ SUCCESS\n/)
    expect(result.code).toBe(0)
    const task = JSON.parse(result.stdout)
    expect(task).toMatchObject({ status: "SUCCESS", input: { model, imageUrls: [expect.stringMatching(new RegExp(`^${baseUrl}/media/`))] } })
    expect(baseUrl).toMatch(/^http:/)
    const served = Buffer.from(await (await fetch(task.input.imageUrls[0])).arrayBuffer())
    expect(served.equals(readFileSync(png))).toBe(true)
    // Any other http URL is still held to the model's rule.
    const other = await mediagate(["run", model, "--prompt", "autumn", "--input", `{"imageUrls":["http://example.com/cat.png"]}`])
    expect(other).toMatchObject({ code: 1, stderr: expect.stringContaining("must be an absolute https URL") })
  })

  it("run --image: a file that cannot be read, or a model without image inputs, exits 1 with one line", { timeout: 60_000 }, async () => {
    const png = join(root, "packages/media/test/fixtures/image-64x48.png")
    const missing = await mediagate(["run", imageModel, "--prompt", "autumn", "--image", "./no-such-cat.png"])
    expect(missing).toMatchObject({ code: 1, stderr: "mediagate: cannot read ./no-such-cat.png: no such file\n" })
    const textOnly = await mediagate(["run", "alpha-image-2/text-to-image", "--prompt", "a kite", "--image", png])
    expect(textOnly).toMatchObject({
      code: 1,
      stderr: "mediagate: --image: alpha-image-2/text-to-image takes no image or video inputs (mediagate models lists the models)\n"
    })
  })

  it("--json prints the ended task only; --no-wait prints the id; get and cancel", { timeout: 120_000 }, async () => {
    const result = await mediagate(["run", "dream-4", "--prompt", "a koi pond", "--json"])
    expect(result.code).toBe(0)
    const task = JSON.parse(result.stdout)
    expect(task).toMatchObject({ status: "SUCCESS", input: { model: "dream-4", prompt: "a koi pond" }, result: { type: "image" } })

    const submitted = await mediagate(["run", "dream-4", "--prompt", "never ends [sim:timeout]", "--no-wait"])
    expect(submitted.code).toBe(0)
    const taskId = submitted.stdout.trim()
    expect(taskId).toMatch(/^[0-9a-f-]{36}$/)
    const shown = await mediagate(["get", taskId, "--json"])
    expect(JSON.parse(shown.stdout).taskId).toBe(taskId)
    const cancelled = await mediagate(["cancel", taskId])
    expect(cancelled).toMatchObject({ code: 0, stdout: expect.stringContaining(`${taskId}  CANCELLED`) })
    expect(await mediagate(["cancel", taskId])).toMatchObject({ code: 1, stderr: "mediagate: task is already CANCELLED\n" })
    const cancelledOnly = await mediagate(["list", "--status", "CANCELLED", "--model", "dream-4", "--json"])
    expect(JSON.parse(cancelledOnly.stdout).tasks.map((t: { taskId: string; status: string }) => [t.taskId, t.status])).toEqual([[taskId, "CANCELLED"]])
  })

  it("estimate prints the price and the adjustments, creates nothing; --json prints the estimate; a refused body exits 1", { timeout: 60_000 }, async () => {
    const before = JSON.parse((await mediagate(["list", "--limit", "100", "--json"])).stdout).tasks.length
    const text = await mediagate(["estimate", "clip3", "--prompt", "a paper boat", "--input", `{"duration":4}`])
    expect(text).toMatchObject({ code: 0, stderr: "" })
    const lines = text.stdout.split("\n")
    expect(lines[0]).toMatch(/^clip3  \d+\.\d{6} USD \(\d+ micro-USD\)$/)
    expect(lines.slice(1)).toEqual(["duration: 4 -> 8 (t2v on the quality tier supports only 8 seconds)", ""])

    const json = await mediagate(["estimate", "alpha-image-2/text-to-image", "--prompt", "a kite", "--input", `{"n":2,"resolution":"2k"}`, "--json"])
    expect(json.code).toBe(0)
    expect(JSON.parse(json.stdout)).toEqual({
      model: "alpha-image-2/text-to-image",
      input: { model: "alpha-image-2/text-to-image", prompt: "a kite", n: 2, resolution: "2k" },
      adjustments: [],
      priceMicroUsd: 80_000,
      priceUsd: "0.080000",
      rejection: null
    })
    expect(JSON.parse((await mediagate(["list", "--limit", "100", "--json"])).stdout).tasks.length).toBe(before)

    const refused = await mediagate(["estimate", "clip3", "--prompt", "a paper boat", "--input", `{"duration":5}`])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/^mediagate: input\.duration .*\n$/)
  })

  it("a task that fails exits 1 saying why", { timeout: 60_000 }, async () => {
    const result = await mediagate(["run", "dream-4", "--prompt", "a koi pond [sim:fail]"])
    expect(result.code).toBe(1)
    expect(result.stderr).toMatch(/mediagate: task [0-9a-f-]{36} ended FAILURE: simulated upstream failure\n$/)
  })

  it("models lists the 37 models of the catalog", { timeout: 60_000 }, async () => {
    const text = await mediagate(["models"])
    expect(text.code).toBe(0)
    const lines = text.stdout.trim().split("\n")
    expect(lines).toHaveLength(37)
    expect(lines[0]).toMatch(/^alpha-image-2\/text-to-image +image +text-to-image$/)
    const json = await mediagate(["models", "--json", "--url", baseUrl, "--key", key], {})
    expect(JSON.parse(json.stdout).map((model: { id: string }) => model.id)).toHaveLength(37)
  })

  it("failures are one line and a non-zero exit: a bad model, a wrong key, no key, no server", { timeout: 120_000 }, async () => {
    const badModel = await mediagate(["run", "alpha-image-2", "--prompt", "a kite"])
    expect(badModel.code).toBe(1)
    expect(badModel.stderr).toBe("mediagate: model 'alpha-image-2' is not supported; did you mean alpha-image-2/text-to-image or alpha-image-2/image-to-image? GET /api/v1/models lists every model\n")

    const wrongKey = await mediagate(["models", "--key", "not-the-key"])
    expect(wrongKey).toMatchObject({ code: 1, stderr: "mediagate: unauthorized (check --key or MEDIAGATE_API_KEY)\n" })

    const noKey = await mediagate(["models"], { MEDIAGATE_URL: baseUrl })
    expect(noKey).toMatchObject({ code: 1, stderr: "mediagate: no API key: pass --key <key> or set MEDIAGATE_API_KEY\n" })

    const closed = await closedPort()
    const noServer = await mediagate(["get", "x", "--url", `http://127.0.0.1:${closed}`, "--key", key], {})
    expect(noServer.code).toBe(1)
    expect(noServer.stderr).toBe(`mediagate: cannot reach http://127.0.0.1:${closed}/api/v1/task/x: connect ECONNREFUSED 127.0.0.1:${closed}\n`)

    const badInput = await mediagate(["run", "dream-4", "--input", "{nope"])
    expect(badInput.code).toBe(1)
    expect(badInput.stderr + badInput.stdout).toContain("--input is not valid JSON")
  })

  it("--help on each command, through the bin as npm links it: plain text when piped, no built-ins, the key by its variable", { timeout: 60_000 }, async () => {
    const bin = [join(root, "packages/cli/bin/mediagate.mjs")]
    const top = await mediagate(["--help"], {}, bin)
    expect(top.code).toBe(0)
    for (const command of ["run", "estimate", "models", "get", "cancel", "list"]) expect(top.stdout).toMatch(new RegExp(`^  ${command} +\\S`, "m"))
    // The key in the environment is never shown, only the variable's name.
    const run = await mediagate(["run", "--help"], { MEDIAGATE_API_KEY: key }, bin)
    expect(run.code).toBe(0)
    for (const option of ["--prompt <text>", "--image <path|url...>", "--input <json>", "--out <dir>", "--json", "--no-wait", "--timeout <duration>", "--url <url>"]) {
      expect(run.stdout).toContain(`  ${option} `)
    }
    expect(run.stdout).toMatch(/^ {2}--key <key> +The API key \(default: \$MEDIAGATE_API_KEY\)$/m)
    for (const help of [top, run]) {
      expect(help.stderr).toBe("")
      expect(help.stdout).not.toContain("\x1b")
      for (const noise of ["--wizard", "--completions", "--log-level", "redacted", key]) expect(help.stdout).not.toContain(noise)
    }
  })

  it("a mistyped option or command is one line naming what was meant, exit 1", { timeout: 60_000 }, async () => {
    expect(await mediagate(["run", "dream-4", "--inptu", "{}"])).toEqual({ code: 1, stdout: "", stderr: "mediagate: unknown option --inptu for run; did you mean --input?\n" })
    expect(await mediagate(["submit", "--inptu", "{}"])).toEqual({
      code: 1,
      stdout: "",
      stderr: "mediagate: unknown command submit; the commands are run, estimate, models, get, cancel, list (mediagate --help)\n"
    })
    expect(await mediagate(["models", "--limit", "3"])).toEqual({
      code: 1,
      stdout: "",
      stderr: "mediagate: unknown option --limit for models (mediagate models --help lists its options)\n"
    })
  })
})
