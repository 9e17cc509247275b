/**
 * Failures on our side: a store that fails or a bug that dies answer 500 in the envelope,
 * with no stack, and the cause goes to the log.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Ids, ModelCatalog, Moderation, ModerationUnavailable, StoreError, TaskServiceAlone, TaskStore } from "@mediagate/core"
import { MediagateHttp } from "@mediagate/http"
import { MemoryAccounts, MemoryLedger, MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import { Effect, Layer, Redacted } from "effect"
import { client, memoryAdmin } from "./support.js"

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
    releaseLeases: () => Effect.void,
    list: () => Effect.die("unused"),
    listAll: () => Effect.die("unused"),
    callbacks: () => Effect.die("unused"),
    redeliverCallbacks: () => Effect.die("unused"),
    claimCallbacks: () => Effect.succeed([]),
    recordCallbackAttempt: () => Effect.die("unused"),
    recordCallbackAttempts: () => Effect.die("unused"),
    callbackAttempts: () => Effect.die("unused")
  })

const server = (
  store: Layer.Layer<TaskStore.TaskStore>,
  moderation: Layer.Layer<Moderation.Moderation> = Moderation.layerAllowAll
) =>
  MediagateHttp.serve.pipe(
    // The admin API's services in memory, on the same store and ids (layers are memoised by reference).
    Layer.provide(memoryAdmin.pipe(Layer.provide([store, Ids.layerTest]))),
    Layer.provide(
      Layer.mergeAll(
        TaskServiceAlone.layer.pipe(Layer.provide([store, ModelCatalog.layer, moderation, TaskServiceAlone.noUpstream])),
        MemoryAccounts.layer([{ id: "a", name: "a", apiKey: Redacted.make(key) }]),
        MemoryLedger.layer,
        MemoryMediaStore.layer({ baseUrl: "http://127.0.0.1/media" }),
        ModelCatalog.layer
      ).pipe(Layer.provide(Ids.layerTest))
    ),
    Layer.provideMerge(NodeHttpServer.layerTest)
  )

const api = client(key)
const submitX = api.submit({ model: "alpha-image-2/text-to-image", input: { prompt: "x" } })

describe("internal errors", () => {
  for (const mode of ["error", "defect"] as const) {
    it.effect(`a store ${mode} answers 500 in the envelope, without a stack`, () =>
      Effect.gen(function*() {
        for (const request of [submitX, api.query("0190c8a4-0000-7000-8000-000000000000")]) {
          const answer = yield* request
          expect(answer.status).toBe(500)
          expect(JSON.parse(answer.text)).toEqual({ code: 500, msg: "internal server error" })
          expect(answer.text).not.toMatch(/disk on fire|undefined is not a function|at /)
        }
      }).pipe(Effect.provide(server(brokenStore(mode)))))
  }
})

describe("moderation answer", () => {
  // A third-party moderator that names only the categories it flagged, and says so.
  const partial = Layer.succeed(Moderation.Moderation, {
    check: () => Effect.succeed({ flagged: true, categories: { hate: true, "self-harm": false } })
  })

  it.effect("comes from the verdict: flagged as the moderator said, all 13 categories, missing ones false", () =>
    Effect.gen(function*() {
      const answer = yield* submitX
      expect(answer.status).toBe(400)
      const body = JSON.parse(answer.text)
      expect(body.msg).toBe("content rejected by moderation")
      expect(body.data.flagged).toBe(true)
      expect(body.data.categories).toEqual(
        Object.fromEntries(Moderation.moderationCategories.map((category) => [category, category === "hate"]))
      )
    }).pipe(Effect.provide(server(MemoryTaskStore.layer, partial))))
})

describe("moderation backend down", () => {
  const down = Layer.succeed(Moderation.Moderation, {
    check: () => Effect.fail(new ModerationUnavailable({ message: "the moderation service answered 503: overloaded" }))
  })

  it.effect("fails closed: 503 in the envelope, and nothing is created", () =>
    Effect.gen(function*() {
      const answer = yield* submitX
      expect(answer.status).toBe(503)
      expect(JSON.parse(answer.text)).toEqual({ code: 503, msg: "content moderation is unavailable; nothing was created, try again later" })
      const list = yield* api.call("GET", "/api/v1/tasks")
      expect(JSON.parse(list.text).data.tasks).toEqual([])
    }).pipe(Effect.provide(server(MemoryTaskStore.layer, down))))

  it.effect("failing open, the task is created", () =>
    Effect.gen(function*() {
      const answer = yield* submitX
      expect(answer.status).toBe(200)
      expect(JSON.parse(answer.text).data.taskId).toMatch(/^[0-9a-f-]{36}$/)
    }).pipe(Effect.provide(server(MemoryTaskStore.layer, Moderation.layerCounted({ failOpen: true }).pipe(Layer.provide(down))))))
})

