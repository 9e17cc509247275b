/**
 * The body's deadline on Effect's clock (TestClock here): a reading that ends in time gives
 * its value; one that does not fails at the deadline, and is left to run (stopping it would
 * destroy the request before the 408 is written).
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, TestClock } from "effect"
import * as RequestTimeouts from "../src/RequestTimeouts.js"

const short = RequestTimeouts.layer({ headers: Duration.seconds(1), body: Duration.seconds(2) })

describe("RequestTimeouts.readBody", () => {
  it.effect("a reading that ends within the deadline gives its value", () =>
    Effect.gen(function*() {
      const reading = yield* Effect.fork(RequestTimeouts.readBody(Effect.as(Effect.sleep("1500 millis"), "body"), () => "too slow"))
      yield* TestClock.adjust("1500 millis")
      expect(yield* Fiber.join(reading)).toBe("body")
    }).pipe(Effect.provide(short)))

  it.effect("past the deadline it fails with onTimeout(), and the reading goes on", () =>
    Effect.gen(function*() {
      const ended = yield* Deferred.make<void>()
      const read = Effect.sleep("5 seconds").pipe(Effect.zipRight(Deferred.succeed(ended, undefined)), Effect.as("body"))
      const reading = yield* Effect.fork(RequestTimeouts.readBody(read, () => "too slow"))
      yield* TestClock.adjust("1999 millis")
      expect(reading.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.await(reading)).toEqual(Exit.fail("too slow"))
      yield* TestClock.adjust("3 seconds")
      expect(yield* Deferred.isDone(ended)).toBe(true)
    }).pipe(Effect.provide(short)))

  it.effect("10 seconds by default", () =>
    Effect.gen(function*() {
      const reading = yield* Effect.fork(RequestTimeouts.readBody(Effect.never, () => "too slow"))
      yield* TestClock.adjust("9999 millis")
      expect(reading.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.await(reading)).toEqual(Exit.fail("too slow"))
    }).pipe(Effect.provide(Layer.empty)))
})
