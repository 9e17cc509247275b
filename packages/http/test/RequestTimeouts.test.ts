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

/** A reading that calls `progress` every `every` for `times` times, then gives "file". */
const steady = (every: Duration.DurationInput, times: number) => (progress: Effect.Effect<void>) =>
  Effect.as(Effect.repeatN(Effect.zipRight(Effect.sleep(every), progress), times - 1), "file")

describe("RequestTimeouts.readUpload", () => {
  const uploads = RequestTimeouts.layer({ headers: Duration.seconds(1), body: Duration.seconds(2), upload: Duration.seconds(30) })

  it.effect("an upload that keeps arriving may take longer than the body's deadline", () =>
    Effect.gen(function*() {
      const reading = yield* Effect.fork(RequestTimeouts.readUpload(steady("1500 millis", 12), () => "too slow"))
      yield* TestClock.adjust("18 seconds")
      expect(yield* Fiber.join(reading)).toBe("file")
    }).pipe(Effect.provide(uploads)))

  it.effect("no bytes for the body's deadline fails it, counted from its last bytes; the reading goes on", () =>
    Effect.gen(function*() {
      const ended = yield* Deferred.make<void>()
      const read = (progress: Effect.Effect<void>) =>
        steady("1 second", 3)(progress).pipe(Effect.zipLeft(Effect.sleep("5 seconds")), Effect.zipLeft(Deferred.succeed(ended, undefined)))
      const reading = yield* Effect.fork(RequestTimeouts.readUpload(read, () => "too slow"))
      yield* TestClock.adjust("4999 millis")
      expect(reading.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.await(reading)).toEqual(Exit.fail("too slow"))
      yield* TestClock.adjust("3 seconds")
      expect(yield* Deferred.isDone(ended)).toBe(true)
    }).pipe(Effect.provide(uploads)))

  it.effect("an upload still arriving at its own deadline fails there, steady or not", () =>
    Effect.gen(function*() {
      const reading = yield* Effect.fork(RequestTimeouts.readUpload(steady("1 second", 100), () => "too slow"))
      yield* TestClock.adjust("29999 millis")
      expect(reading.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.await(reading)).toEqual(Exit.fail("too slow"))
    }).pipe(Effect.provide(uploads)))

  it.effect("10 seconds without bytes and 10 minutes in all by default", () =>
    Effect.gen(function*() {
      const stalled = yield* Effect.fork(RequestTimeouts.readUpload(() => Effect.never, () => "too slow"))
      yield* TestClock.adjust("9999 millis")
      expect(stalled.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.await(stalled)).toEqual(Exit.fail("too slow"))
      const long = yield* Effect.fork(RequestTimeouts.readUpload(steady("5 seconds", 1000), () => "too slow"))
      yield* TestClock.adjust("599 seconds")
      expect(long.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 second")
      expect(yield* Fiber.await(long)).toEqual(Exit.fail("too slow"))
    }).pipe(Effect.provide(Layer.empty)))
})
