/**
 * Handlers of the admin API's tasks across accounts ("adminTasks") and of its admin keys and
 * audit log ("adminAccess"), over `AdminService`. The shared pieces (errors, bodies, expiry)
 * are `AdminHandlers`'.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import { AdminApi, AdminAuth, AdminService, Api, Ids } from "@mediagate/core"
import type { Layer } from "effect"
import { Clock, Effect, Redacted } from "effect"
import { expiryOf, adminErrors, readBody } from "./AdminHandlers.js"
import { currentActor } from "./AdminAuthentication.js"

const { Requests, Wire } = AdminApi

/** The task list's parameters as `AdminService.listTasks` takes them. */
const listOptions = (params: AdminApi.Requests.AdminTaskListParams) => ({
  limit: params.limit ?? Api.defaultPageSize,
  cursor: params.cursor,
  filter: {
    statuses: params.status,
    model: params.model,
    createdAfter: params.created_after,
    createdBefore: params.created_before,
    ownerId: params.account === undefined ? undefined : Ids.AccountId.make(params.account),
    provider: params.provider
  }
})

/** The handlers of the "adminTasks" group: every account's tasks, a task's detail, cancel and redeliver. */
export const tasksLayer: Layer.Layer<
  HttpApiGroup.ApiGroup<"mediagate", "adminTasks">,
  never,
  AdminService.AdminService | AdminAuth.AdminAuthorization
> = HttpApiBuilder.group(Api.MediagateApi, "adminTasks", (handlers) =>
  Effect.gen(function*() {
    const admin = yield* AdminService.AdminService
    const taskId = (id: string) => Ids.TaskId.make(id)
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const page = yield* admin.listTasks(listOptions(urlParams))
          return Api.ok({ tasks: page.tasks.map(Wire.adminTaskWire), next_cursor: page.nextCursor })
        }).pipe(adminErrors))
      .handle("show", ({ path }) => Effect.map(admin.task(taskId(path.taskId)), (detail) => Api.ok(Wire.taskDetailWire(detail))).pipe(adminErrors))
      .handle("cancel", ({ path }) =>
        Effect.gen(function*() {
          const task = yield* admin.cancelTask(yield* currentActor, taskId(path.taskId))
          return Api.ok(Wire.adminTaskWire(task))
        }).pipe(adminErrors))
      .handle("redeliver", ({ path }) =>
        Effect.gen(function*() {
          const callbacks = yield* admin.redeliver(yield* currentActor, taskId(path.taskId))
          return Api.ok(Wire.adminCallbacksWire(callbacks))
        }).pipe(adminErrors))
  }))

/** The handlers of the "adminAccess" group: admin keys and the audit log. */
export const accessLayer: Layer.Layer<
  HttpApiGroup.ApiGroup<"mediagate", "adminAccess">,
  never,
  AdminService.AdminService | AdminAuth.AdminAuthorization
> = HttpApiBuilder.group(Api.MediagateApi, "adminAccess", (handlers) =>
  Effect.gen(function*() {
    const admin = yield* AdminService.AdminService
    return handlers
      .handle("listAdminKeys", () =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          return Api.ok({ admin_keys: (yield* admin.listAdminKeys).map((key) => Wire.adminKeyWire(key, now)) })
        }).pipe(adminErrors))
      .handleRaw("createAdminKey", ({ request }) =>
        Effect.gen(function*() {
          const body = yield* readBody(request, Requests.CreateAdminKeyRequest)
          const expiresAt = yield* expiryOf("expires_at", body.expires_at)
          const created = yield* admin.createAdminKey(yield* currentActor, { label: body.label?.trim() ?? null, expiresAt })
          return Api.ok({ key: Redacted.value(created.key), info: Wire.adminKeyWire(created.info, yield* Clock.currentTimeMillis) })
        }).pipe(adminErrors))
      .handle("revokeAdminKey", ({ path }) =>
        Effect.gen(function*() {
          const revoked = yield* admin.revokeAdminKey(yield* currentActor, path.adminKeyId)
          return Api.ok(Wire.adminKeyWire(revoked, yield* Clock.currentTimeMillis))
        }).pipe(adminErrors))
      .handle("audit", ({ urlParams }) =>
        Effect.gen(function*() {
          const page = yield* admin.audit({
            limit: urlParams.limit ?? Requests.defaultAuditPage,
            cursor: urlParams.cursor,
            action: urlParams.action,
            target: urlParams.target
          })
          return Api.ok({ entries: page.entries.map(Wire.auditEntryWire), next_cursor: page.nextCursor })
        }).pipe(adminErrors))
  }))
