/**
 * The use cases with no scheduler in this process, for tests, tools and an API node whose
 * tasks another node runs: every collaborator the standard composition (`Mediagate.services`)
 * makes is chosen here, and each choice says what is left out. Nothing is woken (no engine,
 * no deliverer here: they find the work at their next scan), tasks are not billed
 * (`Ledger.layerUnbilled`), Idempotency-Keys live in memory, and the waiters see this
 * service's own writes at once (one `TaskChanges` for both).
 *
 * The API over memory with no engine, where a task stays PENDING until a request changes it:
 * `TaskServiceAlone.layer.pipe(Layer.provide([MemoryTaskStore.layer, Ids.layer,
 * ModelCatalog.layer, Moderation.layerAllowAll, TaskServiceAlone.noUpstream]))`.
 */
import { Effect, Layer } from "effect"
import { UpstreamError } from "../domain/Errors.js"
import type { Ids } from "../domain/Ids.js"
import type { ModelCatalog } from "../models/ModelCatalog.js"
import * as IdempotencyKeys from "../services/IdempotencyKeys.js"
import * as Ledger from "../services/Ledger.js"
import type { Moderation } from "../services/Moderation.js"
import * as TaskChanges from "../services/TaskChanges.js"
import { CallbackWakeup, TaskWakeup } from "../services/TaskEvents.js"
import type { TaskStore } from "../services/TaskStore.js"
import { Upstream } from "../services/Upstream.js"
import { TaskService } from "./TaskService.js"
import * as TaskWrites from "./TaskWrites.js"

/**
 * The write path over the TaskStore in context, with the choices above (not billed, no
 * deliverer to wake), for an engine run without the use cases (tests, benchmarks).
 */
export const writes: Layer.Layer<TaskWrites.TaskWrites, never, TaskStore | Ids> = TaskWrites.layer.pipe(
  Layer.provide([TaskChanges.layer, Ledger.layerUnbilled, CallbackWakeup.layerNone])
)

/** TaskService over the stores, the catalog, moderation and the upstream in context, with the choices above. */
export const layer: Layer.Layer<TaskService, never, TaskStore | Ids | ModelCatalog | Moderation | Upstream> = TaskService.Default.pipe(
  Layer.provide(writes),
  // The same TaskChanges as `writes` (layers are memoised by reference): waiters see its writes.
  Layer.provide([TaskChanges.layer, Ledger.layerUnbilled, IdempotencyKeys.layerMemory, TaskWakeup.layerNone, CallbackWakeup.layerNone])
)

/**
 * TaskService as `layer` but billed on the Ledger in context: for a tool in a process of its
 * own whose actions move money (the admin CLI's cancel releases a hold), with the engine and
 * the deliverer elsewhere finding its writes at their next scan.
 */
export const layerBilled: Layer.Layer<TaskService, never, TaskStore | Ids | Ledger.Ledger | ModelCatalog | Moderation | Upstream> =
  TaskService.Default.pipe(
    Layer.provide(TaskWrites.layer.pipe(Layer.provide([TaskChanges.layer, CallbackWakeup.layerNone]))),
    // The same TaskChanges as the write path's (layers are memoised by reference): waiters see its writes.
    Layer.provide([TaskChanges.layer, IdempotencyKeys.layerMemory, TaskWakeup.layerNone, CallbackWakeup.layerNone])
  )

/**
 * An upstream that runs nothing, for a composition whose jobs never run here: tasks name no
 * provider, a cancel has no job to stop, no provider webhook is genuine, and a submit or
 * poll fails permanently.
 */
export const noUpstream: Layer.Layer<Upstream> = Layer.succeed(Upstream, {
  submit: () => Effect.fail(new UpstreamError({ message: "no upstream in this composition", reason: null, retryable: false })),
  poll: () => Effect.fail(new UpstreamError({ message: "no upstream in this composition", reason: null, retryable: false }))
})
