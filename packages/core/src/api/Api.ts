/**
 * The HTTP contract (spec sections 4, 5 and 7): endpoints, what their requests carry
 * (Requests) and the envelope of their answers (Envelope). Handlers live in @mediagate/http;
 * the typed client and the OpenAPI document come from here too.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Adjustment, CallbackEvent, isoTime, Task } from "../domain/Task.js"
import { ModelInfo } from "../models/ModelInfo.js"
import { CurrentAccount } from "../services/Accounts.js"
import type * as Ledger from "../services/Ledger.js"
import type * as TaskStore from "../services/TaskStore.js"
import * as Credits from "../tasks/Credits.js"
import { AdminAccessGroup, AdminAccountsGroup, AdminTasksGroup } from "./AdminApi.js"
import { FilesGroup } from "./FilesApi.js"
import type { Estimate } from "../tasks/TaskService.js"
import {
  BadRequest,
  Conflict,
  Forbidden,
  InternalServerError,
  MethodNotAllowed,
  ModerationRejectedResponse,
  NotFound,
  okSchema,
  PayloadTooLarge,
  RequestTimeout,
  ServiceUnavailable,
  TooManyRequests,
  Unauthorized,
  UnprocessableEntity
} from "./Envelope.js"
import * as OpenApiDocument from "./OpenApiDocument.js"
import { AdminInsightsGroup, CustomerUsageGroup } from "./UsageApi.js"
import { ListParams, QueryParams, SubmitHeaders, SubmitRequest, TaskIdPath } from "./Requests.js"

// The contract is one namespace (`Api.BadRequest`, `Api.SubmitRequest`, ...) over its modules.
export * from "./Envelope.js"
export * from "./Requests.js"
/** The hot answers' JSON written without Schema (the query's task, submit's acknowledgement). */
export * as WireJson from "./WireJson.js"

/**
 * The API key as a bearer token. The description is the OpenAPI document's (its security
 * scheme `bearer`, which the docs page's authentication field offers); it changes nothing the
 * server does, and `@mediagate/http`'s Auth reads the header itself.
 */
const bearerKey = HttpApiSecurity.bearer.pipe(
  HttpApiSecurity.annotate(
    OpenApi.Description,
    "Your API key (`mg_...`), sent as `Authorization: Bearer <key>`. A missing, unknown, revoked or expired key is answered 401 on every `/api/v1/` path; an admin key is answered 403."
  )
)

/** Bearer-key authentication; provides the caller's account. An admin key is 403 here. */
export class Authorization extends HttpApiMiddleware.Tag<Authorization>()("@mediagate/core/Authorization", {
  failure: Schema.Union(Unauthorized, Forbidden),
  provides: CurrentAccount,
  security: { bearer: bearerKey }
}) {}

/** Said of an endpoint the spec does not have, in its description (never in its title). */
const additive = "Additive: not in the spec."

/** 200 answer of submit. */
export const SubmitResponse = okSchema(Schema.Struct({ taskId: Schema.String })).annotations({ identifier: "SubmitResponse" })

/** 200 answer of estimate. */
export const EstimateResponse = okSchema(Schema.Struct({
  model: Schema.String.annotations({ description: "The model id as submitted." }),
  input: Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
    description: "The input as the task would store it: `data.input` of the query answer after a submit of the same body."
  }),
  adjustments: Schema.Array(Adjustment).annotations({
    description:
      "What the model's rules would change of the request (clip3's durations, ...), in the shape of the task's `adjustments`: what a submit of the same body would record; empty when nothing."
  }),
  priceMicroUsd: Schema.Int.annotations({
    description: "The task's price in integer micro-USD (1 USD = 1,000,000): what a submit would hold and charge on SUCCESS."
  }),
  priceUsd: Schema.String.annotations({ description: "The same price in US dollars, always with six decimals (`0.050000`)." }),
  rejection: Schema.NullOr(Schema.String).annotations({
    description:
      "Null unless a rule of the model would accept the submit and fail the task at once (FAILURE, INVALID_PARAMETERS, nothing charged): then the message it would fail with."
  })
})).annotations({ identifier: "EstimateResponse" })

/** A submit's estimate in the shape the estimate endpoint shows. */
export const estimateWire = (estimate: Estimate): Schema.Schema.Type<typeof EstimateResponse>["data"] => ({
  model: estimate.model,
  input: estimate.input,
  adjustments: estimate.job.adjustments,
  priceMicroUsd: estimate.job.priceMicroUsd,
  priceUsd: Credits.usdDecimal(estimate.job.priceMicroUsd),
  rejection: estimate.rejection ?? null
})

/** 200 answer of query. */
export const TaskResponse = okSchema(Task).annotations({ identifier: "TaskResponse" })

/** 200 answer of the task list. */
export const TaskListResponse = okSchema(Schema.Struct({ tasks: Schema.Array(Task), next_cursor: Schema.NullOr(Schema.String) }))
  .annotations({ identifier: "TaskListResponse" })

/** The task endpoints. */
export class TasksGroup extends HttpApiGroup.make("tasks")
  .add(
    // The body is read by the handler (size and depth limits, broken JSON is a 400), then
    // decoded with SubmitRequest; the header is decoded by HttpApi.
    HttpApiEndpoint.post("submit", "/task/submit")
      .setHeaders(SubmitHeaders)
      .setPayload(SubmitRequest)
      .addSuccess(SubmitResponse)
      .addError(BadRequest)
      .addError(Forbidden)
      .addError(ModerationRejectedResponse)
      .addError(Conflict)
      .addError(PayloadTooLarge)
      .addError(RequestTimeout)
      .addError(UnprocessableEntity)
      .addError(ServiceUnavailable)
      .annotate(OpenApi.Summary, "Submit a task")
  )
  .add(
    // Read and decoded as submit's body is, by the handler.
    HttpApiEndpoint.post("estimate", "/task/estimate")
      .setPayload(SubmitRequest)
      .addSuccess(EstimateResponse)
      .addError(BadRequest)
      .addError(Forbidden)
      .addError(PayloadTooLarge)
      .addError(RequestTimeout)
      .annotate(OpenApi.Summary, "Price a task without submitting it")
      .annotate(
        OpenApi.Description,
        `${additive} Takes the body of submit and checks it by the same rules, with the same 400s; creates no task, holds no credits (an account without credits may estimate), and does not check the prompt against moderation, so a submit of the same body may still be refused by it. An Idempotency-Key header is ignored.`
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/tasks")
      .setUrlParams(ListParams)
      .addSuccess(TaskListResponse)
      .addError(BadRequest)
      .annotate(OpenApi.Summary, "List your tasks, newest first")
      .annotate(
        OpenApi.Description,
        `${additive} Each parameter may be given once; a parameter not listed here, or one given twice, is refused with 400.`
      )
  )
  .add(
    HttpApiEndpoint.post("cancel", "/task/:taskId/cancel")
      .setPath(Schema.Struct({ taskId: TaskIdPath }))
      .addSuccess(TaskResponse)
      .addError(NotFound)
      .addError(Conflict)
      .annotate(OpenApi.Summary, "Cancel a task that has not ended")
      .annotate(OpenApi.Description, `${additive} A task that has ended is 409.`)
  )
  .add(
    HttpApiEndpoint.get("events", "/task/:taskId/events")
      .setPath(Schema.Struct({ taskId: TaskIdPath }))
      .addSuccess(Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" })).annotations({
        description:
          "Server-sent events: a `task` event whose data is the task (as `data` of the query answer) at once and after every change of status, then the stream ends after a terminal status; a `progress` event (`{ taskId, status, progress }`) when only the task's progress changed, at most one per 500 ms; a `: keep-alive` comment every 15 seconds."
      }))
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Follow a task as it changes")
      .annotate(OpenApi.Description, `${additive} The answer is a stream of server-sent events.`)
  )
  .add(
    HttpApiEndpoint.get("query", "/task/:taskId")
      .setPath(Schema.Struct({ taskId: TaskIdPath }))
      .setUrlParams(QueryParams)
      .addSuccess(TaskResponse)
      .addError(BadRequest)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Query a task")
  )
  .middleware(Authorization)
  .prefix("/api/v1")
{}

/** One attempt to deliver a callback, as the callbacks endpoint shows it. */
export const CallbackAttempt = Schema.Struct({
  attempt: Schema.Int.annotations({ description: "1 for the first; a redelivery carries the numbering on." }),
  at: Schema.String.annotations({ description: "When the attempt ended (ISO 8601 UTC)." }),
  status_code: Schema.NullOr(Schema.Int).annotations({ description: "The receiver's HTTP status; null when there was no answer." }),
  latency_ms: Schema.Int.annotations({ description: "From sending the request to its answer or failure." }),
  error: Schema.NullOr(Schema.String).annotations({
    description: "Why the attempt did not deliver (`HTTP 500`, `no answer within 15s`, ...); null when it did."
  })
}).annotations({ identifier: "CallbackAttempt" })

/** A task's callback and its delivery, as the callbacks endpoint shows it. */
export const Callback = Schema.Struct({
  id: Schema.String.annotations({ description: "The callback's webhook-id, the same on every attempt and redelivery." }),
  url: Schema.String.annotations({ description: "Where it is sent: the task's callBackUrl." }),
  event: Schema.NullOr(CallbackEvent).annotations({
    description:
      "What it tells of, for a task submitted with callBackEvents (started, progress, completed); null for the spec's one terminal callback."
  }),
  created_at: Schema.String.annotations({
    description: "When the callback became owed: the task ended, or for an event, when it happened (ISO 8601 UTC)."
  }),
  status: Schema.Literal("pending", "delivered", "failed").annotations({
    description: "pending: an attempt is due at next_attempt_at; delivered: a 2xx answer; failed: given up (410 Gone or the retry schedule used up) or, for a started or progress event, not sent (the task had ended, or a newer progress callback was owed; its one attempt's error says which)."
  }),
  next_attempt_at: Schema.NullOr(Schema.String).annotations({ description: "When the next attempt is due; null unless pending." }),
  attempts: Schema.Array(CallbackAttempt).annotations({ description: "Every attempt, oldest first." })
}).annotations({ identifier: "Callback" })

/** A callback and its attempts in the shape the callbacks endpoint shows. */
export const callbackWire = (
  callback: TaskStore.CallbackState,
  attempts: ReadonlyArray<TaskStore.CallbackAttempt>
): typeof Callback.Type => ({
  id: callback.id,
  url: callback.url,
  event: callback.event ?? null,
  created_at: isoTime(callback.createdAt),
  status: callback.status,
  next_attempt_at: callback.nextAttemptAt === null ? null : isoTime(callback.nextAttemptAt),
  attempts: attempts.map((attempt) => ({
    attempt: attempt.attempt,
    at: isoTime(attempt.at),
    status_code: attempt.status,
    latency_ms: Math.round(attempt.durationMs),
    error: attempt.error
  }))
})

/** 200 answer of the callbacks endpoints. */
export const CallbacksResponse = okSchema(Schema.Struct({ callbacks: Schema.Array(Callback) })).annotations({ identifier: "CallbacksResponse" })

/** A task's callbacks: their deliveries, and a redelivery on demand (additive: not in the spec). */
export class CallbacksGroup extends HttpApiGroup.make("callbacks")
  .add(
    HttpApiEndpoint.get("callbacks", "/task/:taskId/callbacks")
      .setPath(Schema.Struct({ taskId: TaskIdPath }))
      .addSuccess(CallbacksResponse)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "List a task's callbacks and every delivery attempt")
      .annotate(OpenApi.Description, additive)
  )
  .add(
    HttpApiEndpoint.post("redeliver", "/task/:taskId/callbacks/redeliver")
      .setPath(Schema.Struct({ taskId: TaskIdPath }))
      .addSuccess(CallbacksResponse)
      .addError(NotFound)
      .addError(Conflict)
      .annotate(OpenApi.Summary, "Send an ended task's callback again")
      .annotate(OpenApi.Description, `${additive} The callback is sent now, with the same webhook-id.`)
  )
  .middleware(Authorization)
  .prefix("/api/v1")
{}

/** 200 answer of the catalog. */
export const ModelsResponse = okSchema(Schema.Struct({ models: Schema.Array(ModelInfo) })).annotations({ identifier: "ModelsResponse" })

/** The model catalog (additive: not in the spec). */
export class CatalogGroup extends HttpApiGroup.make("catalog")
  .add(
    HttpApiEndpoint.get("models", "/models")
      .addSuccess(ModelsResponse)
      .annotate(OpenApi.Summary, "List the models with the JSON Schema of their input")
      .annotate(OpenApi.Description, additive)
  )
  .middleware(Authorization)
  .prefix("/api/v1")
{}

/** A movement of credits as the account endpoint shows it. */
export const LedgerEntry = Schema.Struct({
  id: Schema.String,
  kind: Schema.Literal("credit", "reserve", "charge", "release"),
  /** The task the movement is for; null for credits. */
  task_id: Schema.NullOr(Schema.String),
  amount_micro_usd: Schema.Int.annotations({ description: "What the entry adds to the balance (negative for a charge)." }),
  held_micro_usd: Schema.Int.annotations({ description: "What the entry adds to the reserved sum (negative when a reservation ends)." }),
  created_at: Schema.String,
  note: Schema.NullOr(Schema.String)
}).annotations({ identifier: "LedgerEntry" })

/** A ledger entry in the shape the account endpoint (and the admin CLI's --json) shows. */
export const ledgerEntryWire = (entry: Ledger.LedgerEntry): typeof LedgerEntry.Type => ({
  id: entry.id,
  kind: entry.kind,
  task_id: entry.taskId,
  amount_micro_usd: entry.amount,
  held_micro_usd: entry.held,
  created_at: isoTime(entry.at),
  note: entry.note
})

/** Most entries the account endpoint shows. */
export const accountEntries = 20

/** 200 answer of the account endpoint. */
export const AccountResponse = okSchema(Schema.Struct({
  account_id: Schema.String,
  name: Schema.String,
  balance_micro_usd: Schema.Int.annotations({ description: "Credits held for the account: the sum of every entry's amount." }),
  reserved_micro_usd: Schema.Int.annotations({ description: "The part of the balance held for tasks that have not ended." }),
  available_micro_usd: Schema.Int.annotations({ description: "What new tasks may reserve: balance minus reserved." }),
  entries: Schema.Array(LedgerEntry).annotations({ description: `The latest ${accountEntries} movements, newest first.` })
})).annotations({ identifier: "AccountResponse" })

/** The calling account (additive: not in the spec). */
export class AccountGroup extends HttpApiGroup.make("account")
  .add(
    HttpApiEndpoint.get("account", "/account")
      .addSuccess(AccountResponse)
      .annotate(OpenApi.Summary, "Show your balance, reserved credits and latest ledger entries")
      .annotate(OpenApi.Description, additive)
  )
  .middleware(Authorization)
  .prefix("/api/v1")
{}

/** The whole mediagate API. */
export class MediagateApi extends HttpApi.make("mediagate")
  .add(TasksGroup)
  .add(CallbacksGroup)
  .add(CatalogGroup)
  .add(AccountGroup)
  // Usage reports (`UsageApi`): the customer's, authenticated here (UsageApi cannot import this module).
  .add(CustomerUsageGroup.middleware(Authorization).prefix("/api/v1"))
  // Uploaded input files (`FilesApi`), authenticated here as usage is.
  .add(FilesGroup.middleware(Authorization).prefix("/api/v1"))
  // The operator's API (`AdminApi`), under its own tag and admin keys only.
  .add(AdminAccountsGroup)
  .add(AdminTasksGroup)
  .add(AdminAccessGroup)
  .add(AdminInsightsGroup)
  // Every endpoint is authenticated, and the limits run before authentication (HTTP layer).
  .addError(TooManyRequests)
  // The database out of reach: any endpoint that reads or writes it (authentication does).
  .addError(ServiceUnavailable)
  .addError(InternalServerError)
  // Answered for a wrong method on a known path, which no endpoint describes.
  .annotate(HttpApi.AdditionalSchemas, [MethodNotAllowed])
  .annotate(OpenApi.Transform, (spec) => OpenApiDocument.clean(spec as OpenApi.OpenAPISpec))
  .annotate(OpenApi.Title, "mediagate")
  .annotate(OpenApi.Description, "Asynchronous media generation: one submit endpoint and one query endpoint.")
{}
