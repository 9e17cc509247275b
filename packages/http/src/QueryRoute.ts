/**
 * The query of a task (`GET /api/v1/task/{taskId}`, no parameters) answered beside HttpApi's
 * router: most of an API's requests are clients polling their tasks, and HttpApi's way to
 * the handler was two thirds of a query's Effect steps (three copies of the request's
 * context, each provided in a scope of its own: docs/benchmarks.md, "Issue 37: the query's
 * own route").
 *
 * The route is HttpApi's, from the same pieces: the endpoint's own path schema
 * (`Api.MediagateApi`), the Authorization middleware's function (`Auth.authenticator`), the
 * handler's use case and answer (`Handlers.queryAnswer`, `answerErrors`). Its failures are
 * answered by the envelope's middleware, as HttpApi's encoding of them would be, byte for
 * byte (`test/query-path.test.ts`). A request it does not take (another method, a query
 * string, an escaped or refused id, a path the router has a route of its own for) goes to
 * HttpApi untouched.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Api } from "@mediagate/core"
import { Chunk, Effect, Either, Option, Schema } from "effect"
import { answerErrors } from "./EnvelopeMiddleware.js"
import * as Handlers from "./Handlers.js"
import * as OwnRoute from "./OwnRoute.js"
import { apiPrefix } from "./Paths.js"

/** The query's path as HttpApi's router has it (the span's `http.route`). */
const route = `${apiPrefix}task/:taskId`
const prefix = `${apiPrefix}task/`

/** The endpoint's path schema, as HttpApi decodes the route's parameters with it. */
const pathSchema = (): Schema.Schema<{ readonly taskId: string }, unknown> => {
  const endpoint = (Api.MediagateApi.groups as unknown as Record<string, HttpApiGroup.HttpApiGroup.AnyWithProps | undefined>)["tasks"]?.endpoints["query"]
  if (endpoint === undefined || Option.isNone(endpoint.pathSchema)) throw new Error("the API has no query endpoint with a path schema")
  return endpoint.pathSchema.value as Schema.Schema<{ readonly taskId: string }, unknown>
}
const decodePath = Schema.decodeUnknownEither(pathSchema())

/**
 * The id of a request this route may answer: a GET of the query's path with one plain path
 * segment after it (no `%` escape, which the router would decode), no query string, and not
 * the name of a path of its own next to it (`taken`: `/api/v1/task/submit` is another route).
 */
const taskIdOf = (request: HttpServerRequest.HttpServerRequest, taken: ReadonlySet<string>): string | undefined => {
  if (request.method !== "GET") return undefined
  const url = request.url
  if (!url.startsWith(prefix)) return undefined
  const id = url.slice(prefix.length)
  return id === "" || /[/?%#]/.test(id) || taken.has(id) ? undefined : id
}

/**
 * The router's paths next to the query's (`/api/v1/task/<name>`, any method, a host's
 * included), which the router prefers to the query's: none of them is a task id here. And
 * whether something is mounted over the query's path, which the router tries before its
 * routes: then this route takes nothing.
 */
const routerPaths = Effect.map(HttpApiBuilder.Router.router, (router) => {
  const taken = new Set<string>()
  Chunk.forEach(router.routes, (route) => {
    const name = route.path.startsWith(prefix) ? route.path.slice(prefix.length) : ""
    if (name !== "" && !/[/:*]/.test(name)) taken.add(name)
  })
  let mounted = false
  Chunk.forEach(router.mounts, ([path]) => {
    if (prefix.startsWith(`${path}/`)) mounted = true
    else if (path.startsWith(prefix)) taken.add(path.slice(prefix.length))
  })
  return { mounted, taken }
})

/** How the route fails: as HttpApi's query endpoint does, each answered by the envelope's middleware. */
export type Failure = Api.Unauthorized | Api.Forbidden | Api.NotFound | Api.ServiceUnavailable | Api.InternalServerError

/**
 * A function that answers a plain query of a task (`taskIdOf`, the endpoint's path schema)
 * as HttpApi's route would, and every other request with `fallback` (HttpApi).
 */
export const make: Effect.Effect<OwnRoute.OwnRoute<Failure>, never, OwnRoute.Requirements> = OwnRoute.make<Failure>(({ authenticate, tasks }) =>
  Effect.map(routerPaths, ({ mounted, taken }) => (request, fallback) => {
    const raw = mounted ? undefined : taskIdOf(request, taken)
    if (raw === undefined) return fallback
    const path = decodePath({ taskId: raw })
    if (Either.isLeft(path)) return fallback
    return OwnRoute.run<Failure>(route, authenticate(request), (account) => answerErrors(Handlers.queryAnswer(tasks, account, path.right.taskId)))
  })
)
