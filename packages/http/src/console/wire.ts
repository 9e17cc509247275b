/**
 * What the console sends and reads: the admin API's paths, and the `data` of its answers as
 * the API's own Schemas type them (`typeof X.Type`), so a change to the API that the page does
 * not follow fails `tsc -b`.
 */
import type { AdminApi, UsageApi } from "@mediagate/core"

/** The admin API's paths the console calls. */
export const paths = {
  accounts: "/api/v1/admin/accounts",
  account: (id: string) => "/api/v1/admin/accounts/" + encodeURIComponent(id),
  credits: (id: string) => "/api/v1/admin/accounts/" + encodeURIComponent(id) + "/credits",
  secrets: (id: string) => "/api/v1/admin/accounts/" + encodeURIComponent(id) + "/secrets",
  rotateSecret: (id: string) => "/api/v1/admin/accounts/" + encodeURIComponent(id) + "/secrets/rotate",
  revokeKey: (id: string) => "/api/v1/admin/keys/" + encodeURIComponent(id) + "/revoke",
  tasks: "/api/v1/admin/tasks",
  task: (id: string) => "/api/v1/admin/tasks/" + encodeURIComponent(id),
  cancel: (id: string) => "/api/v1/admin/tasks/" + encodeURIComponent(id) + "/cancel",
  redeliver: (id: string) => "/api/v1/admin/tasks/" + encodeURIComponent(id) + "/callbacks/redeliver",
  audit: "/api/v1/admin/audit",
  stats: "/api/v1/admin/stats",
  providers: "/api/v1/admin/providers"
}

type Data<S extends { readonly Type: { readonly data: unknown } }> = S["Type"]["data"]

export type AccountList = Data<typeof AdminApi.Wire.AccountsResponse>
export type AccountData = Data<typeof AdminApi.Wire.AccountResponse>
export type KeyView = AccountData["keys"][number]
export type CreditsData = Data<typeof AdminApi.Wire.CreditsResponse>
export type AddCreditsData = Data<typeof AdminApi.Wire.CreditsAddedResponse>
export type SecretsData = Data<typeof AdminApi.Wire.SecretsResponse>
export type KeyData = Data<typeof AdminApi.Wire.KeyResponse>
export type TaskList = Data<typeof AdminApi.Wire.AdminTaskListResponse>
export type TaskSummary = TaskList["tasks"][number]
export type TaskDetailData = Data<typeof AdminApi.Wire.TaskDetailResponse>
export type CallbackView = TaskDetailData["callbacks"][number]
export type RedeliverData = Data<typeof AdminApi.Wire.AdminCallbacksResponse>
export type AuditData = Data<typeof AdminApi.Wire.AuditResponse>
export type AuditEntryView = AuditData["entries"][number]

export type StatsData = Data<typeof UsageApi.StatsResponse>
export type ProvidersData = Data<typeof UsageApi.ProvidersResponse>
