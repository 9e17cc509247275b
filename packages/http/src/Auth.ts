/**
 * Bearer-key authentication (spec section 5), in one place: the API middleware, the
 * OpenAPI route and the answers for unknown routes all use `authenticate`.
 */
import { HttpServerRequest } from "@effect/platform"
import { Accounts, Api } from "@mediagate/core"
import { Effect, Layer, Option, Redacted } from "effect"

const bearerPattern = /^Bearer[ \t]+([^\s]+)[ \t]*$/i

/** The key of an `Authorization: Bearer <key>` header, if the header has that form. */
export const bearerKey = (header: string | undefined): Option.Option<Redacted.Redacted<string>> => {
  const match = header === undefined ? null : bearerPattern.exec(header)
  return match === null ? Option.none() : Option.some(Redacted.make(match[1]!))
}

/** The caller's account from the request's Authorization header; 401 unless the key names one. */
export const authenticate: Effect.Effect<
  Accounts.Account,
  Api.Unauthorized,
  HttpServerRequest.HttpServerRequest | Accounts.Accounts
> = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const key = bearerKey(request.headers["authorization"])
  if (Option.isNone(key)) return yield* Effect.fail(Api.unauthorized())
  const accounts = yield* Accounts.Accounts
  // The middleware can only fail with Unauthorized (it is the one failure its endpoints
  // declare); an accounts store that cannot answer dies here, and the envelope's middleware
  // answers it 503 with Retry-After when the database was out of reach (StoreFailures), else 500.
  const account = yield* accounts.authenticate(key.value).pipe(Effect.catchTag("StoreError", Effect.die))
  return yield* Option.match(account, { onNone: () => Effect.fail(Api.unauthorized()), onSome: Effect.succeed })
})

/** The Authorization middleware of the API. */
export const layer: Layer.Layer<Api.Authorization, never, Accounts.Accounts> = Layer.effect(
  Api.Authorization,
  Effect.map(Accounts.Accounts, (accounts) => ({
    // The framework hands us the header minus its first seven characters; `authenticate`
    // reads the header itself so that only a real "Bearer <key>" form is accepted.
    bearer: () => Effect.provideService(authenticate, Accounts.Accounts, accounts)
  }))
)
