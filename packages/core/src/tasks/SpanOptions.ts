/** The use cases' spans (`traced("TaskService.x")(function*() { ... })`), and `spanned` for any other. */
import { Effect, FiberRef } from "effect"
import { dual } from "effect/Function"
import type { Tracer } from "effect"
import type { YieldWrap } from "effect/Utils"

/** Spans without stack traces: capturing one costs about as much as the span (bench:costs). */
export const spanOptions = { captureStackTrace: false }

/**
 * `Effect.withSpan(self, name, options)` (no stack trace), or `self` as it is when the fiber's
 * tracer is disabled (`FiberRef.currentTracerEnabled`, as the standalone server has it without
 * trace export): a disabled tracer's span records nothing, and putting it in place cost
 * about 40 runtime steps per span (docs/benchmarks.md, "Issue 37: request bodies, spans and loop waits").
 */
export const spanned: {
  (name: string, options?: Tracer.SpanOptions): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, name: string, options?: Tracer.SpanOptions): Effect.Effect<A, E, R>
} = dual(
  (args) => Effect.isEffect(args[0]),
  <A, E, R>(self: Effect.Effect<A, E, R>, name: string, options?: Tracer.SpanOptions) => spanIfTraced(self, name, options)
)

const spanIfTraced = <A, E, R>(self: Effect.Effect<A, E, R>, name: string, options: Tracer.SpanOptions | undefined) =>
  Effect.withFiberRuntime<A, E, R>((fiber) =>
    fiber.getFiberRef(FiberRef.currentTracerEnabled) ? Effect.withSpan(self, name, { ...spanOptions, ...options }) : self
  )

/**
 * `Effect.fn(name, spanOptions)`: the body in a span named `name` (`spanned`), without what
 * `Effect.fn` does on every call besides (an `Error` made for its stack trace, used only where
 * the span captures one: these never do). A query pays it on every request.
 */
export const traced = (name: string) =>
<Eff extends YieldWrap<Effect.Effect<any, any, any>>, AEff, Args extends Array<any>>(
  body: (...args: Args) => Generator<Eff, AEff, never>
) => {
  const untraced = Effect.fnUntraced(body)
  return (...args: Args) => spanIfTraced(untraced(...args), name, undefined)
}
