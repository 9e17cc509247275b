/**
 * Submit and query without HTTP, against a minimal store written here.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import {
  Ids,
  ModelCatalog,
  Moderation,
  ModerationRejected,
  SubmitPolicy,
  Task,
  TaskNotFound,
  TaskService,
  TaskStore,
  ValidationError
} from "../src/index.js"

const tasks = new Map<string, Task.TaskRecord>()
const store = Layer.succeed(TaskStore.TaskStore, {
  create: (task) => Effect.sync(() => void tasks.set(task.id, task)),
  get: (id, owner) =>
    Effect.sync(() => Option.fromNullable(tasks.get(id)).pipe(Option.filter((t) => owner === undefined || t.ownerId === owner))),
  update: () => Effect.die("unused"),
  claimDue: () => Effect.succeed([])
})

const service = (moderation = Moderation.layerAllowAll) =>
  TaskService.Default.pipe(Layer.provide([store, Ids.layerTest, ModelCatalog.layer, moderation]))

const alice = { id: "alice", name: "Alice" }
const bob = { id: "bob", name: "Bob" }

const submitError = (body: unknown) =>
  Effect.flatMap(TaskService, (s) => s.submit(alice, body)).pipe(Effect.flip)

describe("TaskService", () => {
  it.effect("submit stores a PENDING task that echoes the input and carries the normalised job", () =>
    Effect.gen(function*() {
      const s = yield* TaskService
      const { taskId } = yield* s.submit(alice, {
        model: "alpha-image-2/text-to-image",
        input: { prompt: "p", ratio: "4:3" },
        callBackUrl: "https://example.com/hook",
        user_id: "u-1"
      })
      const record = tasks.get(taskId)!
      expect(record.status).toBe("PENDING")
      expect(record.ownerId).toBe("alice")
      expect(record.input).toEqual({ model: "alpha-image-2/text-to-image", prompt: "p", ratio: "4:3" })
      expect(record.job).toMatchObject({ width: 1024, height: 768, n: 1, resolution: "1k" })
      expect([record.callBackUrl, record.userId]).toEqual(["https://example.com/hook", "u-1"])
      expect(record.dueAt).toBe(record.createdAt)
      expect(record.deadlineAt - record.createdAt).toBe(600_000)

      const task = yield* s.query(alice, taskId)
      expect(task).toEqual({
        taskId,
        status: "PENDING",
        input: { model: "alpha-image-2/text-to-image", prompt: "p", ratio: "4:3" },
        result: null,
        failure_reason: null,
        created_at: new Date(record.createdAt).toISOString(),
        updated_at: new Date(record.updatedAt).toISOString()
      })
      expect(yield* s.query(bob, taskId).pipe(Effect.flip)).toBeInstanceOf(TaskNotFound)
      expect(yield* s.query(alice, "missing").pipe(Effect.flip)).toBeInstanceOf(TaskNotFound)
    }).pipe(Effect.provide(service())))

  const envelopeCases: ReadonlyArray<[unknown, string]> = [
    [[], "request body must be a JSON object"],
    [{ input: { prompt: "p" } }, "model is required"],
    [{ model: null, input: { prompt: "p" } }, "model is required"],
    [{ model: ["a"], input: { prompt: "p" } }, "model must be a string"],
    [{ model: "x", input: { prompt: "p" } }, "model 'x' is not supported"],
    [{ model: "alpha-image-2/text-to-image" }, "input is required"],
    [{ model: "alpha-image-2/text-to-image", input: [] }, "input must be an object"],
    [{ model: "alpha-image-2/text-to-image", input: { prompt: "p" }, webhook: "x" }, "webhook is not a supported field"],
    [{ model: "alpha-image-2/text-to-image", input: { prompt: "p" }, callBackUrl: 1 }, "callBackUrl must be a string"],
    [{ model: "alpha-image-2/text-to-image", input: { prompt: "p" }, callBackUrl: "ftp://example.com" }, "callBackUrl must be an http or https URL"],
    [{ model: "alpha-image-2/text-to-image", input: { prompt: "p" }, callBackUrl: "http://10.0.0.1/cb" }, "callBackUrl must name a public host (localhost and private addresses are not supported)"],
    [{ model: "alpha-image-2/text-to-image", input: { prompt: "p" }, user_id: {} }, "user_id must be a string"],
    [{ model: "alpha-image-2/text-to-image", input: { prompt: "p" }, user_id: "u".repeat(257) }, "user_id must be at most 256 characters"],
    [{ model: "alpha-image-2/image-to-image", input: { prompt: "p", imageUrls: ["https://127.0.0.1/a.png"] } }, "input.imageUrls[0] must name a public host (localhost and private addresses are not supported) for alpha-image-2/image-to-image"]
  ]
  for (const [body, message] of envelopeCases) {
    it.effect(`refuses ${JSON.stringify(body).slice(0, 80)}: ${message}`, () =>
      Effect.gen(function*() {
        const error = yield* submitError(body)
        expect(error).toBeInstanceOf(ValidationError)
        expect((error as ValidationError).message).toBe(message)
      }).pipe(Effect.provide(service())))
  }

  it.effect("private URLs pass when the policy allows them", () =>
    Effect.gen(function*() {
      const s = yield* TaskService
      const { taskId } = yield* s.submit(alice, {
        model: "alpha-image-2/text-to-image",
        input: { prompt: "p" },
        callBackUrl: "http://127.0.0.1:9999/cb"
      }).pipe(Effect.provideService(SubmitPolicy, { ...SubmitPolicy.defaultValue(), allowPrivateUrls: true }))
      expect(tasks.get(taskId)?.callBackUrl).toBe("http://127.0.0.1:9999/cb")
    }).pipe(Effect.provide(service())))

  it.effect("a flagged prompt is ModerationRejected with all 13 categories, and nothing is stored", () =>
    Effect.gen(function*() {
      const before = tasks.size
      const error = yield* submitError({ model: "alpha-image-2/text-to-image", input: { prompt: "bad" } })
      expect(error).toBeInstanceOf(ModerationRejected)
      const categories = (error as ModerationRejected).categories
      expect(Object.keys(categories)).toEqual([...Moderation.moderationCategories])
      expect(categories["hate"]).toBe(true)
      expect(categories["violence"]).toBe(false)
      expect(tasks.size).toBe(before)
    }).pipe(Effect.provide(service(Layer.succeed(Moderation.Moderation, { check: () => Effect.succeed(Moderation.verdict(["hate"])) })))))
})
