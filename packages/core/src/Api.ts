/**
 * The HTTP contract (spec sections 4, 5 and 7): endpoints, envelope and errors. Handlers
 * live in @mediagate/http; the typed client and the OpenAPI document come from here too.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { CurrentAccount } from "./Accounts.js"
import { ModelInfo } from "./models/ModelInfo.js"
import { moderationCategories } from "./Moderation.js"
import { SubmitRequest } from "./Requests.js"
import { Task } from "./Task.js"

const envelopeError = <const Code extends number>(code: Code, description: string) =>
  ({
    code: Schema.Literal(code),
    msg: Schema.String.annotations({ description }),
    data: Schema.optional(Schema.Unknown)
  }) as const

/** 400: the request broke a rule; `msg` names the field and the rule. */
export class BadRequest extends Schema.Class<BadRequest>("BadRequest")(
  envelopeError(400, "What is wrong with the request, naming the field and the rule."),
  HttpApiSchema.annotations({ status: 400 })
) {}

/** 400: pre-submission moderation rejected the prompt. */
export class ModerationRejectedResponse extends Schema.Class<ModerationRejectedResponse>("ModerationRejected")(
  {
    code: Schema.Literal(400),
    msg: Schema.Literal("content rejected by moderation"),
    data: Schema.Struct({
      flagged: Schema.Boolean,
      categories: Schema.Struct(
        Object.fromEntries(moderationCategories.map((category) => [category, Schema.Boolean])) as Record<
          typeof moderationCategories[number],
          typeof Schema.Boolean
        >
      )
    })
  },
  HttpApiSchema.annotations({ status: 400 })
) {}

/** 401: missing or invalid bearer key. */
export class Unauthorized extends Schema.Class<Unauthorized>("Unauthorized")(
  envelopeError(401, "Always 'unauthorized'."),
  HttpApiSchema.annotations({ status: 401 })
) {}

/** 404: unknown task (msg 'task not found') or unknown route. */
export class NotFound extends Schema.Class<NotFound>("NotFound")(
  envelopeError(404, "'task not found' for an unknown task."),
  HttpApiSchema.annotations({ status: 404 })
) {}

/** 409: the request conflicts with the task's state (cancelling a finished task). */
export class Conflict extends Schema.Class<Conflict>("Conflict")(
  envelopeError(409, "Why the task's state does not allow it."),
  HttpApiSchema.annotations({ status: 409 })
) {}

/** 413: request body over the limit. */
export class PayloadTooLarge extends Schema.Class<PayloadTooLarge>("PayloadTooLarge")(
  envelopeError(413, "The body limit."),
  HttpApiSchema.annotations({ status: 413 })
) {}

/** 500: something failed on our side; the cause is logged, never returned. */
export class InternalServerError extends Schema.Class<InternalServerError>("InternalServerError")(
  envelopeError(500, "Always 'internal server error'."),
  HttpApiSchema.annotations({ status: 500 })
) {}

/** The envelope of every error answer. */
export const errorEnvelope = (code: number, msg: string, data?: unknown) =>
  data === undefined ? { code, msg } : { code, msg, data }

/** The success envelope, `{code: 0, msg: "ok", data}`, of every 200 answer. */
export const okEnvelope = <const A>(data: A) => ({ code: 0, msg: "ok", data }) as const

/** Shorthands for the fixed messages. */
export const unauthorized = () => new Unauthorized({ code: 401, msg: "unauthorized" })
export const taskNotFound = () => new NotFound({ code: 404, msg: "task not found" })
export const internalError = () => new InternalServerError({ code: 500, msg: "internal server error" })

/** Bearer-key authentication; provides the caller's account. */
export class Authorization extends HttpApiMiddleware.Tag<Authorization>()("@mediagate/core/Authorization", {
  failure: Unauthorized,
  provides: CurrentAccount,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

/** Body of POST /api/v1/task/submit: the Schema the submit handler decodes with. */
export { SubmitRequest }

const ok = <S extends Schema.Schema.Any>(data: S) =>
  Schema.Struct({ code: Schema.Literal(0), msg: Schema.Literal("ok"), data })

/** 200 answer of submit. */
export const SubmitResponse = ok(Schema.Struct({ taskId: Schema.String })).annotations({ identifier: "SubmitResponse" })

/** 200 answer of query. */
export const TaskResponse = ok(Task).annotations({ identifier: "TaskResponse" })

/** 200 answer of the task list. */
export const TaskListResponse = ok(Schema.Struct({ tasks: Schema.Array(Task), next_cursor: Schema.NullOr(Schema.String) }))
  .annotations({ identifier: "TaskListResponse" })

/** The task endpoints. */
export class TasksGroup extends HttpApiGroup.make("tasks")
  .add(
    HttpApiEndpoint.post("submit", "/task/submit")
      .setPayload(SubmitRequest)
      .addSuccess(SubmitResponse)
      .addError(BadRequest)
      .addError(ModerationRejectedResponse)
      .addError(PayloadTooLarge)
      .annotate(OpenApi.Summary, "Submit a task")
  )
  .add(
    // Query parameters `limit` (1 to 100, default 20) and `cursor` (next_cursor of the
    // previous page) are read by the handler, so that a malformed one is our 400.
    HttpApiEndpoint.get("list", "/tasks")
      .addSuccess(TaskListResponse)
      .addError(BadRequest)
      .annotate(OpenApi.Summary, "List your tasks, newest first (additive: not in the spec)")
      .annotate(
        OpenApi.Description,
        "Query parameters: limit (1 to 100, default 20) and cursor (next_cursor of the previous page)."
      )
  )
  .add(
    HttpApiEndpoint.post("cancel", "/task/:taskId/cancel")
      .setPath(Schema.Struct({ taskId: Schema.String }))
      .addSuccess(TaskResponse)
      .addError(NotFound)
      .addError(Conflict)
      .annotate(OpenApi.Summary, "Cancel a task that has not ended (additive: not in the spec)")
  )
  .add(
    HttpApiEndpoint.get("query", "/task/:taskId")
      .setPath(Schema.Struct({ taskId: Schema.String }))
      .addSuccess(TaskResponse)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Query a task")
  )
  .middleware(Authorization)
  .prefix("/api/v1")
{}

/** 200 answer of the catalog. */
export const ModelsResponse = ok(Schema.Struct({ models: Schema.Array(ModelInfo) })).annotations({ identifier: "ModelsResponse" })

/** The model catalog (additive: not in the spec). */
export class CatalogGroup extends HttpApiGroup.make("catalog")
  .add(
    HttpApiEndpoint.get("models", "/models")
      .addSuccess(ModelsResponse)
      .annotate(OpenApi.Summary, "List the models with the JSON Schema of their input")
  )
  .middleware(Authorization)
  .prefix("/api/v1")
{}

/** The whole mediagate API. */
export class MediagateApi extends HttpApi.make("mediagate")
  .add(TasksGroup)
  .add(CatalogGroup)
  .addError(InternalServerError)
  .annotate(OpenApi.Title, "mediagate")
  .annotate(OpenApi.Description, "Asynchronous media generation: one submit endpoint and one query endpoint.")
{}
