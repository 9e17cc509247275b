/**
 * `spanned` and `traced`: the span is there while the tracer is enabled (with its name,
 * attributes and parent), and nothing is put in place while it is disabled.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { spanned, traced } from "../src/tasks/SpanOptions.js"

const spanName = Effect.map(Effect.option(Effect.currentSpan), Option.map((span) => span.name))

describe("spanned", () => {
  it.effect("in a span of its name and attributes while the tracer is enabled, in either form", () =>
    Effect.gen(function*() {
      const span = yield* spanned(Effect.currentSpan, "Outer.work", { attributes: { host: "example.com" } })
      expect(span.name).toBe("Outer.work")
      expect(span.attributes.get("host")).toBe("example.com")
      const nested = yield* Effect.currentSpan.pipe(spanned("Inner"), spanned("Outer"))
      expect(nested.name).toBe("Inner")
      expect(Option.map(nested.parent, (parent) => parent._tag === "Span" ? parent.name : "external")).toEqual(Option.some("Outer"))
    }))

  it.effect("no span while the tracer is disabled; the effect runs as it is", () =>
    Effect.gen(function*() {
      expect(yield* spanned(spanName, "Outer.work")).toEqual(Option.none())
      expect(yield* spanned(Effect.succeed(42), "Outer.work")).toBe(42)
    }).pipe(Effect.withTracerEnabled(false)))
})

describe("traced", () => {
  const query = traced("TaskService.query")(function*(id: string) {
    return [id, yield* spanName] as const
  })

  it.effect("the body in a span of its name while the tracer is enabled, none while disabled", () =>
    Effect.gen(function*() {
      expect(yield* query("task_1")).toEqual(["task_1", Option.some("TaskService.query")])
      expect(yield* Effect.withTracerEnabled(query("task_2"), false)).toEqual(["task_2", Option.none()])
    }))
})
