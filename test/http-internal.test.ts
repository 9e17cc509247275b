/**
 * Failures on our side: a store that fails or a bug that dies answer 500 in the envelope,
 * with no stack, and the cause goes to the log.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Ids, ModelCatalog, Moderation, StoreError, TaskService, TaskStore } from "@mediagate/core"
import { MediagateHttp } from "@mediagate/http"
import { MemoryAccounts, MemoryMediaStore } from "@mediagate/store-memory"
import { Effect, Layer, Redacted } from "effect"

const key = "internal-test-key"

const brokenStore = (mode: "error" | "defect") =>
  Layer.succeed(TaskStore.TaskStore, {
    create: () =>
      mode === "error"
        ? Effect.die(new StoreError({ message: "disk on fire" }))
        : Effect.die(new Error("bug: undefined is not a function")),
    get: () => Effect.die("unused"),
    getOwned: () =>
      mode === "error"
        ? Effect.die(new StoreError({ message: "disk on fire" }))
        : Effect.die(new Error("bug: undefined is not a function")),
    update: () => Effect.die("unused"),
    claimDue: () => Effect.succeed([]),
    list: () => Effect.die("unused"),
    callbacks: () => Effect.die("unused"),
    claimCallbacks: () => Effect.succeed([]),
    recordCallbackAttempt: () => Effect.die("unused"),
    callbackAttempts: () => Effect.die("unused")
  })

const server = (mode: "error" | "defect") =>
  MediagateHttp.serve.pipe(
    Layer.provide(
      Layer.mergeAll(
        TaskService.Default.pipe(Layer.provide([brokenStore(mode), ModelCatalog.layer, Moderation.layerAllowAll])),
        MemoryAccounts.layer([{ id: "a", name: "a", apiKey: Redacted.make(key) }]),
        MemoryMediaStore.layer({ baseUrl: "http://127.0.0.1/media" }),
        ModelCatalog.layer
      ).pipe(Layer.provide(Ids.layerTest))
    ),
    Layer.provideMerge(NodeHttpServer.layerTest)
  )

const call = (request: HttpClientRequest.HttpClientRequest) =>
  Effect.gen(function*() {
    const response = yield* (yield* HttpClient.HttpClient).execute(request.pipe(HttpClientRequest.bearerToken(key)))
    return { status: response.status, text: yield* response.text }
  })

const submit = HttpClientRequest.post("/api/v1/task/submit").pipe(
  HttpClientRequest.bodyText(JSON.stringify({ model: "alpha-image-2/text-to-image", input: { prompt: "x" } }), "application/json")
)

describe("internal errors", () => {
  for (const mode of ["error", "defect"] as const) {
    it.effect(`a store ${mode} answers 500 in the envelope, without a stack`, () =>
      Effect.gen(function*() {
        for (const request of [submit, HttpClientRequest.get("/api/v1/task/abc")]) {
          const answer = yield* call(request)
          expect(answer.status).toBe(500)
          expect(JSON.parse(answer.text)).toEqual({ code: 500, msg: "internal server error" })
          expect(answer.text).not.toMatch(/disk on fire|undefined is not a function|at /)
        }
      }).pipe(Effect.provide(server(mode))))
  }
})
