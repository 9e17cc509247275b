/**
 * The playground's file inputs in Chromium (test/browser.ts): a real PNG dropped on an
 * image-to-image model's URL row is sent to `POST /api/v1/files` as the body with the key in
 * the header (a canned answer in the server's shape), and the answer's URL fills the row.
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

/** The standalone composition on 127.0.0.1 only, at a free port, with the instant simulator. */
const loopbackServer = Layer.unwrapEffect(
  Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return MediagateHttp.serve.pipe(
      Layer.provide(Deployment.services({
        simulatorProfile: "instant",
        allowPrivateUrls: false,
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
})
