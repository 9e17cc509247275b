/**
 * The engine's loops never spin without giving the event loop a turn (issue 20, the hanging
 * `npm test`). Under the TestClock the clock can stand at a fraction of a millisecond before
 * a due time the loop knows of (a heartbeat sleeps a third of its window, so virtual time
 * stops at x.666667 ms). A wait of under half a nanosecond became a zero Duration (Effect
 * rounds fractional milliseconds to whole nanoseconds), the TestClock completes a zero sleep
 * at once, the claim at that instant took nothing, and the loop went round again forever: in
 * microtasks only, so no timer, I/O or test timeout in the process ever ran again.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, ModelCatalog, Task, TaskEvents, TaskServiceAlone, TaskStore, Upstream } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryTaskStore } from "@mediagate/store-memory"
import { Clock, Context, Effect, Fiber, Layer, Option, TestClock } from "effect"
import { Engine } from "../src/index.js"
import * as Loops from "../src/Loops.js"
import * as TimeLimits from "../src/TimeLimits.js"

/** The memory store with its claims counted. */
const counted = (claims: { count: number }) =>
  Layer.effect(
    TaskStore.TaskStore,
    Effect.map(TaskStore.TaskStore, (store) => ({
      ...store,
      claimDue: (options: Parameters<typeof store.claimDue>[0]) => Effect.suspend(() => (claims.count++, store.claimDue(options)))
    }))
  ).pipe(Layer.provideMerge(MemoryTaskStore.layer))

/** An async upstream: every submit is accepted, every poll finds the job running. */
const accepting = Layer.succeed(Upstream.Upstream, {
  submit: () => Effect.succeed({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("job-1") }),
  poll: () => Effect.succeed({ _tag: "Running" as const })
})

/** Many turns of the runtime's microtask queue: a spinning fiber would go round many times meanwhile. */
const microtasks = Effect.gen(function*() {
  for (let i = 0; i < 2_000; i++) yield* Effect.yieldNow()
})

/** One turn of the event loop's macrotask queue: never comes while a fiber spins in microtasks. */
const macrotask = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

describe("the engine gives the event loop a turn", () => {
  it.scoped("woken a fraction of a nanosecond before a due time it knows of, it sleeps until then instead of spinning", () =>
    Effect.gen(function*() {
      const claims = { count: 0 }
      const context = yield* Layer.build(
        Engine.layer({ pollInterval: "1 second" }).pipe(
          Layer.provide(TaskServiceAlone.writes),
          Layer.provideMerge(counted(claims)),
          Layer.provide([accepting, Ids.layerTest, ModelCatalog.layer])
        )
      )
      const tasks = Context.get(context, TaskStore.TaskStore)
      const wakeup = Context.get(context, TaskEvents.TaskWakeup)

      yield* tasks.create(Testing.record({ id: "t1", job: Testing.job({ sync: false }) }), [])
      yield* wakeup.wake
      yield* microtasks
      const submitted = Option.getOrThrow(yield* tasks.get(Ids.TaskId.make("t1")))
      expect(submitted.status).toBe<Task.TaskStatus>("SUBMITTED")
      const dueAt = submitted.dueAt!
      expect(dueAt).toBeGreaterThan(0)

      // The clock stops just short of the poll's due time; a wake-up makes the loop look.
      yield* TestClock.setTime(dueAt - 1e-7)
      const before = claims.count
      yield* wakeup.wake
      yield* microtasks
      // One claim (it finds nothing due yet), then a sleep: not thousands of claims.
      expect(claims.count - before).toBeLessThanOrEqual(2)
      yield* macrotask

      // Once the due time has passed, the poll runs.
      yield* TestClock.adjust("1 millis")
      yield* microtasks
      expect(Option.getOrThrow(yield* tasks.get(Ids.TaskId.make("t1"))).status).toBe<Task.TaskStatus>("PROCESSING")
    }))

  it.scoped("the time-limit watchdog sleeps past a limit a fraction of a nanosecond away instead of spinning", () =>
    Effect.gen(function*() {
      // The TestClock, with the watchdog's looks at it counted: each round of its loop looks once.
      const clock = yield* TestClock.testClock()
      let looks = 0
      const counting: Clock.Clock = {
        [Clock.ClockTypeId]: Clock.ClockTypeId,
        unsafeCurrentTimeMillis: () => clock.unsafeCurrentTimeMillis(),
        unsafeCurrentTimeNanos: () => clock.unsafeCurrentTimeNanos(),
        currentTimeMillis: Effect.suspend(() => (looks++, clock.currentTimeMillis)),
        currentTimeNanos: clock.currentTimeNanos,
        sleep: (duration) => clock.sleep(duration)
      }
      yield* Effect.gen(function*() {
        const limits = yield* TimeLimits.make
        // A call whose limit ends a tenth of a nanosecond after the clock's instant.
        yield* clock.setTime(0.9999999)
        const call = yield* Effect.fork(limits.run(Effect.never, 1e-7))
        yield* microtasks
        expect(looks).toBeLessThanOrEqual(4)
        yield* macrotask
        yield* clock.adjust("1 millis")
        yield* microtasks
        // The limit has passed: the call was stopped, and the watchdog did not go round meanwhile.
        expect(Option.isNone(yield* Fiber.join(call))).toBe(true)
        expect(looks).toBeLessThanOrEqual(8)
      }).pipe(Effect.withClock(counting))
    }))

  it.scoped("a loop that goes round at one instant without progress gives the event loop a turn", () =>
    Effect.gen(function*() {
      const guard = yield* Loops.makeSpinGuard("a test loop")
      let rounds = 0
      // Spins in microtasks: a zero sleep under the TestClock completes at once.
      yield* Effect.forkScoped(
        Effect.race(Effect.sleep(0), Effect.never).pipe(
          Effect.zipRight(guard.round(false)),
          Effect.zipRight(Effect.sync(() => rounds++)),
          Effect.forever
        )
      )
      yield* macrotask
      expect(rounds).toBeGreaterThanOrEqual(1_000)
    }))
})
