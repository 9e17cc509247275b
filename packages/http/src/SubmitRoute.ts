/**
 * A submit (`POST /api/v1/task/submit`, no query string, no Idempotency-Key) answered beside
 * HttpApi's router, as `QueryRoute` answers a query: HttpApi's way to the handler (the
 * router, the endpoint's header schema, three copies of the request's context) was about
 * a quarter of a submit's Effect steps (docs/benchmarks.md, "Issue 37: the submit's own
 * route").
 *
 * The route is HttpApi's, from the same pieces: the Authorization middleware's function
 * (`Auth.authenticator`), the handler's body read, decoding, use case and answer
 * (`Handlers.submitAnswer`). Its failures are answered by the envelope's middleware, as
 * HttpApi's encoding of them would be, byte for byte (`test/submit-path.test.ts`). A
 * request it does not take (another method or path, a query string, an Idempotency-Key,
 * whose header schema HttpApi decodes, or a router with something mounted over the path or
 * a second route for it) goes to HttpApi untouched.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type { Api } from "@mediagate/core"
import { Chunk, Effect } from "effect"
import * as Handlers from "./Handlers.js"
import * as OwnRoute from "./OwnRoute.js"
import { apiPrefix } from "./Paths.js"

/** The submit's path, as HttpApi's router has it (the span's `http.route` too). */
const path = `${apiPrefix}task/submit`

/**
 * Whether the router answers the submit's path only with HttpApi's route: nothing mounted
 * over it (a mount is tried before the routes) and no second route that takes a POST there.
 */
const routerLeavesIt = Effect.map(HttpApiBuilder.Router.router, (router) => {
  let posts = 0
  Chunk.forEach(router.routes, (route) => {
    if (route.path === path && (route.method === "POST" || route.method === "*")) posts++
  })
  let mounted = false
  Chunk.forEach(router.mounts, ([prefix]) => {
    if (path === prefix || path.startsWith(`${prefix}/`)) mounted = true
  })
  return posts === 1 && !mounted
})

/** How the route fails: as HttpApi's submit endpoint does (and its Authorization middleware), each answered by the envelope's middleware. */
export type Failure =
  | Api.BadRequest
  | Api.Unauthorized
  | Api.Forbidden
  | Api.ModerationRejectedResponse
  | Api.Conflict
  | Api.PayloadTooLarge
  | Api.RequestTimeout
  | Api.UnprocessableEntity
  | Api.ServiceUnavailable
  | Api.InternalServerError

/**
 * A function that answers a plain submit as HttpApi's route would, and every other request
 * with `fallback`.
 */
export const make: Effect.Effect<OwnRoute.OwnRoute<Failure>, never, OwnRoute.Requirements> = OwnRoute.make<Failure>(({ authenticate, tasks }) =>
  Effect.map(routerLeavesIt, (takes) => (request, fallback) =>
    // With no Idempotency-Key, the endpoint's header schema has nothing to decode.
    !takes || request.method !== "POST" || request.url !== path || request.headers["idempotency-key"] !== undefined
      ? fallback
      : OwnRoute.run<Failure>(path, authenticate(request), (account) => Handlers.submitAnswer(tasks, account, request, undefined)))
)
