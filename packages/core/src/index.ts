/** Accounts, API keys and the current request's account. */
export * as Accounts from "./services/Accounts.js"
/** The engine's choice after a failed upstream call: retry, fall back or fail. */
export * as Attempt from "./domain/Attempt.js"
/** A task's progress: an upstream's report folded in, bounded and throttled. */
export * as Progress from "./domain/Progress.js"
/** The HTTP contract: endpoints, envelope, errors. */
export * as Api from "./api/Api.js"
/** Domain errors. */
export * from "./domain/Errors.js"
/** A binary min-heap. */
export { Heap } from "./domain/Heap.js"
/** `spanned`: `Effect.withSpan`, skipped while the tracer is disabled. */
export { spanned } from "./tasks/SpanOptions.js"
/** Idempotency keys of submit: reservation, binding, expiry, fingerprints. */
export * as IdempotencyKeys from "./services/IdempotencyKeys.js"
/** Task ids and random tokens. */
export * as Ids from "./domain/Ids.js"
/** Hosting of produced files. */
export * as MediaStore from "./services/MediaStore.js"
/** Kinds, formats and durations of media files. */
export * as MediaProbe from "./services/MediaProbe.js"
/** The model catalog. */
export * as ModelCatalog from "./models/ModelCatalog.js"
/** alpha-image-2. */
export * as AlphaImage2 from "./models/AlphaImage2.js"
/** beta-imagine. */
export * as BetaImagine from "./models/BetaImagine.js"
/** motion-2.0-pro and canvas-video. */
export * as CanvasVideo from "./models/CanvasVideo.js"
/** clip3. */
export * as Clip3 from "./models/Clip3.js"
/** compact-image, canvas, dream. */
export * as ImageModels from "./models/ImageModels.js"
/** motion-2.0, motion-2.0-fast, motion-1.5-pro. */
export * as Motion from "./models/Motion.js"
/** docs/models.md from the catalog. */
export * as ModelDocs from "./models/ModelDocs.js"
/** The public description of a model. */
export * as ModelInfo from "./models/ModelInfo.js"
/** Prices and the host's price table. */
export * as Pricing from "./models/Pricing.js"
/** Pixel sizes the spec does not give. */
export * as Sizes from "./models/Sizes.js"
/** Schema building blocks of model inputs. */
export * as Fields from "./models/Fields.js"
export type { DraftJob, ModelExample, ModelSpec, Normalized } from "./models/ModelSpec.js"
/** Pre-submission moderation. */
export * as Moderation from "./services/Moderation.js"
/** The gateway's metrics (Effect `Metric`): submits, ended tasks, upstream calls, callbacks, PENDING. */
export * as Metrics from "./services/Metrics.js"
/** Credits: the ledger of an account's movements. */
export * as Ledger from "./services/Ledger.js"
/** What credits do over a task's life: reserve, charge or release, dollars. */
export * as Credits from "./tasks/Credits.js"
/** API keys: format, checksum, states. */
export * as ApiKeys from "./domain/ApiKeys.js"
/** Scoped keys: allowed models, monthly caps, own rate limits; parsing what people type and the refusals. */
export * as KeyScopes from "./domain/KeyScopes.js"
/** Moderation by local word and pattern rules, the default moderator. */
export * as ModerationRules from "./services/ModerationRules.js"
/** Tasks: statuses, records, the wire shape. */
export * as Task from "./domain/Task.js"
/** Requests to third parties: address checks, pinning, no redirects. */
export * as Outbound from "./services/Outbound.js"
/** Downloads of client media: address checks, limits, sniffed content types. */
export * as SafeFetch from "./services/SafeFetch.js"
/** `Retry-After` read one way: delay-seconds or an HTTP date. */
export * as RetryAfter from "./domain/RetryAfter.js"
/** Standard Webhooks signatures: the deliverer's signing, the upstream webhooks' and receivers' checks. */
export * as StandardWebhooks from "./domain/StandardWebhooks.js"
/** A receiver's check of a mediagate callback (Standard Webhooks signature), and why it refuses one. */
export {
  type CallbackHeaders,
  CallbackVerificationError,
  verifyCallback,
  verifyCallbackEffect,
  verifyCallbackEvent,
  type VerifiedCallback,
  type VerifyOptions
} from "./api/VerifyCallback.js"
/** The HTTP edge's limits kept for every node on one database: rate-limit buckets, places of held requests. */
export * as SharedLimits from "./services/SharedLimits.js"
/** Changes of tasks as they are written, for waiters (`?wait=`, events). */
export * as TaskChanges from "./services/TaskChanges.js"
/** Engine nudges. */
export * as TaskEvents from "./services/TaskEvents.js"
/** Submit and query. */
export * from "./tasks/TaskService.js"
/** The use cases with no scheduler in this process: nothing woken, tasks not billed, keys in memory. */
export * as TaskServiceAlone from "./tasks/TaskServiceAlone.js"
/** The one write path of task state (transition, callback owed, both written). */
export * as TaskWrites from "./tasks/TaskWrites.js"
/** The task store. */
export * as TaskStore from "./services/TaskStore.js"
/** The state machine. */
export * as Transition from "./domain/Transition.js"
/** What happens to a task on an event: the write, what follows it, what it owes. */
export * as Lifecycle from "./domain/Lifecycle.js"
/** Conversions of input media (WebP to JPEG). */
export * as Transcoder from "./services/Transcoder.js"
/** Upstream providers. */
export * as Upstream from "./services/Upstream.js"
/** Which client URLs are acceptable. */
export * as UrlPolicy from "./domain/UrlPolicy.js"
/** What an operator does (admin API, console, admin CLI), audited. */
export * as AdminService from "./admin/AdminService.js"
/** The AdminService over the backends and the use cases, every action audited. */
export * as AdminOperations from "./admin/Operations.js"
/** The admin keys' format: `mga_`, with the customer keys' checksum. */
export * as AdminKeyFormat from "./admin/AdminKeyFormat.js"
/** Admin keys, apart from the accounts' keys. */
export * as AdminKeys from "./services/AdminKeys.js"
/** The audit log of admin actions. */
export * as AuditLog from "./services/AuditLog.js"
/** Authentication of the admin API. */
export * as AdminAuth from "./api/AdminAuth.js"
/** The admin API (`/api/v1/admin/...`): its groups, request shapes (`Requests`) and answers (`Wire`). */
export * as AdminApi from "./api/AdminApi.js"
/** The aggregate reads behind usage reports, the overview and the providers page. */
export * as UsageStore from "./services/UsageStore.js"
/** Usage reports: the window, the figures, CSV. */
export * as Usage from "./tasks/Usage.js"
/** The usage store's reads computed from records in hand (the memory backend). */
export * as UsageRecords from "./tasks/UsageRecords.js"
/** The operator's overview and providers page. */
export * as Insights from "./tasks/Insights.js"
/** The usage reports' and the operator's insights' endpoints. */
export * as UsageApi from "./api/UsageApi.js"
/** Uploaded input files: their metadata (the bytes are in the MediaStore). */
export * as Uploads from "./services/Uploads.js"
/** The files endpoints (uploads). */
export * as FilesApi from "./api/FilesApi.js"
/** Uploads: the use case of the files endpoints (upload, read, delete, the expiry sweep). */
export * as Files from "./tasks/Files.js"
