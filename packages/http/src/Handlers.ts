/**
 * Handlers of the task endpoints.
 */
import { HttpApiBuilder, HttpIncomingMessage } from "@effect/platform"
import type { HttpApiGroup, HttpServerRequest } from "@effect/platform"
import { Accounts, Api, decodeListRequest, decodeSubmitRequest, ModelCatalog, ModelInfo, Moderation, parseTaskId, TaskNotFound, TaskService } from "@mediagate/core"
import type { Layer } from "effect"
import { Effect, Option } from "effect"

/** Largest accepted request body (DESIGN.md section 3). */
export const maxBodyBytes = 1024 * 1024

const badRequest = (msg: string) => new Api.BadRequest({ code: 400, msg })
const tooLarge = () => new Api.PayloadTooLarge({ code: 413, msg: `request body must be at most ${maxBodyBytes} bytes` })

const isJson = (contentType: string | undefined) =>
  contentType !== undefined && /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i.test(contentType.trim())

/** Reads and parses the JSON body, with the envelope errors a client should see. */
export const readJsonBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    if (!isJson(request.headers["content-type"])) {
      return yield* Effect.fail(badRequest("Content-Type must be application/json"))
    }
    const declared = Number(request.headers["content-length"] ?? "0")
    if (declared > maxBodyBytes) return yield* Effect.fail(tooLarge())
    const text = yield* request.text.pipe(
      HttpIncomingMessage.withMaxBodySize(Option.some(maxBodyBytes)),
      Effect.mapError((error) =>
        String((error as { cause?: unknown }).cause).includes("maxBytes") ? tooLarge() : badRequest("the request body could not be read")
      )
    )
    if (text.trim() === "") return yield* Effect.fail(badRequest("request body is required"))
    return yield* Effect.try({
      // A leading byte order mark is tolerated, as RFC 8259 allows.
      try: () => JSON.parse(text.replace(/^\uFEFF/, "")) as unknown,
      catch: () => badRequest("request body is not valid JSON")
    })
  })

/** A task id from a path: any case of a UUID; anything else is an unknown task. */
const ownTaskId = (value: string) =>
  Option.match(parseTaskId(value), {
    onNone: () => Effect.fail(new TaskNotFound({ taskId: value })),
    onSome: Effect.succeed
  })

/** The handlers of the "tasks" group. */
export const layer: Layer.Layer<
  HttpApiGroup.ApiGroup<"mediagate", "tasks">,
  never,
  TaskService | Api.Authorization
> = HttpApiBuilder.group(Api.MediagateApi, "tasks", (handlers) =>
  Effect.gen(function*() {
    const tasks = yield* TaskService
    return handlers
      .handleRaw("submit", ({ request }) =>
        Effect.gen(function*() {
          const account = yield* Accounts.CurrentAccount
          const body = yield* readJsonBody(request)
          const submitted = yield* decodeSubmitRequest(body)
          const { taskId } = yield* tasks.submit(account, submitted)
          return Api.okEnvelope({ taskId })
        }).pipe(
          Effect.catchTags({
            ValidationError: (error) => Effect.fail(badRequest(error.message)),
            ModerationRejected: (error) =>
              Effect.fail(
                new Api.ModerationRejectedResponse({
                  code: 400,
                  msg: "content rejected by moderation",
                  data: { flagged: error.flagged, categories: Moderation.allCategories(error.categories) }
                })
              )
          })
        ))
      // Raw: the query string is read here, so a repeated or odd parameter is our 400, not the framework's.
      .handleRaw("list", ({ request }) =>
        Effect.gen(function*() {
          const account = yield* Accounts.CurrentAccount
          const listed = yield* decodeListRequest(new URL(request.url, "http://localhost").searchParams)
          return Api.okEnvelope(yield* tasks.list(account, listed))
        }).pipe(
          Effect.catchTags({
            ValidationError: (error) => Effect.fail(badRequest(error.message))
          })
        ))
      .handle("cancel", ({ path }) =>
        Effect.gen(function*() {
          const account = yield* Accounts.CurrentAccount
          const taskId = yield* ownTaskId(path.taskId)
          return Api.okEnvelope(yield* tasks.cancel(account, taskId))
        }).pipe(
          Effect.catchTags({
            TaskNotFound: () => Effect.fail(Api.taskNotFound()),
            TaskNotCancellable: (error) =>
              Effect.fail(new Api.Conflict({ code: 409, msg: `task is already ${error.status}` })),
            TaskConflict: () => Effect.fail(new Api.Conflict({ code: 409, msg: "task is changing; try again" }))
          })
        ))
      .handle("query", ({ path }) =>
        Effect.gen(function*() {
          const account = yield* Accounts.CurrentAccount
          const taskId = yield* ownTaskId(path.taskId)
          return Api.okEnvelope(yield* tasks.query(account, taskId))
        }).pipe(
          Effect.catchTags({
            TaskNotFound: () => Effect.fail(Api.taskNotFound())
          })
        ))
  }))

/** The handler of the "catalog" group. */
export const catalogLayer: Layer.Layer<
  HttpApiGroup.ApiGroup<"mediagate", "catalog">,
  never,
  ModelCatalog.ModelCatalog | Api.Authorization
> = HttpApiBuilder.group(Api.MediagateApi, "catalog", (handlers) =>
  Effect.gen(function*() {
    const catalog = yield* ModelCatalog.ModelCatalog
    // Described once: the catalog does not change while the server runs.
    const models = catalog.models.map(ModelInfo.describe)
    return handlers.handle("models", () => Effect.succeed(Api.okEnvelope({ models })))
  }))
