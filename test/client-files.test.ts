/**
 * The typed client's file inputs against a recording server on loopback (the files endpoint
 * and submit answered in the server's shapes): `upload` sends a file from a path (streamed
 * from disk) and from a Blob as the request body with the key, `submit` uploads the local
 * files of a model's media URL fields first and submits their URLs, an http(s) URL is sent as
 * it is, a missing file fails before any request, and a refusal comes back as MediagateError.
 * The same against the real server: test/client.test.ts.
 */
import { FetchHttpClient } from "@effect/platform"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { type Client, LocalFileError, Mediagate, MediagateClient, MediagateError, mediaFieldsOf } from "@mediagate/client"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { createServer, type IncomingMessage, type Server } from "node:http"

const key = "files-client-key-0123456789"
const png = new URL("../packages/media/test/fixtures/image-64x48.png", import.meta.url).pathname
const jpg = new URL("../packages/media/test/fixtures/image-64x48.jpg", import.meta.url).pathname

interface Received {
  readonly method: string
  readonly path: string
  readonly headers: IncomingMessage["headers"]
  readonly body: Buffer
}

let server: Server
let baseUrl: string
const received: Array<Received> = []
/** What the next upload answers instead of success, when set. */
let refusal: { readonly status: number; readonly msg: string } | undefined

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const body = Buffer.concat(chunks)
      received.push({ method: request.method ?? "", path: request.url ?? "", headers: request.headers, body })
      const answer = (status: number, value: unknown) => {
        response.writeHead(status, { "content-type": "application/json" })
        response.end(JSON.stringify(value))
      }
      if (request.url === "/api/v1/files" && refusal !== undefined) return answer(refusal.status, { code: refusal.status, msg: refusal.msg })
      if (request.url === "/api/v1/files") {
        const n = received.filter((seen) => seen.path === "/api/v1/files").length
        return answer(200, {
          code: 0,
          msg: "ok",
          data: {
            fileId: `file_${String(n).padStart(24, "0")}`,
            url: `https://files.example/media/up-${n}`,
            contentType: "image/png",
            bytes: body.length,
            width: 64,
            height: 48,
            durationSeconds: null,
            expiresAt: "2030-01-01T00:00:00.000Z"
          }
        })
      }
      if (request.url === "/api/v1/task/submit") return answer(200, { code: 0, msg: "ok", data: { taskId: "task-1" } })
      answer(404, { code: 404, msg: "not found" })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  baseUrl = `http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`
})

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve))
})

const withClient = <A, E>(use: (client: Client) => Effect.Effect<A, E>) =>
  Effect.flatMap(MediagateClient.make({ baseUrl, apiKey: key }), use).pipe(Effect.provide(FetchHttpClient.layer))

/** What arrived since `from`. */
const since = (from: number) => received.slice(from)

describe("the client's file inputs", () => {
  it("knows each model's media URL fields from the catalog", () => {
    expect(mediaFieldsOf("alpha-image-2/image-to-image")).toEqual(["imageUrls"])
    expect(mediaFieldsOf("alpha-image-2/text-to-image")).toEqual([])
    expect(mediaFieldsOf("motion-2.0")).toEqual(["mediaUrls", "imageUrls"])
    expect(mediaFieldsOf("no-such-model")).toEqual([])
  })

  it.live("upload(path) sends the file's bytes as the body, with the key and its length", () =>
    withClient((client) =>
      Effect.gen(function*() {
        const from = received.length
        const upload = yield* client.upload(png)
        const [request] = since(from)
        expect(request).toMatchObject({ method: "POST", path: "/api/v1/files" })
        expect(request!.headers["authorization"]).toBe(`Bearer ${key}`)
        expect(request!.headers["content-length"]).toBe(String(readFileSync(png).length))
        expect(request!.body.equals(readFileSync(png))).toBe(true)
        expect(upload).toMatchObject({ url: expect.stringMatching(/^https:\/\/files\.example\/media\/up-\d+$/), bytes: readFileSync(png).length, width: 64 })
      })))

  it.live("upload(blob) sends the Blob with its type", () =>
    withClient((client) =>
      Effect.gen(function*() {
        const from = received.length
        const bytes = readFileSync(jpg)
        yield* client.upload(new Blob([bytes], { type: "image/jpeg" }))
        const [request] = since(from)
        expect(request!.headers["content-type"]).toBe("image/jpeg")
        expect(request!.body.equals(bytes)).toBe(true)
      })))

  it.live("submit uploads a local path and a Blob in imageUrls first and submits their URLs; an https URL is sent as it is", () =>
    withClient((client) =>
      Effect.gen(function*() {
        const from = received.length
        const taskId = yield* client.submit("beta-imagine/image-to-video", {
          prompt: "bring it to life",
          imageUrls: [png, "https://example.com/kept.png", new Blob([readFileSync(jpg)])]
        })
        expect(taskId).toBe("task-1")
        const requests = since(from)
        expect(requests.map((request) => request.path)).toEqual(["/api/v1/files", "/api/v1/files", "/api/v1/task/submit"])
        expect(requests[0]!.body.equals(readFileSync(png))).toBe(true)
        expect(requests[1]!.body.equals(readFileSync(jpg))).toBe(true)
        // A Blob without a type is sent as octet-stream: the server decides by the bytes.
        expect(requests[1]!.headers["content-type"]).toBe("application/octet-stream")
        const urls = (JSON.parse(requests[2]!.body.toString()) as { input: { imageUrls: Array<string> } }).input.imageUrls
        expect(urls).toEqual([
          expect.stringMatching(/^https:\/\/files\.example\/media\/up-\d+$/),
          "https://example.com/kept.png",
          expect.stringMatching(/^https:\/\/files\.example\/media\/up-\d+$/)
        ])
        expect(new Set(urls).size).toBe(3)
      })))

  it.live("an input with URLs only is submitted with no upload", () =>
    withClient((client) =>
      Effect.gen(function*() {
        const from = received.length
        yield* client.submit("alpha-image-2/image-to-image", { prompt: "autumn", imageUrls: ["https://example.com/a.png"] })
        expect(since(from).map((request) => request.path)).toEqual(["/api/v1/task/submit"])
      })))

  it.live("a path that is no file fails with LocalFileError before any request", () =>
    withClient((client) =>
      Effect.gen(function*() {
        const from = received.length
        const error = yield* Effect.flip(client.submit("alpha-image-2/image-to-image", { prompt: "autumn", imageUrls: ["./no-such-cat.png"] }))
        expect(error).toBeInstanceOf(LocalFileError)
        expect(error.message).toBe("cannot read ./no-such-cat.png: no such file")
        const directory = yield* Effect.flip(client.upload(new URL(".", import.meta.url).pathname))
        expect(directory.message).toContain("not a file")
        expect(since(from)).toEqual([])
      })))

  it.live("a refused upload is a MediagateError with the server's status and msg, and nothing is submitted", () =>
    withClient((client) =>
      Effect.gen(function*() {
        refusal = { status: 415, msg: "unsupported media type: text/plain; images and videos only" }
        const from = received.length
        const error = yield* Effect.flip(client.submit("alpha-image-2/image-to-image", { prompt: "autumn", imageUrls: [png] })).pipe(
          Effect.ensuring(Effect.sync(() => (refusal = undefined)))
        )
        expect(error).toBeInstanceOf(MediagateError)
        expect(error).toMatchObject({ status: 415, code: 415, msg: "unsupported media type: text/plain; images and videos only" })
        expect(since(from).map((request) => request.path)).toEqual(["/api/v1/files"])
      })))

  it("the promise facade uploads a path and submits with its URL", async () => {
    const facade = new Mediagate({ baseUrl, apiKey: key })
    const from = received.length
    const upload = await facade.upload(png)
    expect(upload.url).toMatch(/^https:\/\/files\.example\//)
    await facade.submit("dream-4", { prompt: "a koi pond", imageUrls: [png] })
    expect(since(from).map((request) => request.path)).toEqual(["/api/v1/files", "/api/v1/files", "/api/v1/task/submit"])
  })
})
