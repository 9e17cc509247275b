/**
 * The HTTP edge (issue 8): the echo keeps the task's model, the moderation answer comes
 * from the verdict, protocol details (chunked 413, case of task ids, 405 with Allow),
 * list parameters, unknown-model hints and the failed task's `error` field.
 */
import type { HttpMethod } from "@effect/platform"
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Ids, ModelCatalog, Moderation, TaskServiceAlone } from "@mediagate/core"
import { MediagateHttp } from "@mediagate/http"
import { MemoryAccounts, MemoryLedger, MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import { Effect, Layer, Redacted, TestClock } from "effect"
import * as Http from "node:http"
import { apiKey, client, memoryAdmin, testServer } from "./support.js"

const api = client()

/** A raw node:http request to the test server, so the body can go out chunked. */
const rawRequest = (options: { readonly method: string; readonly path: string; readonly chunks: ReadonlyArray<string> }) =>
  Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "TcpAddress" ? server.address.port : 0
    return yield* Effect.async<{ status: number; body: string }, Error>((resume) => {
      const request = Http.request({
        host: "127.0.0.1",
        port,
        method: options.method,
        path: options.path,
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", "transfer-encoding": "chunked" }
      }, (response) => {
        let body = ""
        response.setEncoding("utf8")
        response.on("data", (chunk: string) => (body += chunk))
        response.on("end", () => resume(Effect.succeed({ status: response.statusCode ?? 0, body })))
      })
      request.on("error", (error) => resume(Effect.fail(error)))
      const writeAll = (index: number): void => {
        if (index >= options.chunks.length) return void request.end()
        // Stop writing once the server has answered: it need not read the rest.
        if (request.destroyed) return
        request.write(options.chunks[index], () => writeAll(index + 1))
      }
      writeAll(0)
    })
  })

describe("the HTTP edge", () => {
  it.layer(testServer())((it) => {
    it.effect("item 1: input.model is refused; the echo's model is always the top-level model", () =>
      Effect.gen(function*() {
        for (const model of ["canvas-4.0", "canvas-video-3.0", "motion-2.0", "alpha-image-2/text-to-image"]) {
          const refused = yield* api.submit({ model, input: { prompt: "a fox", model: "alpha-image-2/text-to-image" } })
          expect([refused.status, refused.body]).toEqual([400, {
            code: 400,
            msg: "input.model is not a supported field; the model is the top-level model field"
          }])
        }
        const accepted = yield* api.submit({ model: "canvas-4.0", input: { prompt: "a fox", style: "ink" } })
        const task = yield* api.query(accepted.body.data.taskId)
        expect(task.body.data.input).toEqual({ model: "canvas-4.0", prompt: "a fox", style: "ink" })
      }))

    it.effect("item 9: a chunked body over 1 MiB answers 413 in the envelope", () =>
      Effect.gen(function*() {
        const chunk = "x".repeat(64 * 1024)
        const chunks = [`{"model":"alpha-image-2/text-to-image","input":{"prompt":"`, ...Array.from({ length: 20 }, () => chunk), `"}}`]
        const answer = yield* rawRequest({ method: "POST", path: "/api/v1/task/submit", chunks })
        expect(answer.status).toBe(413)
        expect(JSON.parse(answer.body)).toEqual({ code: 413, msg: "request body must be at most 1048576 bytes" })
        // A chunked body under the limit is read as usual.
        const small = yield* rawRequest({
          method: "POST",
          path: "/api/v1/task/submit",
          chunks: [`{"model":"alpha-image-2/text-to-image",`, `"input":{"prompt":"small"}}`]
        })
        expect(small.status).toBe(200)
      }))

    it.effect("item 9: a task id in upper case names the same task", () =>
      Effect.gen(function*() {
        const created = yield* api.submit({ model: "alpha-image-2/text-to-image", input: { prompt: "case" } })
        const taskId = created.body.data.taskId as string
        const upper = yield* api.query(taskId.toUpperCase())
        expect(upper.status).toBe(200)
        expect(upper.body.data.taskId).toBe(taskId)
      }))

    it.effect("item 9: a wrong method on a known path is 405 with Allow, in the envelope; 401 first without a key", () =>
      Effect.gen(function*() {
        const taskPath = "/api/v1/task/0190c8a4-0000-7000-8000-000000000000"
        const cases: ReadonlyArray<readonly [HttpMethod.HttpMethod, string, string]> = [
          ["GET", "/api/v1/task/submit", "POST"],
          ["PUT", "/api/v1/task/submit", "POST"],
          ["PUT", taskPath, "GET"],
          ["DELETE", taskPath, "GET"],
          ["POST", taskPath, "GET"],
          ["GET", `${taskPath}/cancel`, "POST"],
          ["POST", "/api/v1/tasks", "GET"],
          ["DELETE", "/api/v1/models", "GET"],
          ["POST", "/api/v1/openapi.json", "GET"]
        ]
        for (const [method, path, allow] of cases) {
          const answer = yield* api.call(method, path)
          expect([method, path, answer.status, answer.body]).toEqual([
            method,
            path,
            405,
            { code: 405, msg: `method ${method} is not allowed here; use ${allow}` }
          ])
          expect(answer.headers["allow"]).toBe(allow)
          const noKey = yield* api.call(method, path, { key: null })
          expect([noKey.status, noKey.body]).toEqual([401, { code: 401, msg: "unauthorized" }])
        }
      }))

    it.effect("item 10: a malformed cursor is 400; an upper-case one is accepted", () =>
      Effect.gen(function*() {
        for (const cursor of ["zzz", "0190c8a4-0000-7000-8000", ""]) {
          const answer = yield* api.call("GET", `/api/v1/tasks?cursor=${cursor}`)
          expect([answer.status, answer.body]).toEqual([400, { code: 400, msg: "cursor must be a next_cursor from a previous page" }])
        }
        const ok = yield* api.call("GET", "/api/v1/tasks?cursor=0190C8A4-0000-7000-8000-000000000000")
        expect(ok.status).toBe(200)
      }))

    it.effect("item 10: an unknown model names the closest ids and the catalog endpoint", () =>
      Effect.gen(function*() {
        const family = yield* api.submit({ model: "alpha-image-2", input: { prompt: "x" } })
        expect([family.status, family.body]).toEqual([400, {
          code: 400,
          msg: "model 'alpha-image-2' is not supported; did you mean alpha-image-2/text-to-image or alpha-image-2/image-to-image? " +
            "GET /api/v1/models lists every model"
        }])
        const typo = yield* api.submit({ model: "dream-4.6", input: { prompt: "x" } })
        expect(typo.body.msg).toMatch(/^model 'dream-4\.6' is not supported; did you mean dream-4\.5/)
        const far = yield* api.submit({ model: "gamma-9", input: { prompt: "x" } })
        expect(far.body.msg).toBe("model 'gamma-9' is not supported; GET /api/v1/models lists every model")
      }))

    it.effect("item 10: a failed task carries the upstream's message in `error`; others carry null", () =>
      Effect.gen(function*() {
        const failing = yield* api.submit({ model: "alpha-image-2/text-to-image", input: { prompt: "boom [sim:fail]" } })
        const fine = yield* api.submit({ model: "alpha-image-2/text-to-image", input: { prompt: "fine" } })
                expect((yield* api.query(fine.body.data.taskId)).body.data.error).toBeNull()
        for (let second = 0; second < 120; second++) {
          const task = (yield* api.query(failing.body.data.taskId)).body.data
          if (task.status === "FAILURE") {
            expect(task.error).toBe("simulated upstream failure")
            expect(task.failure_reason).toBeNull()
            return
          }
          yield* TestClock.adjust("1 second")
        }
        expect.unreachable("the task did not fail")
      }))
  })
})

/** A moderator that flags `hate` and names no other category. */
const partialModerator = Layer.succeed(Moderation.Moderation, {
  check: () => Effect.succeed({ flagged: true, categories: { hate: true } as never })
})

const moderatedServer = MediagateHttp.serve.pipe(
  // The admin API's services in memory, on the same store and ids (layers are memoised by reference).
  Layer.provide(memoryAdmin.pipe(Layer.provide([MemoryTaskStore.layer, Ids.layerTest]))),
  Layer.provide(
    Layer.mergeAll(
      TaskServiceAlone.layer.pipe(Layer.provide([MemoryTaskStore.layer, partialModerator, TaskServiceAlone.noUpstream])),
      MemoryAccounts.layer([{ id: "a", name: "a", apiKey: Redacted.make(apiKey) }]),
      MemoryLedger.layer,
      MemoryMediaStore.layer({ baseUrl: "http://127.0.0.1/media" })
    ).pipe(Layer.provideMerge(ModelCatalog.layer), Layer.provide(Ids.layerTest))
  ),
  Layer.provideMerge(NodeHttpServer.layerTest)
)

describe("the moderation answer", () => {
  // Provided per test, not with it.layer: layers shared by reference (the test server) are
  // memoised across it.layer blocks, and this server must be a fresh one.
  it.effect("item 5: comes from the verdict, with all 13 keys (missing ones false)", () =>
    Effect.gen(function*() {
      const answer = yield* api.submit({ model: "alpha-image-2/text-to-image", input: { prompt: "x" } })
      expect(answer.status).toBe(400)
      expect(answer.body).toEqual({
        code: 400,
        msg: "content rejected by moderation",
        data: {
          flagged: true,
          categories: Object.fromEntries(Moderation.moderationCategories.map((category) => [category, category === "hate"]))
        }
      })
    }).pipe(Effect.provide(moderatedServer)))
})
