/**
 * The standalone server's media rules from outside: motion materials that break each of the
 * spec's rules in turn (typed from their bytes, served without telling extensions), an
 * alpha-image-2 image-to-image WebP input fetched over HTTPS and transcoded, a result URL
 * served with ranges. Real files (the media package's fixtures) on loopback servers, the
 * server a child process with private addresses allowed (they are loopback here).
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import * as Http from "node:http"
import * as Https from "node:https"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { awaitTerminal, killAll, startServer } from "./standalone-process.js"
import { clientAt } from "./support.js"

const fixtures = join(import.meta.dirname, "../packages/media/test/fixtures")
const dir = mkdtempSync(join(tmpdir(), "mediagate-media-rules-"))
const key = "mg_media_rules_key_0123456789"

/** Materials by number, without extensions, so their types come from their bytes. */
const blobs = ["image-64x48.png", "video-3s.mp4", "audio-4s.mp3", "video-2s.mov", "image-64x48.webp"]
const gets: Array<string> = []
const handler = (request: Http.IncomingMessage, response: Http.ServerResponse) => {
  gets.push(request.url ?? "")
  const match = /^\/blob\/(\d+)$/.exec(request.url ?? "")
  const name = match === null ? undefined : blobs[Number(match[1])]
  if (request.url === "/broken-webp") return response.writeHead(200).end(Buffer.from("RIFF\u0010\u0000\u0000\u0000WEBPVP8 broken", "latin1"))
  if (name === undefined) return response.writeHead(404).end()
  response.writeHead(200, { "content-type": "text/plain" }).end(readFileSync(join(fixtures, name)))
}

let files: Http.Server
let secure: Https.Server
let port = 0
let filesBase = ""
let secureBase = ""

beforeAll(async () => {
  // A certificate for localhost, trusted by the server process (NODE_EXTRA_CA_CERTS) only.
  execFileSync("openssl", [
    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
    "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")
  ], { stdio: "ignore" })
  files = Http.createServer(handler)
  secure = Https.createServer({ key: readFileSync(join(dir, "key.pem")), cert: readFileSync(join(dir, "cert.pem")) }, handler)
  await new Promise<void>((done) => files.listen(0, "127.0.0.1", done))
  await new Promise<void>((done) => secure.listen(0, "127.0.0.1", done))
  filesBase = `http://127.0.0.1:${(files.address() as AddressInfo).port}`
  secureBase = `https://localhost:${(secure.address() as AddressInfo).port}`
  port = (await startServer({
    MEDIAGATE_API_KEY: key,
    MEDIAGATE_DATABASE_URL: "memory",
    MEDIAGATE_SIMULATOR_PROFILE: "instant",
    MEDIAGATE_ALLOW_PRIVATE_URLS: "true",
    NODE_EXTRA_CA_CERTS: join(dir, "cert.pem")
  })).port
}, 60_000)

afterAll(() => {
  killAll()
  files?.close()
  secure?.close()
  rmSync(dir, { recursive: true, force: true })
})

const submit = async (model: string, input: Record<string, unknown>) => {
  const answer = await clientAt(port, key).submit({ model, input: { prompt: "the scene comes alive", ...input } })
  expect(answer.status).toBe(200)
  return answer.body.data.taskId as string
}

const ended = async (taskId: string) => (await awaitTerminal(port, key, [taskId], 30_000)).get(taskId)!

describe("the standalone server's media rules", () => {
  it("motion materials breaking each rule in turn fail with INVALID_PARAMETERS naming the rule; within them the task succeeds", async () => {
    const blob = (index: number) => `${filesBase}/blob/${index}`
    const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, RegExp]> = [
      ["motion-2.0", Array(10).fill(blob(0)), /at most 9 images \(it has 10\)/],
      ["motion-2.0", [blob(0), ...Array(6).fill(blob(1))], /the video materials last 18 s in all; at most 15 s/],
      ["motion-2.0-fast", Array(4).fill(blob(2)), /the audio materials last 16(\.\d)? s in all; at most 15 s/],
      ["motion-2.0", [blob(0), `${filesBase}/missing`], /mediaUrls\[1\]: .*HTTP 404/],
      ["motion-1.5-pro", [blob(0), blob(3)], /motion-1\.5-pro accepts images only/]
    ]
    const taskIds = await Promise.all(cases.map(([model, mediaUrls]) => submit(model, { mediaUrls, duration: 5 })))
    for (const [index, taskId] of taskIds.entries()) {
      const task = await ended(taskId)
      expect(task).toMatchObject({ status: "FAILURE", failure_reason: "INVALID_PARAMETERS", result: null })
      expect(task["error"]).toMatch(cases[index]![2])
    }
    const fine = await ended(await submit("motion-2.0", { mediaUrls: [blob(0), blob(1), blob(3), blob(2)], duration: 5 }))
    expect(fine.status).toBe("SUCCESS")
  }, 60_000)

  it("alpha-image-2 image-to-image: a WebP input is fetched and transcoded; an unreadable one fails the task, saying why", async () => {
    gets.length = 0
    const done = await ended(await submit("alpha-image-2/image-to-image", { imageUrls: [`${secureBase}/blob/4`] }))
    expect(done.status).toBe("SUCCESS")
    expect(gets).toContain("/blob/4")
    const broken = await ended(await submit("alpha-image-2/image-to-image", { imageUrls: [`${secureBase}/broken-webp`] }))
    expect(broken).toMatchObject({ status: "FAILURE", failure_reason: "INVALID_PARAMETERS" })
    expect(broken["error"]).toMatch(/^input\.imageUrls\[0\]: /)
    const missing = await ended(await submit("alpha-image-2/image-to-image", { imageUrls: [`${secureBase}/nothing.webp`] }))
    expect(missing["error"]).toMatch(/^input\.imageUrls\[0\]: .*HTTP 404/)
  }, 60_000)

  it("every result URL of alpha-image-2 and beta-imagine downloads from our media route, whole and by range", async () => {
    const requests: ReadonlyArray<readonly [string, Record<string, unknown>, string]> = [
      ["alpha-image-2/text-to-image", { n: 2 }, "image/png"],
      ["alpha-image-2/image-to-image", { imageUrls: [`${secureBase}/blob/4`] }, "image/png"],
      ["beta-imagine/text-to-image-lite", { n: 2 }, "image/png"],
      ["beta-imagine/text-to-image-standard", {}, "image/png"],
      ["beta-imagine/text-to-image-pro", {}, "image/png"],
      ["beta-imagine/text-to-video", { duration: 6 }, "video/mp4"],
      ["beta-imagine/image-to-video", { duration: 6, imageUrls: [`${filesBase}/blob/0`] }, "video/mp4"]
    ]
    const tasks = await Promise.all(requests.map(async ([model, input]) => ended(await submit(model, input))))
    for (const [index, task] of tasks.entries()) {
      const [model, input, contentType] = requests[index]!
      expect(task.status, model).toBe("SUCCESS")
      const urls = task["result"].urls as ReadonlyArray<string>
      expect(urls.length).toBe((input["n"] as number | undefined) ?? 1)
      for (const url of urls) {
        expect(url.startsWith(`http://127.0.0.1:${port}/media/`), url).toBe(true)
        const whole = await fetch(url)
        expect(whole.status).toBe(200)
        expect(whole.headers.get("content-type")).toBe(contentType)
        expect(whole.headers.get("accept-ranges")).toBe("bytes")
        const bytes = Buffer.from(await whole.arrayBuffer())
        expect(Number(whole.headers.get("content-length"))).toBe(bytes.length)
        const part = await fetch(url, { headers: { range: "bytes=0-99" } })
        expect(part.status).toBe(206)
        expect(part.headers.get("content-range")).toBe(`bytes 0-99/${bytes.length}`)
        expect(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(0, 100))).toBe(true)
        const tail = await fetch(url, { headers: { range: "bytes=-10" } })
        expect(Buffer.from(await tail.arrayBuffer()).equals(bytes.subarray(bytes.length - 10))).toBe(true)
      }
    }
  }, 60_000)
})
