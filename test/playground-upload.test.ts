/**
 * The playground's file inputs in Chromium (test/browser.ts), against the standalone
 * composition on loopback with its media rules: a real PNG dropped on an image-to-image
 * model's URL row is uploaded (`POST /api/v1/files`, the file as the body, the key in the
 * header), its URL fills the row, the task succeeds with it, and the server serves the file
 * byte for byte; a file chosen with the picker does the same; a text file is refused under
 * the row in the server's 415 words. With a canned answer, what the page sends is checked.
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Backends, Deployment } from "@mediagate/server"
import { MediagateHttp } from "@mediagate/http"
import type { FilesApi } from "@mediagate/core"
import type { Page } from "playwright-core"
import { Effect, Layer, Redacted } from "effect"
import { readFileSync } from "node:fs"
import { createServer } from "node:http"
import { browser } from "./browser.js"

const apiKey = "mg_playground_upload_key_0123456789"
const png = new URL("../packages/media/test/fixtures/image-64x48.png", import.meta.url).pathname
/** An image-to-image model whose imageUrls take this loopback server's http URLs. */
const imageModel = "dream-4"

/** The standalone composition on 127.0.0.1 only, at a free port, with the instant simulator and its media rules. */
const loopbackServer = Layer.unwrapEffect(
  Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return MediagateHttp.serve.pipe(
      Layer.provide(Deployment.services({
        simulatorProfile: "instant",
        allowPrivateUrls: false,
        // Media URLs under this base are this server's files (its uploads), read from its store.
        mediaRules: { mediaBaseUrl: `http://127.0.0.1:${port}/media` },
        backends: Backends.memoryBackends({ publicUrl: `http://127.0.0.1:${port}` }, [
          { id: "acct_upload", name: "upload", apiKey: Redacted.make(apiKey), credits: 100_000_000 }
        ])
      }))
    )
  })
).pipe(Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" })))

const origin = Effect.gen(function*() {
  const server = yield* HttpServer.HttpServer
  return server.address._tag === "TcpAddress" ? `http://127.0.0.1:${server.address.port}` : expect.fail("the test server has no TCP address")
})

/** Opens the playground at `base`, pastes the key and picks the image-to-image model. */
const openForm = (base: string, page: Page) =>
  Effect.promise(async () => {
    await page.goto(`${base}/playground`, { waitUntil: "load" })
    await page.fill("#key", apiKey)
    await page.click("#use-key")
    await page.locator("#model option").first().waitFor({ state: "attached", timeout: 10_000 })
    await page.selectOption("#model", imageModel)
  })

/** Drops `bytes` as a File named `name` on the first URL row of imageUrls, as a person's drop does. */
const drop = (page: Page, bytes: Buffer, name: string, type: string) =>
  Effect.promise(async () => {
    const dataTransfer = await page.evaluateHandle((given) => {
      const transfer = new DataTransfer()
      transfer.items.add(new File([new Uint8Array(given.bytes)], given.name, { type: given.type }))
      return transfer
    }, { bytes: [...bytes], name, type })
    await page.dispatchEvent("#f-imageUrls .url-row", "dragover", { dataTransfer })
    await page.dispatchEvent("#f-imageUrls .url-row", "drop", { dataTransfer })
  })

describe("the playground's file inputs", () => {
  // What the page sends and does with the answer, from a canned answer in the server's shape.
  it.live("a dropped file is sent as the body with the key, and the answer's url fills the row and the curl", () =>
    Effect.gen(function*() {
      const base = yield* origin
      const { errors, page } = yield* browser
      const sent: Array<{ body: Buffer | null; headers: Record<string, string> }> = []
      const url = "https://files.example/media/cat.png"
      yield* Effect.promise(() =>
        page.route(`${base}/api/v1/files`, (route) => {
          sent.push({ body: route.request().postDataBuffer(), headers: route.request().headers() })
          return route.fulfill({
            json: {
              code: 0,
              msg: "ok",
              data: { fileId: `file_${"0".repeat(24)}`, url, contentType: "image/png", bytes: 1, width: 64, height: 48, durationSeconds: null, expiresAt: "2030-01-01T00:00:00.000Z" }
            } satisfies typeof FilesApi.UploadResponse.Encoded
          })
        })
      )
      yield* openForm(base, page)
      yield* drop(page, readFileSync(png), "cat.png", "image/png")
      yield* Effect.promise(() => page.getByText("Uploaded cat.png.").waitFor({ timeout: 10_000 }))
      expect(sent).toHaveLength(1)
      expect(sent[0]!.body?.equals(readFileSync(png))).toBe(true)
      expect(sent[0]!.headers).toMatchObject({ authorization: `Bearer ${apiKey}`, "content-type": "image/png" })
      expect(yield* Effect.promise(() => page.inputValue("#f-imageUrls input[type=url]"))).toBe(url)
      expect(yield* Effect.promise(() => page.textContent("#curl"))).toContain(JSON.stringify([url]))
      expect(errors).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(loopbackServer)), 60_000)

  it.live("a PNG dropped on an image-to-image model's URL row is uploaded, fills the URL, and the task succeeds with it", () =>
    Effect.gen(function*() {
      const base = yield* origin
      const { context, errors, page } = yield* browser
      const requested: Array<{ url: string; method: string; authorization: string | undefined }> = []
      context.on("request", (request) => void requested.push({ url: request.url(), method: request.method(), authorization: request.headers()["authorization"] }))
      yield* openForm(base, page)
      yield* Effect.promise(() => page.fill("#f-prompt", "autumn leaves"))

      yield* drop(page, readFileSync(png), "cat.png", "image/png")
      yield* Effect.promise(() => page.getByText("Uploaded cat.png.").waitFor({ timeout: 10_000 }))
      const url = yield* Effect.promise(() => page.inputValue("#f-imageUrls input[type=url]"))
      expect(url).toMatch(new RegExp(`^${base}/media/`))
      const served = yield* Effect.promise(() => fetch(url).then(async (response) => Buffer.from(await response.arrayBuffer())))
      expect(served.equals(readFileSync(png))).toBe(true)
      // The curl shows the upload's URL in the input.
      expect(yield* Effect.promise(() => page.textContent("#curl"))).toContain(url)

      yield* Effect.promise(() => page.click("#submit"))
      yield* Effect.promise(() => page.locator("#status[data-status=SUCCESS]").waitFor({ timeout: 30_000 }))
      const taskId = yield* Effect.promise(() => page.textContent("#task-id"))
      const task = (yield* Effect.promise(() =>
        fetch(`${base}/api/v1/task/${taskId}`, { headers: { authorization: `Bearer ${apiKey}` } }).then((response) => response.json())
      )) as { data: { status: string; input: { imageUrls: ReadonlyArray<string> } } }
      expect(task.data).toMatchObject({ status: "SUCCESS", input: { imageUrls: [url] } })

      const uploads = requested.filter((request) => request.url === `${base}/api/v1/files`)
      expect(uploads).toEqual([{ url: `${base}/api/v1/files`, method: "POST", authorization: `Bearer ${apiKey}` }])
      expect(requested.filter((request) => request.url.includes(apiKey))).toEqual([])
      expect(errors).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(loopbackServer)), 90_000)

  it.live("a file chosen with the picker fills the URL; a text file is refused under the row in the server's words", () =>
    Effect.gen(function*() {
      const base = yield* origin
      const { errors, page } = yield* browser
      yield* openForm(base, page)

      const picker = page.locator("#f-imageUrls .url-row input[type=file]").first()
      const refused = page.waitForResponse(`${base}/api/v1/files`)
      yield* Effect.promise(() => picker.setInputFiles({ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("not a picture\n") }))
      const answer = yield* Effect.promise(() => refused)
      expect(answer.status()).toBe(415)
      const { msg } = (yield* Effect.promise(() => answer.json())) as { msg: string }
      const note = page.locator("#f-imageUrls .file-note.error")
      yield* Effect.promise(() => note.waitFor({ timeout: 10_000 }))
      expect(yield* Effect.promise(() => note.textContent())).toBe(`notes.txt: ${msg}`)
      expect(yield* Effect.promise(() => page.inputValue("#f-imageUrls input[type=url]"))).toBe("")

      yield* Effect.promise(() => picker.setInputFiles(png))
      yield* Effect.promise(() => page.getByText("Uploaded image-64x48.png.").waitFor({ timeout: 10_000 }))
      expect(yield* Effect.promise(() => page.inputValue("#f-imageUrls input[type=url]"))).toMatch(new RegExp(`^${base}/media/`))
      expect(errors).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(loopbackServer)), 60_000)
})
