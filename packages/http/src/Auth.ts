/**
 * Bearer-key authentication (spec section 5), in one place: the API middleware, the
 * OpenAPI route and the answers for unknown routes all use `authenticate`.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Accounts, AdminKeys, Api } from "@mediagate/core"
import type { Context } from "effect"
import { Clock, Effect, Layer, Option, Redacted } from "effect"
import * as RateLimit from "./RateLimit.js"

const bearerPattern = /^Bearer[ \t]+([^\s]+)[ \t]*$/i

/** The key of an `Authorization: Bearer <key>` header, if the header has that form. */
export const bearerKey = (header: string | undefined): Option.Option<Redacted.Redacted<string>> => {
  const match = header === undefined ? null : bearerPattern.exec(header)
  return match === null ? Option.none() : Option.some(Redacted.make(match[1]!))
}

/** The 403 of an admin key on a customer path. */
export const adminKeyMessage = "this is an admin key; it opens only the admin API (/api/v1/admin/...)"

/** The services authentication reads, found once (`layer`) or from the request's context (`authenticate`). */
interface Keys {
  readonly accounts: Context.Tag.Service<Accounts.Accounts>
  readonly adminKeys: Context.Tag.Service<AdminKeys.AdminKeys>
  /** The server's rate limit, told a scoped key's own rate (`ownRateLimit`); none without one. */
  readonly limit: Option.Option<Context.Tag.Service<RateLimit.RateLimit>>
}

/** The services authentication reads, from the context. */
const keys = Effect.all({ accounts: Accounts.Accounts, adminKeys: AdminKeys.AdminKeys, limit: Effect.serviceOption(RateLimit.RateLimit) })

/** `authenticate` of a request over services already found (`authenticator`). */
const authenticateRequest = ({ accounts, adminKeys, limit }: Keys) =>
(request: HttpServerRequest.HttpServerRequest): Effect.Effect<Accounts.Account, Api.Unauthorized | Api.Forbidden> => {
  const key = bearerKey(request.headers["authorization"])
  if (Option.isNone(key)) return Effect.fail(Api.unauthorized())
  // The middleware can only fail with Unauthorized (it is the one failure its endpoints
  // declare); an accounts store that cannot answer dies here, and the envelope's middleware
  // answers it 503 with Retry-After when the database was out of reach (StoreFailures), else 500.
  return Effect.flatMap(accounts.authenticate(key.value).pipe(Effect.catchTag("StoreError", Effect.die)), (account) =>
    Option.isSome(account)
      ? Effect.as(ownRateLimit(limit, key.value, account.value), account.value)
      : Effect.flatMap(
        Effect.flatMap(Clock.currentTimeMillis, (now) => adminKeys.authenticate(key.value, now).pipe(Effect.catchTag("StoreError", Effect.die))),
        (admin) => Effect.fail(Option.isSome(admin) ? new Api.Forbidden({ code: 403, msg: adminKeyMessage }) : Api.unauthorized())
      ))
}

/** `authenticate` over services already found: the API's middleware runs it on every request. */
const authenticateWith = (
  found: Keys
): Effect.Effect<Accounts.Account, Api.Unauthorized | Api.Forbidden, HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, authenticateRequest(found))

/** `authenticate` of a request given to it, its services found once: the query's own route (`QueryRoute`). */
export const authenticator: Effect.Effect<
  (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<Accounts.Account, Api.Unauthorized | Api.Forbidden>,
  never,
  Accounts.Accounts | AdminKeys.AdminKeys
> = Effect.map(keys, authenticateRequest)

/**
 * The caller's account from the request's Authorization header; 401 unless the key names one,
 * 403 for an admin key (never taken for a customer's: it is looked up only when no account has it).
 */
export const authenticate: Effect.Effect<
  Accounts.Account,
  Api.Unauthorized | Api.Forbidden,
  HttpServerRequest.HttpServerRequest | Accounts.Accounts | AdminKeys.AdminKeys
> = Effect.flatMap(keys, authenticateWith)

/**
 * A scoped key's own rate limit, told to the server's rate limit (when the composition has
 * one, `RateLimit`): from the key's next request on, it replaces the server's rate for it.
 * The rate limit takes the key's requests by the digest the HTTP app gives it (`keyDigest`).
 */
const ownRateLimit = (
  limit: Option.Option<Context.Tag.Service<RateLimit.RateLimit>>,
  key: Redacted.Redacted<string>,
  account: Accounts.Account
) => {
  const rate = account.scope?.rateLimit
  if (rate == null || Option.isNone(limit) || limit.value.ownLimit === undefined) return Effect.void
  return limit.value.ownLimit(RateLimit.keyDigest(Redacted.value(key)), rate)
}

/**
 * The Authorization middleware of the API. Its services are found once, when the API is
 * built: each request only reads its header and looks the key up.
 */
export const layer: Layer.Layer<Api.Authorization, never, Accounts.Accounts | AdminKeys.AdminKeys> = Layer.effect(
  Api.Authorization,
  Effect.map(keys, (found) => {
    const authenticated = authenticateWith(found)
    // The framework hands us the header minus its first seven characters; `authenticateWith`
    // reads the header itself so that only a real "Bearer <key>" form is accepted.
    return { bearer: () => authenticated }
  })
)
