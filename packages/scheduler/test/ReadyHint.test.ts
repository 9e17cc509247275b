/**
 * An upstream that says in its submit answer when the job will be done (`readyAt`) has it
 * polled then, not 20 ms later; without the hint, or after it, the polls keep their rhythm.
 * The engine against the memory store and a scripted upstream, timed by the TestClock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, ModelCatalog, TaskServiceAlone, TaskStore, Upstream } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryTaskStore } from "@mediagate/store-memory"
import { Clock, Effect, Layer, Option, Ref, TestClock } from "effect"
import { Engine } from "../src/index.js"

const result = { type: "image" as const, urls: ["https://cdn.example/a.png"] }

/**
 * An async upstream whose jobs take `latency` ms and are done once their time has come; it
 * says when in its submit answer if `hints`. `polls` counts the polls.
 */
const upstream = (latency: number, hints: boolean, polls: Ref.Ref<number>) =>
  Layer.succeed(Upstream.Upstream, {
    submit: (_job, { taskId }) =>
      Effect.map(Clock.currentTimeMillis, (now): Upstream.SubmitOutcome => {
        const upstreamId = Ids.UpstreamId.make(`${taskId}_${now + latency}`)
        return hints ? { _tag: "Accepted", upstreamId, readyAt: now + latency } : { _tag: "Accepted", upstreamId }
      }),
    poll: (upstreamId) =>
      Effect.zipRight(
        Ref.update(polls, (n) => n + 1),
        Effect.map(Clock.currentTimeMillis, (now): Upstream.PollOutcome =>
          now >= Number(upstreamId.split("_").at(-1)) ? { _tag: "Completed", result } : { _tag: "Running" })
      )
  })

/** Lets the fibers run: microtasks, then an event-loop turn (a woken engine claims in the next turn), then microtasks. */
const settle = Effect.gen(function*() {
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
    yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
  }
})

/** The memory store with the tasks its claims hand out counted in `claims`. */
const countingClaims = (claims: Ref.Ref<number>) =>
  Layer.effect(
    TaskStore.TaskStore,
    Effect.map(TaskStore.TaskStore, (store): TaskStore.TaskStore["Type"] => ({
      ...store,
      claimDue: (options) => Effect.tap(store.claimDue(options), (tasks) => Ref.update(claims, (n) => n + tasks.length))
    }))
  ).pipe(Layer.provide(MemoryTaskStore.layer))

/**
 * Creates an async task at time 0 on an engine over `latency`'s upstream; answers its status
 * and the polls so far after each `step` of the test clock (and the tasks claimed in `claims`).
 */
const scenario = (latency: number, hints: boolean, steps: ReadonlyArray<number>, claims?: Ref.Ref<number>) =>
  Effect.gen(function*() {
    const polls = yield* Ref.make(0)
    return yield* Effect.gen(function*() {
      const store = yield* TaskStore.TaskStore
      yield* store.create(Testing.record({ id: "t1", createdAt: 0, job: Testing.job({ sync: false }) }))
      const seen: Array<readonly [string, number]> = []
      for (const step of [0, ...steps]) {
        if (step > 0) yield* TestClock.adjust(`${step} millis`)
        yield* settle
        const task = Option.getOrThrow(yield* store.get(Ids.TaskId.make("t1")))
        seen.push([task.status, yield* Ref.get(polls)])
      }
      return seen
    }).pipe(
      Effect.provide(
        Engine.layer().pipe(
          Layer.provideMerge(TaskServiceAlone.writes),
          Layer.provideMerge(claims === undefined ? MemoryTaskStore.layer : countingClaims(claims)),
          Layer.provide([upstream(latency, hints, polls), Ids.layerTest, ModelCatalog.layer])
        )
      ),
      Effect.scoped
    )
  })

describe("Engine: the upstream's hint of when a job is ready", () => {
  it.effect("an instant job the upstream says is ready ends without the test clock moving: one poll, at once", () =>
    Effect.gen(function*() {
      expect(yield* scenario(0, true, [])).toEqual([["SUCCESS", 1]])
    }))

  it.effect("that job is polled in the step that submitted it, under the claim's lease: claimed once; one that is not ready is claimed again for its poll", () =>
    Effect.gen(function*() {
      const instant = yield* Ref.make(0)
      expect(yield* scenario(0, true, [], instant)).toEqual([["SUCCESS", 1]])
      expect(yield* Ref.get(instant)).toBe(1)
      const later = yield* Ref.make(0)
      expect(yield* scenario(7, true, [7], later)).toEqual([["SUBMITTED", 0], ["SUCCESS", 1]])
      expect(yield* Ref.get(later)).toBe(2)
    }))

  it.effect("without the hint, the same job waits for its first poll, 20 ms (±10%) after acceptance", () =>
    Effect.gen(function*() {
      expect(yield* scenario(0, false, [17, 6])).toEqual([["SUBMITTED", 0], ["SUBMITTED", 0], ["SUCCESS", 1]])
    }))

  it.effect("a job ready in 7 ms is polled at 7 ms, not before, and not at 20", () =>
    Effect.gen(function*() {
      expect(yield* scenario(7, true, [6, 1])).toEqual([["SUBMITTED", 0], ["SUBMITTED", 0], ["SUCCESS", 1]])
    }))

  it.effect("a job ready in a minute is polled on the usual rhythm meanwhile: the hint never delays a poll", () =>
    Effect.gen(function*() {
      const seen = yield* scenario(60_000, true, [23, 1_000])
      // The first poll at 20 ms (±10%), more within the first second, none ending the job.
      expect(seen[1]).toEqual(["PROCESSING", 1])
      expect(seen[2]![0]).toBe("PROCESSING")
      expect(seen[2]![1]).toBeGreaterThan(1)
    }))
})
