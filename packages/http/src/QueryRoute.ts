/**
 * The query of a task (`GET /api/v1/task/{taskId}`, no parameters) answered beside HttpApi's
 * router: most of an API's requests are clients polling their tasks, and the router's way
 * there costs a query about a fifth of its CPU (three copies of the request's context, each
 * provided with its own scope: docs/benchmarks.md, "Issue 37: the query's own route").
 *
 * Only the answer of a query that succeeds is made here, from the same pieces as HttpApi's
 * route: the endpoint's own path schema (`Api.MediagateApi`), the same authentication
 * (`Auth.authenticator`), the same use case and answer (`Handlers.queryAnswer`). Whatever
 * else (a malformed or escaped id, a query string, a failed authentication, an unknown task,
 * a store that failed) goes to HttpApi, which answers it as it answers every request, so
 * every answer but the fast one is HttpApi's own, byte for byte.
 */
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import type * as HttpApp from "@effect/platform/HttpApp"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type { Accounts, AdminKeys } from "@mediagate/core"
import { Api, TaskService } from "@mediagate/core"
import { Cause, Context, Effect, Either, Option, Schema, Tracer } from "effect"
import * as Auth from "./Auth.js"
import * as Handlers from "./Handlers.js"
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
 * segment after it (no `%` escape, which the router would decode) and no query string.
 */
const taskIdOf = (request: HttpServerRequest.HttpServerRequest): string | undefined => {
  if (request.method !== "GET") return undefined
  const url = request.url
  if (!url.startsWith(prefix)) return undefined
  const id = url.slice(prefix.length)
  return id === "" || /[/?%#]/.test(id) ? undefined : id
}

/**
 * A function that answers a request with `fallback` (HttpApi) unless it is a plain query of a
 * task that succeeds; then with the same answer HttpApi's route would give.
 */
export const make: Effect.Effect<
  <E, R>(request: HttpServerRequest.HttpServerRequest, fallback: HttpApp.Default<E, R>) => HttpApp.Default<E, R>,
  never,
  TaskService | Accounts.Accounts | AdminKeys.AdminKeys
> = Effect.gen(function*() {
  const tasks = yield* TaskService
  const authenticate = yield* Auth.authenticator
  return <E, R>(request: HttpServerRequest.HttpServerRequest, fallback: HttpApp.Default<E, R>): HttpApp.Default<E, R> => {
    const raw = taskIdOf(request)
    if (raw === undefined) return fallback
    const path = decodePath({ taskId: raw })
    if (Either.isLeft(path)) return fallback
    const answer = Effect.flatMap(authenticate(request), (account) => Handlers.queryAnswer(tasks, account, path.right.taskId))
    // A failure is answered by HttpApi from the start, with its own error and its log line;
    // the query reads and writes nothing, so asking again changes nothing. An interruption
    // (the client went away) ends the request as it would have ended it inside HttpApi.
    const answered = Effect.catchAllCause(
      // As HttpApi's router has its handlers: interruptible.
      Effect.interruptible(answer),
      (cause): HttpApp.Default<E, R> => Cause.isInterruptedOnly(cause) ? Effect.failCause(cause as Cause.Cause<never>) : fallback
    )
    // As HttpApi's router does, the route's name on the request's span, when it has one.
    return Effect.withFiberRuntime<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest>((fiber) => {
      const span = Context.getOption(fiber.currentContext, Tracer.ParentSpan)
      if (Option.isSome(span) && span.value._tag === "Span") span.value.attribute("http.route", route)
      return answered
    })
  }
})
