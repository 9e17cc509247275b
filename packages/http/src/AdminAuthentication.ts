/**
 * Authentication of the admin API (`/api/v1/admin/...`, `AdminAuth.AdminAuthorization`): an
 * active admin key passes and is the request's `CurrentAdmin`; a customer key is 403 (it is
 * known, and may not do this); anything else, or no key, is 401. A customer path answers an
 * admin key 403 the other way round (`Auth`). Failed sign-ins count against the client's
 * address (`MediagateHttp.httpApp`, `AuthFailures.adminLimit`).
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Accounts, AdminAuth, AdminKeys, AdminService, Api } from "@mediagate/core"
import { Clock, Effect, Layer, Option } from "effect"
import { bearerKey } from "./Auth.js"

/** The 403 of a customer key on an admin path. */
export const customerKeyMessage = "this is an account's API key; the admin API takes an admin key"

/** 403 for a customer key on an admin path. */
export const customerKeyRefused = () => new Api.Forbidden({ code: 403, msg: customerKeyMessage })

/**
 * The admin key of the request's Authorization header; 401 unless it is an active admin key,
 * 403 when it is a customer key. A store that cannot answer dies here, as in `Auth`, and the
 * envelope answers it 503 or 500.
 */
export const authenticateAdmin: Effect.Effect<
  AdminKeys.AdminKeyInfo,
  Api.Unauthorized | Api.Forbidden,
  HttpServerRequest.HttpServerRequest | AdminKeys.AdminKeys | Accounts.Accounts
> = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const key = bearerKey(request.headers["authorization"])
  if (Option.isNone(key)) return yield* Effect.fail(Api.unauthorized())
  const adminKeys = yield* AdminKeys.AdminKeys
  const now = yield* Clock.currentTimeMillis
  const admin = yield* adminKeys.authenticate(key.value, now).pipe(Effect.catchTag("StoreError", Effect.die))
  if (Option.isSome(admin)) return admin.value
  const accounts = yield* Accounts.Accounts
  const account = yield* accounts.authenticate(key.value).pipe(Effect.catchTag("StoreError", Effect.die))
  return yield* Effect.fail(Option.isSome(account) ? customerKeyRefused() : Api.unauthorized())
})

/** The AdminAuthorization middleware of the admin API. */
export const layer: Layer.Layer<AdminAuth.AdminAuthorization, never, AdminKeys.AdminKeys | Accounts.Accounts> = Layer.effect(
  AdminAuth.AdminAuthorization,
  Effect.gen(function*() {
    const context = yield* Effect.context<AdminKeys.AdminKeys | Accounts.Accounts>()
    return {
      // As in `Auth`: the header is read again so that only a real "Bearer <key>" form counts.
      adminBearer: () => Effect.provide(authenticateAdmin, context)
    }
  })
)

/** The admin's actor for `AdminService`: its admin key. */
export const currentActor = Effect.map(AdminService.CurrentAdmin, (admin) => ({ kind: "admin_key" as const, id: admin.id }))
