/**
 * The docs page in a real browser: Chromium from the npm registry (test/browser.ts) opens
 * `/docs` of a server on loopback, the submit and query operations render, its
 * authentication field asks for the bearer key, and the page asks nothing of any other host,
 * so the reference works offline.
 *
 * The screenshot docs/screenshots/docs-page.png (tracked, shown in the docs) is written only
 * when asked, so that a test run leaves the working tree as it was:
 *
 *     MEDIAGATE_SCREENSHOTS=1 npx vitest run test/docs-page.test.ts
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Backends, Deployment } from "@mediagate/server"
import { MediagateHttp } from "@mediagate/http"
import { Effect, Layer } from "effect"
import { mkdirSync, statSync } from "node:fs"
import { createServer } from "node:http"
import { dirname } from "node:path"
import { browser } from "./browser.js"

const screenshot = new URL("../docs/screenshots/docs-page.png", import.meta.url).pathname
/** Whether this run rewrites the screenshot (MEDIAGATE_SCREENSHOTS=1). */
const takeScreenshot = process.env["MEDIAGATE_SCREENSHOTS"] === "1"

/** The standalone composition on 127.0.0.1 only, at a free port. */
const loopbackServer = Layer.unwrapEffect(
  Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return MediagateHttp.serve.pipe(
      Layer.provide(Deployment.services({
        simulatorProfile: "instant",
        allowPrivateUrls: false,
        backends: Backends.memoryBackends({ publicUrl: `http://127.0.0.1:${port}` }, [])
      }))
    )
  })
).pipe(Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" })))

describe("the docs page", () => {
  // With MEDIAGATE_SCREENSHOTS=1 it also saves the screenshot.
  it.live("renders the submit and query operations from this server alone, and asks for the bearer key", () =>
    Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      if (server.address._tag !== "TcpAddress") return expect.fail("the test server has no TCP address")
      const origin = `http://127.0.0.1:${server.address.port}`
      const { context, errors, page } = yield* browser
      const requested: Array<string> = []
      // Every request of every page, worker and service worker of the profile.
      context.on("request", (request) => void requested.push(request.url()))

      const response = yield* Effect.promise(() => page.goto(`${origin}/docs`, { waitUntil: "load" }))
      expect(response?.status()).toBe(200)
      // Scalar renders from the inlined bundle; its operations appear by summary and path.
      for (const text of ["Submit a task", "Query a task", "/api/v1/task/submit", "/api/v1/task/{taskId}"]) {
        yield* Effect.promise(() => page.getByText(text, { exact: false }).first().waitFor({ state: "visible", timeout: 60_000 }))
      }
      // Quiet for 500 ms by the browser's own account: any late font, script or telemetry call
      // has been made by then. A request elsewhere can hang on this closed network, so the
      // wait is bounded and the requests are judged first.
      const idle = yield* Effect.promise(() =>
        page.waitForLoadState("networkidle", { timeout: 20_000 }).then(() => true, () => false)
      )

      // Scalar's developer toolbar (Share, Generate SDKs: links to scalar.com) is hidden.
      expect(yield* Effect.promise(() => page.getByText("Developer Tools").count())).toBe(0)

      // The authentication box has the document's bearer scheme selected: a field for the
      // token (its label is Scalar's), not "No authentication selected".
      yield* Effect.promise(() => page.getByLabel("Bearer Token").first().waitFor({ state: "visible", timeout: 10_000 }))
      expect(yield* Effect.promise(() => page.getByText("No authentication selected").count())).toBe(0)

      if (takeScreenshot) {
        mkdirSync(dirname(screenshot), { recursive: true })
        yield* Effect.promise(() => page.screenshot({ path: screenshot }))
        expect(statSync(screenshot).size).toBeGreaterThan(10_000)
      }

      expect(requested).toContain(`${origin}/docs`)
      const elsewhere = requested.filter((url) => !url.startsWith(`${origin}/`) && !/^(data|blob):/.test(url))
      expect(elsewhere).toEqual([])
      expect(idle).toBe(true)
      expect(errors).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(loopbackServer)), 120_000)
})
