/**
 * Bearer-key authentication (spec section 5), in one place: the API middleware, the
 * OpenAPI route and the answers for unknown routes all use `authenticate`.
 */
import { HttpServerRequest } from "@effect/platform"
import { Accounts, AdminKeys, Api } from "@mediagate/core"
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

/**
 * The caller's account from the request's Authorization header; 401 unless the key names one,
 * 403 for an admin key (never taken for a customer's: it is looked up only when no account has it).
 */
export const authenticate: Effect.Effect<
  Accounts.Account,
  Api.Unauthorized | Api.Forbidden,
  HttpServerRequest.HttpServerRequest | Accounts.Accounts | AdminKeys.AdminKeys
> = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const key = bearerKey(request.headers["authorization"])
  if (Option.isNone(key)) return yield* Effect.fail(Api.unauthorized())
  const accounts = yield* Accounts.Accounts
  // The middleware can only fail with Unauthorized (it is the one failure its endpoints
  // declare); an accounts store that cannot answer dies here, and the envelope's middleware
  // answers it 503 with Retry-After when the database was out of reach (StoreFailures), else 500.
  const account = yield* accounts.authenticate(key.value).pipe(Effect.catchTag("StoreError", Effect.die))
  if (Option.isSome(account)) return yield* Effect.as(ownRateLimit(key.value, account.value), account.value)
  const admin = yield* (yield* AdminKeys.AdminKeys).authenticate(key.value, yield* Clock.currentTimeMillis).pipe(Effect.catchTag("StoreError", Effect.die))
  return yield* Effect.fail(Option.isSome(admin) ? new Api.Forbidden({ code: 403, msg: adminKeyMessage }) : Api.unauthorized())
})

/**
 * A scoped key's own rate limit, told to the server's rate limit (when the composition has
 * one, `RateLimit`): from the key's next request on, it replaces the server's rate for it.
 * The rate limit takes the key's requests by the digest the HTTP app gives it (`keyDigest`).
 */
const ownRateLimit = (key: Redacted.Redacted<string>, account: Accounts.Account) => {
  const rate = account.scope?.rateLimit
  if (rate == null) return Effect.void
  return Effect.flatMap(Effect.serviceOption(RateLimit.RateLimit), (limit) =>
    Option.isNone(limit) || limit.value.ownLimit === undefined
      ? Effect.void
      : limit.value.ownLimit(RateLimit.keyDigest(Redacted.value(key)), rate))
}

/** The Authorization middleware of the API. */
export const layer: Layer.Layer<Api.Authorization, never, Accounts.Accounts | AdminKeys.AdminKeys> = Layer.effect(
  Api.Authorization,
  Effect.map(Effect.context<Accounts.Accounts | AdminKeys.AdminKeys>(), (context) => ({
    // The framework hands us the header minus its first seven characters; `authenticate`
    // reads the header itself so that only a real "Bearer <key>" form is accepted.
    bearer: () => Effect.provide(authenticate, context)
  }))
)
