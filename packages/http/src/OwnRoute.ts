/**
 * What the routes answered beside HttpApi's router (`QueryRoute`, `SubmitRoute`) share: the
 * shape of such a route, and the way HttpApi's route runs an endpoint, rebuilt from its pieces.
 */
import type * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApp from "@effect/platform/HttpApp"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type { AdminKeys } from "@mediagate/core"
import { Accounts, TaskService } from "@mediagate/core"
import { Context, Effect, Option, Tracer } from "effect"
import * as Auth from "./Auth.js"

/** A route beside HttpApi's router: it answers the requests it takes, and gives every other to `fallback` (HttpApi). */
export type OwnRoute<Failure> = <E, R>(
  request: HttpServerRequest.HttpServerRequest,
  fallback: HttpApp.Default<E, R>
) => HttpApp.Default<E | Failure, R>

/**
 * The endpoint at `route` as HttpApi's route runs it: the Authorization middleware
 * (`authenticated`, the account), then `handler`, interruptible, with the route's name on the
 * request's span when it has one. The failures are the handler's and the middleware's;
 * HttpApi would encode them as the envelope's middleware answers them, around this.
 */
export const run = <Failure>(
  route: string,
  authenticated: Effect.Effect<Accounts.Account, Failure>,
  handler: (account: Accounts.Account) => Effect.Effect<HttpServerResponse.HttpServerResponse, Failure>
): Effect.Effect<HttpServerResponse.HttpServerResponse, Failure> => {
  const answer = Effect.interruptible(Effect.flatMap(authenticated, handler))
  return Effect.withFiberRuntime((fiber) => {
    const span = Context.getOption(fiber.currentContext, Tracer.ParentSpan)
    if (Option.isSome(span) && span.value._tag === "Span") span.value.attribute("http.route", route)
    return answer
  })
}

/** What a route is made of: the use cases, and the Authorization middleware's function. */
export interface Pieces {
  readonly tasks: TaskService
  readonly authenticate: Effect.Effect.Success<typeof Auth.authenticator>
}

/** What making a route needs: the use cases, the accounts and admin keys (authentication), and the router, which it reads. */
export type Requirements = TaskService | Accounts.Accounts | AdminKeys.AdminKeys | HttpApiBuilder.Router

/** A route made by `build` from the use cases and the Authorization middleware's function (`Pieces`), and what it reads of the router. */
export const make = <Failure>(
  build: (pieces: Pieces) => Effect.Effect<OwnRoute<Failure>, never, HttpApiBuilder.Router>
): Effect.Effect<OwnRoute<Failure>, never, Requirements> =>
  Effect.flatMap(Effect.all({ tasks: TaskService, authenticate: Auth.authenticator }), build)
