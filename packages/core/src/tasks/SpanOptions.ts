/** The use cases' spans (`traced("TaskService.x")(function*() { ... })`). */
import { Effect } from "effect"
import type { YieldWrap } from "effect/Utils"

/** Spans without stack traces: capturing one costs about as much as the span (bench:costs). */
export const spanOptions = { captureStackTrace: false }

/**
 * `Effect.fn(name, spanOptions)`: the body in a span named `name`, without what `Effect.fn`
 * does on every call besides (an `Error` made for its stack trace, used only where the span
 * captures one: these never do). A query pays it on every request.
 */
export const traced = (name: string) =>
<Eff extends YieldWrap<Effect.Effect<any, any, any>>, AEff, Args extends Array<any>>(
  body: (...args: Args) => Generator<Eff, AEff, never>
) => {
  const untraced = Effect.fnUntraced(body)
  return (...args: Args) => Effect.withSpan(untraced(...args), name, spanOptions)
}
