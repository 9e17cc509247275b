/**
 * Bearer-key authentication (spec section 5).
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

/** The caller's account from the request's Authorization header, or none. */
export const authenticateRequest = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts.Accounts
    const key = bearerKey(request.headers["authorization"])
    if (Option.isNone(key)) return Option.none<Accounts.Account>()
    return yield* accounts.authenticate(key.value).pipe(Effect.orDie)
  })

/** The Authorization middleware of the API: 401 envelope unless the key names an account. */
export const layer: Layer.Layer<Api.Authorization, never, Accounts.Accounts> = Layer.effect(
  Api.Authorization,
  Effect.gen(function*() {
    const accounts = yield* Accounts.Accounts
    return {
      // The framework hands us the header minus its first seven characters; we read the
      // header ourselves so that only a real "Bearer <key>" form is accepted.
      bearer: () =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const account = yield* authenticateRequest(request).pipe(
            Effect.provideService(Accounts.Accounts, accounts)
          )
          return yield* Option.match(account, {
            onNone: () => Effect.fail(Api.unauthorized()),
            onSome: Effect.succeed
          })
        })
    }
  })
)
