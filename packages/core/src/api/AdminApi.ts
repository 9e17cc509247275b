/**
 * The admin API (`/api/v1/admin/...`): what an operator does, over `AdminService`, the same
 * service the admin CLI and the console call. Every endpoint takes an admin key
 * (`AdminAuth.AdminAuthorization`): a customer key is 403, no key or an unknown one 401. Its
 * groups share the OpenAPI tag `admin`. Request shapes are in AdminRequests, answers in
 * AdminWire.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { AdminAuthorization } from "./AdminAuth.js"
import {
  AccountIdPath,
  AddCreditsRequest,
  AdminKeyIdPath,
  AdminTaskIdPath,
  AdminTaskListParams,
  AuditParams,
  CreateAccountRequest,
  CreateAdminKeyRequest,
  CreateKeyRequest,
  CreditsParams,
  KeyIdPath,
  RotateSecretRequest
} from "./AdminRequests.js"
import * as Wire from "./AdminWire.js"
import { BadRequest, Conflict, NotFound, PayloadTooLarge, RequestTimeout } from "./Envelope.js"

/** The answers' shapes and the functions that make them. */
export * as Wire from "./AdminWire.js"
/** The requests' shapes. */
export * as Requests from "./AdminRequests.js"

/** The OpenAPI tag of every admin endpoint. */
export const tag = "admin"

const additive = "Additive: not in the spec."

/** Said of every admin endpoint, in its description. */
const adminOnly = `${additive} Takes an admin key; a customer key is 403.`

/** Said of an action: it writes the audit log. */
const audited = "Recorded in the audit log with the admin key, the time and the target's state before and after."

const tagDescription =
  "The operator's API: accounts, keys and their scopes, signing secrets, credits, tasks across accounts, admin keys and the audit log. " +
  "Every endpoint takes an admin key (`npm run admin -- key create --admin`, or `MEDIAGATE_ADMIN_KEY`); a customer key is answered 403."

/** Accounts, their keys, signing secrets and credits. */
export class AdminAccountsGroup extends HttpApiGroup.make("adminAccounts")
  .add(
    HttpApiEndpoint.get("list", "/admin/accounts")
      .addSuccess(Wire.AccountsResponse)
      .annotate(OpenApi.Summary, "List every account with its keys and balance")
      .annotate(OpenApi.Description, `${adminOnly} Oldest first.`)
  )
  .add(
    HttpApiEndpoint.post("create", "/admin/accounts")
      .setPayload(CreateAccountRequest)
      .addSuccess(Wire.CreatedAccountResponse)
      .addError(BadRequest)
      .addError(PayloadTooLarge)
      .addError(RequestTimeout)
      .annotate(OpenApi.Summary, "Create an account with its first key")
      .annotate(OpenApi.Description, `${adminOnly} The key and the signing secret are in this answer only. ${audited}`)
  )
  .add(
    HttpApiEndpoint.get("show", "/admin/accounts/:accountId")
      .setPath(AccountIdPath)
      .addSuccess(Wire.AccountResponse)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Show an account with its keys, their scopes, and its balance")
      .annotate(OpenApi.Description, `${adminOnly} An unknown account is 404.`)
  )
  .add(
    HttpApiEndpoint.post("createKey", "/admin/accounts/:accountId/keys")
      .setPath(AccountIdPath)
      .setPayload(CreateKeyRequest)
      .addSuccess(Wire.CreatedKeyResponse)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(PayloadTooLarge)
      .addError(RequestTimeout)
      .annotate(OpenApi.Summary, "Create another key for an account, with its scope")
      .annotate(
        OpenApi.Description,
        `${adminOnly} A scope may name the models the key may use, a monthly cap and a rate limit; a body of \`{}\` makes a key with none. The key is in this answer only. ${audited}`
      )
  )
  .add(
    HttpApiEndpoint.post("revokeKey", "/admin/keys/:keyId/revoke")
      .setPath(KeyIdPath)
      .addSuccess(Wire.KeyResponse)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Revoke an account's key")
      .annotate(
        OpenApi.Description,
        `${adminOnly} The key stops working at once on this server (within 5 seconds on the others); revoking a revoked key keeps its first time. ${audited}`
      )
  )
  .add(
    HttpApiEndpoint.get("secrets", "/admin/accounts/:accountId/secrets")
      .setPath(AccountIdPath)
      .addSuccess(Wire.SecretsResponse)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Show an account's callback signing secrets")
      .annotate(OpenApi.Description, `${adminOnly} The current secret, and the previous one while it still signs.`)
  )
  .add(
    HttpApiEndpoint.post("rotateSecret", "/admin/accounts/:accountId/secrets/rotate")
      .setPath(AccountIdPath)
      .setPayload(RotateSecretRequest)
      .addSuccess(Wire.SecretsResponse)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(PayloadTooLarge)
      .addError(RequestTimeout)
      .annotate(OpenApi.Summary, "Replace an account's callback signing secret")
      .annotate(
        OpenApi.Description,
        `${adminOnly} The old secret keeps signing beside the new one for the grace period (Standard Webhooks sends a signature for each). ${audited}`
      )
  )
  .add(
    HttpApiEndpoint.post("addCredits", "/admin/accounts/:accountId/credits")
      .setPath(AccountIdPath)
      .setPayload(AddCreditsRequest)
      .addSuccess(Wire.CreditsAddedResponse)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Conflict)
      .addError(PayloadTooLarge)
      .addError(RequestTimeout)
      .annotate(OpenApi.Summary, "Add US dollars to an account's credits")
      .annotate(
        OpenApi.Description,
        `${adminOnly} With an entry_id the top-up is safe to retry: sent again, it credits nothing and says already_credited; an entry_id another entry has is 409. ${audited}`
      )
  )
  .add(
    HttpApiEndpoint.get("credits", "/admin/accounts/:accountId/credits")
      .setPath(AccountIdPath)
      .setUrlParams(CreditsParams)
      .addSuccess(Wire.CreditsResponse)
      .addError(BadRequest)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Show an account's balance and latest ledger entries")
      .annotate(OpenApi.Description, `${adminOnly} The figures the admin CLI's credits show prints.`)
  )
  .middleware(AdminAuthorization)
  .prefix("/api/v1")
  .annotate(OpenApi.Title, tag)
  .annotate(OpenApi.Description, tagDescription)
{}

/** Tasks across accounts. */
export class AdminTasksGroup extends HttpApiGroup.make("adminTasks")
  .add(
    HttpApiEndpoint.get("list", "/admin/tasks")
      .setUrlParams(AdminTaskListParams)
      .addSuccess(Wire.AdminTaskListResponse)
      .addError(BadRequest)
      .annotate(OpenApi.Summary, "List every account's tasks, newest first")
      .annotate(
        OpenApi.Description,
        `${adminOnly} Filters by account, model, status, provider and creation time; each parameter may be given once, and one not listed here is 400.`
      )
  )
  .add(
    HttpApiEndpoint.get("show", "/admin/tasks/:taskId")
      .setPath(AdminTaskIdPath)
      .addSuccess(Wire.TaskDetailResponse)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Show a task with its attempts, progress, callbacks and ledger entries")
      .annotate(OpenApi.Description, `${adminOnly} Each callback comes with every delivery attempt and the receiver's answer.`)
  )
  .add(
    HttpApiEndpoint.post("cancel", "/admin/tasks/:taskId/cancel")
      .setPath(AdminTaskIdPath)
      .addSuccess(Wire.AdminTaskResponse)
      .addError(NotFound)
      .addError(Conflict)
      .annotate(OpenApi.Summary, "Cancel a task that has not ended")
      .annotate(OpenApi.Description, `${adminOnly} By the owner's rules: a task that has ended is 409. ${audited}`)
  )
  .add(
    HttpApiEndpoint.post("redeliver", "/admin/tasks/:taskId/callbacks/redeliver")
      .setPath(AdminTaskIdPath)
      .addSuccess(Wire.AdminCallbacksResponse)
      .addError(NotFound)
      .addError(Conflict)
      .annotate(OpenApi.Summary, "Send an ended task's callback again")
      .annotate(
        OpenApi.Description,
        `${adminOnly} By the owner's rules: sent now with the same webhook-id; a task that has not ended, or has no callback, is 409. ${audited}`
      )
  )
  .middleware(AdminAuthorization)
  .prefix("/api/v1")
  .annotate(OpenApi.Title, tag)
  .annotate(OpenApi.Description, tagDescription)
{}

/** Admin keys and the audit log. */
export class AdminAccessGroup extends HttpApiGroup.make("adminAccess")
  .add(
    HttpApiEndpoint.get("listAdminKeys", "/admin/admin-keys")
      .addSuccess(Wire.AdminKeysResponse)
      .annotate(OpenApi.Summary, "List the admin keys")
      .annotate(
        OpenApi.Description,
        `${adminOnly} Oldest first, hints only. A key given as MEDIAGATE_ADMIN_KEY is configuration, not stored: it is not listed.`
      )
  )
  .add(
    HttpApiEndpoint.post("createAdminKey", "/admin/admin-keys")
      .setPayload(CreateAdminKeyRequest)
      .addSuccess(Wire.CreatedAdminKeyResponse)
      .addError(BadRequest)
      .addError(PayloadTooLarge)
      .addError(RequestTimeout)
      .annotate(OpenApi.Summary, "Create an admin key")
      .annotate(OpenApi.Description, `${adminOnly} The key is in this answer only; a body of \`{}\` makes one with no label or expiry. ${audited}`)
  )
  .add(
    HttpApiEndpoint.post("revokeAdminKey", "/admin/admin-keys/:adminKeyId/revoke")
      .setPath(AdminKeyIdPath)
      .addSuccess(Wire.AdminKeyResponse)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Revoke an admin key")
      .annotate(OpenApi.Description, `${adminOnly} It stops working at once; revoking a revoked key keeps its first time. ${audited}`)
  )
  .add(
    HttpApiEndpoint.get("audit", "/admin/audit")
      .setUrlParams(AuditParams)
      .addSuccess(Wire.AuditResponse)
      .addError(BadRequest)
      .annotate(OpenApi.Summary, "Read the audit log, newest first")
      .annotate(
        OpenApi.Description,
        `${adminOnly} Every action of the admin API, the console and the admin CLI: who (admin key or CLI user), when, what, to which target, and its state before and after. Filters by action and target.`
      )
  )
  .middleware(AdminAuthorization)
  .prefix("/api/v1")
  .annotate(OpenApi.Title, tag)
  .annotate(OpenApi.Description, tagDescription)
{}
