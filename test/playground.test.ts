/**
 * The playground in a real browser: Chromium from the npm registry (test/browser.ts) opens
 * `/playground` of a server on loopback whose simulator takes a few seconds, the key is
 * pasted, a model picked, the form filled and submitted; the status moves to SUCCESS while
 * the page shows it, and the images load. The page asks nothing of any other host, keeps the
 * key out of every URL and out of the curl text. With canned answers in place of the
 * server's, it shows an estimate, `progress` events and a video. The form functions the page
 * runs are also checked in Node against every model the server lists.
 *
 * The screenshot docs/screenshots/playground.png (tracked, shown in the docs) is written only
 * when asked, so that a test run leaves the working tree as it was:
 *
 *     MEDIAGATE_SCREENSHOTS=1 npx vitest run test/playground.test.ts
 */
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Api } from "@mediagate/core"
import { Backends, Deployment } from "@mediagate/server"
import { EventStream, MediagateHttp, Playground, PlaygroundForm } from "@mediagate/http"
import { Effect, Layer, Redacted } from "effect"
import { mkdirSync, readFileSync, statSync } from "node:fs"
import { createServer } from "node:http"
import { dirname } from "node:path"
import * as PlaygroundScript from "../scripts/playground-script.js"
import { browser } from "./browser.js"

const screenshot = new URL("../docs/screenshots/playground.png", import.meta.url).pathname
/** Whether this run rewrites the screenshot (MEDIAGATE_SCREENSHOTS=1). */
const takeScreenshot = process.env["MEDIAGATE_SCREENSHOTS"] === "1"
const apiKey = "mg_playground_key_0123456789"

/** The form functions exactly as the page runs them. */
interface Field {
  readonly name: string
  readonly kind: "select" | "number" | "checkbox" | "text" | "textarea" | "urls" | "json"
  readonly required: boolean
  readonly default?: unknown
  readonly options?: ReadonlyArray<unknown>
  readonly min?: number
  readonly max?: number
}
interface Form {
  fieldsOf(schema: unknown, defaults?: unknown): ReadonlyArray<Field>
  inputOf(fields: ReadonlyArray<Field>, values: Record<string, unknown>): { input: Record<string, unknown>; errors: ReadonlyArray<string> }
  curlOf(origin: string, body: unknown): string
  priceText(priceUsd: string): string
  readEvents(buffer: string): { events: ReadonlyArray<{ event: string; data: string }>; rest: string }
}
const form = new Function(`${PlaygroundForm.formScript}\nreturn { ${PlaygroundForm.formExports.join(", ")} }`)() as Form

interface Model {
  readonly id: string
  readonly inputSchema: { readonly properties: Record<string, Record<string, unknown>>; readonly required?: ReadonlyArray<string> }
  readonly defaults: Record<string, unknown>
  readonly examples: ReadonlyArray<{ readonly input: Record<string, unknown> }>
}

/** The standalone composition on 127.0.0.1 only, at a free port, with the demo simulator (a few seconds a task). */
const loopbackServer = Layer.unwrapEffect(
  Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return MediagateHttp.serve.pipe(
      Layer.provide(Deployment.services({
        simulatorProfile: "demo",
        allowPrivateUrls: false,
        backends: Backends.memoryBackends({ publicUrl: `http://127.0.0.1:${port}` }, [
          { id: "acct_play", name: "play", apiKey: Redacted.make(apiKey), credits: 100_000_000 }
        ])
      }))
    )
  })
).pipe(Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" })))

const origin = Effect.gen(function*() {
  const server = yield* HttpServer.HttpServer
  return server.address._tag === "TcpAddress" ? `http://127.0.0.1:${server.address.port}` : expect.fail("the test server has no TCP address")
})

const models = (base: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${base}/api/v1/models`, { headers: { authorization: `Bearer ${apiKey}` } })
    return ((await response.json()) as { data: { models: ReadonlyArray<Model> } }).data.models
  })

describe("the playground's form", () => {
  it.live("every model of the catalog gets a control per field, none of them the JSON fallback", () =>
    Effect.gen(function*() {
      const listed = yield* models(yield* origin)
      expect(listed.length).toBeGreaterThan(30)
      for (const model of listed) {
        const fields = form.fieldsOf(model.inputSchema, model.defaults)
        expect(fields.map((field) => field.name).sort(), model.id).toEqual(Object.keys(model.inputSchema.properties).sort())
        expect(fields.filter((field) => field.kind === "json").map((field) => field.name), model.id).toEqual([])
        for (const name of model.inputSchema.required ?? []) expect(fields.find((field) => field.name === name)?.required, `${model.id} ${name}`).toBe(true)
        // The example, typed into the form, comes back as the same input less the defaults.
        // (as "Fill in the example" does: a checkbox the example leaves out keeps its default).
        const example = model.examples[0]!.input
        const values = Object.fromEntries([
          ...fields.filter((field) => field.kind === "checkbox").map((field) => [field.name, field.default === true]),
          ...Object.entries(example).map(([name, value]) => [name, typeof value === "number" ? String(value) : value])
        ])
        const { errors, input } = form.inputOf(fields, values)
        expect(errors, model.id).toEqual([])
        const defaults = Object.fromEntries(fields.filter((field) => field.default !== undefined).map((field) => [field.name, field.default]))
        expect(input, model.id).toEqual(Object.fromEntries(Object.entries(example).filter(([name, value]) => defaults[name] !== value)))
      }
    }).pipe(Effect.provide(loopbackServer)), 60_000)

  it("maps each JSON Schema shape to its control, and leaves empty optional fields out", () => {
    const fields = form.fieldsOf({
      type: "object",
      required: ["prompt"],
      properties: {
        prompt: { type: "string" },
        ratio: { type: "string", enum: ["1:1", "16:9"] },
        duration: { type: "number", enum: [5, 10] },
        n: { type: "integer", minimum: 1, maximum: 4 },
        fallback: { type: "boolean" },
        imageUrls: { type: "array", items: { type: "string", format: "uri" }, maxItems: 3 },
        style: { type: "object" }
      }
    }, { n: 1, fallback: true, ratio: "chosen by the upstream" })
    expect(fields.map((field) => [field.name, field.kind, field.default])).toEqual([
      ["prompt", "textarea", undefined],
      ["ratio", "select", undefined],
      ["duration", "select", undefined],
      ["n", "number", 1],
      ["fallback", "checkbox", true],
      ["imageUrls", "urls", undefined],
      ["style", "json", undefined]
    ])
    expect(form.inputOf(fields, { prompt: "a fox", ratio: "", duration: "10", n: "1", fallback: true, imageUrls: ["", " https://a.example/x.png "], style: "" }))
      .toEqual({ input: { prompt: "a fox", duration: 10, imageUrls: ["https://a.example/x.png"] }, errors: [] })
    expect(form.inputOf(fields, { prompt: "a fox", fallback: false, style: "{\"a\":1}", n: "3" }).input)
      .toEqual({ prompt: "a fox", n: 3, fallback: false, style: { a: 1 } })
    expect(form.inputOf(fields, { prompt: "x", style: "{" }).errors).toEqual(["style is not valid JSON"])
  })

  it("writes the curl with the key as the shell's variable, and reads events split across chunks", () => {
    const curl = form.curlOf("http://127.0.0.1:8080", { model: "m", input: { prompt: "it's" } })
    expect(curl).toBe(
      "curl -X POST http://127.0.0.1:8080/api/v1/task/submit \\\n" +
        "  -H \"Authorization: Bearer $MEDIAGATE_API_KEY\" \\\n" +
        "  -H 'Content-Type: application/json' \\\n" +
        "  -d '{\"model\":\"m\",\"input\":{\"prompt\":\"it'\\''s\"}}'"
    )
    const first = form.readEvents("event: task\ndata: {\"a\":1}\n\n: keep-alive\n\nevent: progress\ndata: {\"percent\"")
    expect(first.events).toEqual([{ event: "task", data: "{\"a\":1}" }])
    expect(form.readEvents(`${first.rest}:50}\n\n`).events).toEqual([{ event: "progress", data: "{\"percent\":50}" }])
  })

  it("shows the estimate's six-decimal priceUsd as people read money: at least the cents, no zeros beyond them", () => {
    expect(["0.040000", "0.042000", "1.500000", "0.400000", "12.000000", "0.000001", "0.123456"].map(form.priceText))
      .toEqual(["$0.04", "$0.042", "$1.50", "$0.40", "$12.00", "$0.000001", "$0.123456"])
  })
})

describe("the playground page", () => {
  it("is one document with nothing to load from anywhere, under a policy that allows this origin only", () => {
    expect(Playground.page).not.toMatch(/<(script|link|img|iframe)[^>]*\s(src|href)=/i)
    expect(Playground.page).not.toMatch(/@import|@font-face|url\(/)
    expect(Playground.contentSecurityPolicy).toContain("default-src 'none'")
    expect(Playground.contentSecurityPolicy).toContain("connect-src 'self'")
  })

  // With MEDIAGATE_SCREENSHOTS=1 it also saves the screenshot.
  it.live("picks a model, fills the form, submits, follows the task to SUCCESS and shows the images, from loopback alone", () =>
    Effect.gen(function*() {
      const base = yield* origin
      const { context, errors, page } = yield* browser
      const requested: Array<string> = []
      context.on("request", (request) => void requested.push(request.url()))
      const response = yield* Effect.promise(() => page.goto(`${base}/playground`, { waitUntil: "load" }))
      expect(response?.status()).toBe(200)
      expect(response?.headers()["content-security-policy"]).toBe(Playground.contentSecurityPolicy)

      yield* Effect.promise(() => page.fill("#key", apiKey))
      yield* Effect.promise(() => page.click("#use-key"))
      yield* Effect.promise(() => page.locator("#model option").first().waitFor({ state: "attached", timeout: 10_000 }))
      const ids = yield* Effect.promise(() => page.locator("#model option").evaluateAll((options) => options.map((option) => (option as HTMLOptionElement).value)))
      expect(ids.length).toBeGreaterThan(30)
      // Every model's form renders in the page with a control per field and no JSON fallback.
      for (const id of ids) {
        yield* Effect.promise(() => page.selectOption("#model", id))
        expect(yield* Effect.promise(() => page.locator("#fields [data-kind=json]").count()), id).toBe(0)
        expect(yield* Effect.promise(() => page.locator("#fields [data-kind]").count()), id).toBeGreaterThan(0)
      }

      yield* Effect.promise(() => page.selectOption("#model", "alpha-image-2/text-to-image"))
      expect(yield* Effect.promise(() => page.locator("label[for=f-prompt] .required").count())).toBe(1)
      yield* Effect.promise(() => page.fill("#f-prompt", "a lighthouse at dawn"))
      yield* Effect.promise(() => page.selectOption("#f-ratio", "16:9"))
      yield* Effect.promise(() => page.fill("#f-n", "2"))
      const curl = yield* Effect.promise(() => page.textContent("#curl"))
      expect(curl).toBe(form.curlOf(base, { model: "alpha-image-2/text-to-image", input: { prompt: "a lighthouse at dawn", ratio: "16:9", n: 2 } }))
      expect(curl).not.toContain(apiKey)

      // The server's estimate: $0.04 for people, the exact amount in the title.
      yield* Effect.promise(() => page.getByText("$0.04", { exact: true }).waitFor({ state: "visible", timeout: 10_000 }))
      expect(yield* Effect.promise(() => page.getAttribute("#price-value", "title"))).toBe("0.040000 USD, 40000 micro-USD")

      // Each status the page shows, in order.
      yield* Effect.promise(() =>
        page.evaluate(() => {
          const seen: Array<string> = []
          ;(window as unknown as { seen: Array<string> }).seen = seen
          const status = document.getElementById("status")!
          new MutationObserver(() => void seen.push(status.getAttribute("data-status") ?? "")).observe(status, { attributes: true })
        })
      )
      yield* Effect.promise(() => page.click("#submit"))
      yield* Effect.promise(() => page.locator("#status[data-status=SUCCESS]").waitFor({ timeout: 30_000 }))
      const seen = yield* Effect.promise(() => page.evaluate(() => (window as unknown as { seen: Array<string> }).seen))
      expect(seen[0]).toBe("SUBMITTING")
      expect(seen.at(-1)).toBe("SUCCESS")
      // The task was shown while it ran, before it ended.
      expect(seen.some((status) => ["PENDING", "SUBMITTED", "PROCESSING"].includes(status))).toBe(true)

      const images = page.locator("#results .grid img")
      yield* Effect.promise(() => images.nth(1).waitFor({ timeout: 10_000 }))
      yield* Effect.promise(() =>
        page.waitForFunction(() => [...document.querySelectorAll<HTMLImageElement>("#results img")].every((img) => img.complete && img.naturalWidth > 0), undefined, { timeout: 10_000 })
      )
      expect(yield* Effect.promise(() => images.count())).toBe(2)
      expect(yield* Effect.promise(() => page.locator("#results .files a").count())).toBe(2)
      // The price stays shown beside the result (and in the screenshot).
      expect(yield* Effect.promise(() => page.isVisible("#price"))).toBe(true)
      expect(yield* Effect.promise(() => page.textContent("#price-value"))).toBe("$0.04")

      yield* Effect.promise(() => page.waitForLoadState("networkidle", { timeout: 20_000 }).then(() => true, () => false))
      if (takeScreenshot) {
        mkdirSync(dirname(screenshot), { recursive: true })
        yield* Effect.promise(() => page.screenshot({ path: screenshot, fullPage: true }))
        expect(statSync(screenshot).size).toBeGreaterThan(10_000)
      }

      // The key: in this tab's sessionStorage, in no URL the page asked for.
      expect(yield* Effect.promise(() => page.evaluate(() => sessionStorage.getItem("mediagate.apiKey")))).toBe(apiKey)
      expect(page.url()).toBe(`${base}/playground`)
      expect(requested.filter((url) => url.includes(apiKey))).toEqual([])
      expect(requested).toContain(`${base}/api/v1/task/submit`)
      expect(requested.some((url) => /\/api\/v1\/task\/[^/]+\/events$/.test(url))).toBe(true)
      const elsewhere = requested.filter((url) => !url.startsWith(`${base}/`) && !/^(data|blob):/.test(url))
      expect(elsewhere).toEqual([])
      expect(errors).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(loopbackServer)), 120_000)

  it("embeds the bundle of playground/app.ts as it is now (run `npm run build:playground` after changing it)", async () => {
    expect(readFileSync(PlaygroundScript.target, "utf8")).toBe(await PlaygroundScript.render())
  }, 30_000)

  // The simulator fails a prompt with `[sim:fail]`: the page ends on FAILURE with the reason.
  it.live("shows a failed task's reason", () =>
    Effect.gen(function*() {
      const base = yield* origin
      const { errors, page } = yield* browser
      yield* Effect.promise(() => page.goto(`${base}/playground`, { waitUntil: "load" }))
      yield* Effect.promise(() => page.fill("#key", apiKey))
      yield* Effect.promise(() => page.click("#use-key"))
      yield* Effect.promise(() => page.locator("#model option").first().waitFor({ state: "attached", timeout: 10_000 }))
      yield* Effect.promise(() => page.selectOption("#model", "alpha-image-2/text-to-image"))
      yield* Effect.promise(() => page.fill("#f-prompt", "a lighthouse at dawn [sim:fail]"))
      yield* Effect.promise(() => page.click("#submit"))
      yield* Effect.promise(() => page.locator("#status[data-status=FAILURE]").waitFor({ timeout: 30_000 }))
      // The reason comes with the status, not after it.
      expect(yield* Effect.promise(() => page.textContent("#status"))).toBe("FAILURE: simulated upstream failure")
      expect(yield* Effect.promise(() => page.textContent("#results"))).toBe("")
      expect(errors).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(loopbackServer)), 60_000)

  // What the page does with an estimate that has adjustments, with `progress` events and with
  // a video, from canned answers (in the server's shapes) in place of the server's.
  it.live("shows the estimate's price and adjustments, progress events, and a video result", () =>
    Effect.gen(function*() {
      const base = yield* origin
      const { errors, page } = yield* browser
      const estimated: Array<unknown> = []
      yield* Effect.promise(() =>
        page.route(`${base}/api/v1/task/estimate`, (route) => {
          const asked = route.request().postDataJSON() as { model: string; input: Record<string, unknown> }
          estimated.push(asked)
          // The canned price only for the request as it will be submitted: an estimate asked
          // earlier (the first model, before the typing) is priced otherwise, so the page
          // showing $0.042 means it showed the last one's answer.
          const typed = asked.model === "beta-imagine/text-to-video" && asked.input["prompt"] === "waves at night"
          return route.fulfill({
            json: {
              code: 0,
              msg: "ok",
              data: typed
                ? {
                  model: "beta-imagine/text-to-video",
                  input: { model: "beta-imagine/text-to-video", prompt: "waves at night" },
                  adjustments: [{ field: "duration", requested: 7, applied: 6, reason: "rounded to a supported duration" }],
                  priceMicroUsd: 42_000,
                  priceUsd: "0.042000",
                  rejection: null
                }
                : { model: asked.model, input: { model: asked.model, ...asked.input }, adjustments: [], priceMicroUsd: 1_000, priceUsd: "0.001000", rejection: null }
            } satisfies typeof Api.EstimateResponse.Encoded
          })
        })
      )
      yield* Effect.promise(() => page.route(`${base}/api/v1/task/submit`, (route) => route.fulfill({ json: { code: 0, msg: "ok", data: { taskId: "t-video" } } })))
      const task = (status: string, result: unknown = null) => ({ taskId: "t-video", status, result, failure_reason: null })
      // The server's progress event, in the shape the server builds it (EventStream.progressData).
      const progressEvent: ReturnType<typeof EventStream.progressData> = {
        taskId: "t-video",
        status: "PROCESSING",
        progress: { stage: "running", queue_position: null, percent: 40, logs_tail: ["frame 12/30"], updated_at: "2026-01-01T00:00:00Z" }
      }
      const events = [
        `event: task\ndata: ${JSON.stringify(task("PROCESSING"))}\n\n`,
        `event: progress\ndata: ${JSON.stringify(progressEvent)}\n\n`,
        ": keep-alive\n\n",
        `event: task\ndata: ${JSON.stringify(task("SUCCESS", { type: "video", urls: [`${base}/media/clip.mp4`] }))}\n\n`
      ].join("")
      yield* Effect.promise(() =>
        page.route(`${base}/api/v1/task/t-video/events`, (route) => route.fulfill({ body: events, headers: { "content-type": "text/event-stream" } }))
      )
      yield* Effect.promise(() => page.route(`${base}/media/clip.mp4`, (route) => route.fulfill({ body: "", headers: { "content-type": "video/mp4" } })))

      yield* Effect.promise(() => page.goto(`${base}/playground`, { waitUntil: "load" }))
      yield* Effect.promise(() => page.fill("#key", apiKey))
      yield* Effect.promise(() => page.click("#use-key"))
      yield* Effect.promise(() => page.locator("#model option").first().waitFor({ state: "attached", timeout: 10_000 }))
      yield* Effect.promise(() => page.selectOption("#model", "beta-imagine/text-to-video"))
      yield* Effect.promise(() => page.fill("#f-prompt", "waves at night"))
      yield* Effect.promise(() => page.getByText("$0.042", { exact: true }).waitFor({ state: "visible", timeout: 10_000 }))
      expect(yield* Effect.promise(() => page.getAttribute("#price-value", "title"))).toBe("0.042000 USD, 42000 micro-USD")
      expect(yield* Effect.promise(() => page.textContent("#adjustments"))).toBe("duration: 7 \u2192 6 (rounded to a supported duration)")
      // Asked with the request as it would be submitted, after the typing stopped.
      expect(estimated.at(-1)).toEqual({ model: "beta-imagine/text-to-video", input: { prompt: "waves at night" } })
      expect(estimated.length).toBeLessThan(4)

      yield* Effect.promise(() =>
        page.evaluate(() => {
          const seen: Array<string> = []
          ;(window as unknown as { seen: Array<string> }).seen = seen
          const note = document.getElementById("progress-note")!
          // Each text the note was given, from the records (the events may all come in one chunk).
          new MutationObserver((records) => {
            for (const record of records) record.addedNodes.forEach((node) => void seen.push(node.textContent ?? ""))
          }).observe(note, { childList: true })
        })
      )
      yield* Effect.promise(() => page.click("#submit"))
      yield* Effect.promise(() => page.locator("#status[data-status=SUCCESS]").waitFor({ timeout: 10_000 }))
      const seen = yield* Effect.promise(() => page.evaluate(() => (window as unknown as { seen: Array<string> }).seen))
      expect(seen).toContain("running \u00b7 40%")
      expect(yield* Effect.promise(() => page.textContent("#logs"))).toBe("frame 12/30")
      expect(yield* Effect.promise(() => page.locator("#results video[controls]").getAttribute("src"))).toBe(`${base}/media/clip.mp4`)
      expect(yield* Effect.promise(() => page.locator("#results .files a").textContent())).toBe(`${base}/media/clip.mp4`)
      expect(errors).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(loopbackServer)), 60_000)

  // A server built without POST /api/v1/task/estimate answers 404 (or 405): no price box.
  it.live("hides the price box on a server without the estimate endpoint", () =>
    Effect.gen(function*() {
      const base = yield* origin
      const { errors, page } = yield* browser
      let asked = 0
      yield* Effect.promise(() =>
        page.route(`${base}/api/v1/task/estimate`, (route) => {
          asked++
          return route.fulfill({ status: 404, json: { code: 404, msg: "not found" } })
        })
      )
      yield* Effect.promise(() => page.goto(`${base}/playground`, { waitUntil: "load" }))
      yield* Effect.promise(() => page.fill("#key", apiKey))
      yield* Effect.promise(() => page.click("#use-key"))
      yield* Effect.promise(() => page.locator("#model option").first().waitFor({ state: "attached", timeout: 10_000 }))
      yield* Effect.promise(() => page.selectOption("#model", "alpha-image-2/text-to-image"))
      yield* Effect.promise(() => page.fill("#f-prompt", "a lighthouse at dawn"))
      yield* Effect.promise(() => page.waitForFunction(() => document.getElementById("curl")?.textContent?.includes("lighthouse")))
      yield* Effect.promise(() => page.waitForTimeout(800))
      expect(asked).toBeGreaterThan(0)
      expect(yield* Effect.promise(() => page.isHidden("#price"))).toBe(true)
      expect(errors).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(loopbackServer)), 60_000)
})
