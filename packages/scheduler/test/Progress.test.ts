/**
 * A task's progress (docs/decisions.md "Progress"): the engine against the memory store and
 * a scripted upstream, timed by the TestClock. What a poll says is kept on the task, carried
 * by the write the poll makes anyway and changed at most once per 500 ms; the result copy is
 * the `finishing` stage; the last progress is kept at the end.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, ModelCatalog, Task, TaskServiceAlone, TaskStore, TaskWrites, Upstream } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryTaskStore } from "@mediagate/store-memory"
import { Clock, Effect, Layer, Option, Ref, TestClock } from "effect"
import { Engine } from "../src/index.js"

const result: Task.TaskResult = { type: "image", urls: ["https://cdn.example/a.png"] }

/** Store updates: all of them, and those whose progress differs from the task's before. */
interface Writes {
  all: number
  progress: number
}

/** The memory store with its updates counted. */
const countingStore = (writes: Writes) =>
  Layer.effect(
    TaskStore.TaskStore,
    Effect.map(MemoryTaskStore.make, (store) => ({
      ...store,
      update: (next, expectedVersion, callbacks) =>
        Effect.flatMap(store.get(next.id), (before) => {
          writes.all++
          if (Option.isSome(before) && before.value.progress?.updatedAt !== next.progress?.updatedAt) writes.progress++
          return store.update(next, expectedVersion, callbacks)
        })
    }))
  )

const run = <A, E>(
  upstream: Layer.Layer<Upstream.Upstream>,
  writes: Writes,
  body: Effect.Effect<A, E, TaskStore.TaskStore | TaskWrites.TaskWrites>,
  options: Engine.Options = {}
) =>
  body.pipe(
    Effect.provide(
      Engine.layer(options).pipe(
        Layer.provideMerge(TaskServiceAlone.writes),
        Layer.provideMerge(countingStore(writes)),
        Layer.provide([upstream, Ids.layerTest, ModelCatalog.layer])
      )
    ),
    Effect.scoped
  )

const settle = Effect.gen(function*() {
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
  yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
})

const advance = (millis: number, step = 50) =>
  Effect.gen(function*() {
    for (let t = 0; t < millis; t += step) {
      yield* TestClock.adjust(step)
      yield* settle
    }
  })

const taskOf = (id: string) =>
  Effect.flatMap(TaskStore.TaskStore, (store) => store.get(Ids.TaskId.make(id))).pipe(Effect.map(Option.getOrThrow))

/** An async upstream whose job reports a new percent (and a new log line) at every poll, done at `doneAt`. */
const chatty = (polls: Ref.Ref<number>, doneAt: number, extra: Partial<Upstream.Upstream["Type"]> = {}) =>
  Layer.succeed(Upstream.Upstream, {
    submit: () => Effect.succeed({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("up-1") }),
    poll: () =>
      Effect.gen(function*() {
        const n = yield* Ref.updateAndGet(polls, (k) => k + 1)
        const now = yield* Clock.currentTimeMillis
        if (now >= doneAt) return { _tag: "Completed" as const, result }
        return {
          _tag: "Running" as const,
          progress: n <= 3
            ? { queuePosition: 4 - n, logs: ["queued"] }
            : { percent: Math.min(99, n), logs: Array.from({ length: n }, (_, i) => `line ${i + 1} ${"x".repeat(600)}`) }
        }
      }),
    ...extra
  })

describe("Engine: progress", () => {
  it.effect("polls every 100 ms with new progress each: the task's progress changes at most once per 500 ms, on the poll's own writes", () =>
    Effect.gen(function*() {
      const polls = yield* Ref.make(0)
      const writes: Writes = { all: 0, progress: 0 }
      yield* run(
        chatty(polls, 10_000),
        writes,
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(Testing.record({ id: "p1", createdAt: 0, deadlineAt: 600_000 }))
          yield* advance(300)
          const queued = yield* taskOf("p1")
          expect(queued.progress?.stage).toBe("queued")
          expect(queued.progress?.percent).toBeNull()
          expect(queued.progress?.queuePosition).toBeGreaterThanOrEqual(1)
          const before = { ...writes }
          const pollsBefore = yield* Ref.get(polls)
          yield* advance(5_000)
          const running = yield* taskOf("p1")
          const pollsDuring = (yield* Ref.get(polls)) - pollsBefore
          expect(pollsDuring).toBeGreaterThanOrEqual(30)
          // No write of its own: as many writes as polls (each poll's reschedule), no more.
          expect(writes.all - before.all).toBeLessThanOrEqual(pollsDuring + 1)
          // A stage change (queued -> running) is written at once, then one change per 500 ms at most.
          expect(writes.progress - before.progress).toBeLessThanOrEqual(Math.ceil(5_000 / 500) + 2)
          expect(writes.progress - before.progress).toBeGreaterThanOrEqual(5)
          const progress = running.progress!
          expect(progress.stage).toBe("running")
          expect(progress.queuePosition).toBeNull()
          expect(progress.percent).toBeGreaterThan(3)
          // Bounded: the last 20 lines at most, each clipped to 500 characters, 4 KB in all.
          expect(progress.logsTail.length).toBeLessThanOrEqual(20)
          expect(progress.logsTail.every((line) => line.length <= 500)).toBe(true)
          expect(progress.logsTail.join("").length).toBeLessThanOrEqual(4096)
          expect(progress.logsTail.at(-1)).toMatch(/^line \d+ x+$/)
          yield* advance(5_500, 250)
          const done = yield* taskOf("p1")
          expect(done.status).toBe("SUCCESS")
          // Kept at the end, as the last one known (its logs with it).
          expect(done.progress?.stage).toBe("running")
          expect(done.progress?.logsTail.length).toBeGreaterThan(0)
        }),
        { upstreamPollInterval: "100 millis", firstPollDelay: "100 millis" }
      )
    }))

  it.effect("an upstream that says nothing leaves progress null; the result copy is the finishing stage", () =>
    Effect.gen(function*() {
      const writes: Writes = { all: 0, progress: 0 }
      yield* run(
        Layer.succeed(Upstream.Upstream, {
          submit: () => Effect.succeed({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("up-2") }),
          poll: () =>
            Effect.map(Clock.currentTimeMillis, (now) =>
              now >= 2_000 ? { _tag: "Completed" as const, result } : { _tag: "Running" as const }),
          hostsResults: () => true,
          hostResult: () => Effect.sleep("3 seconds").pipe(Effect.as(result))
        }),
        writes,
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(Testing.record({ id: "p2", createdAt: 0, deadlineAt: 600_000 }))
          yield* advance(1_500, 100)
          expect((yield* taskOf("p2")).progress).toBeNull()
          yield* advance(1_500, 100)
          const copying = yield* taskOf("p2")
          expect(copying.status).toBe("PROCESSING")
          expect(copying.progress).toMatchObject({ stage: "finishing", queuePosition: null, percent: null, logsTail: [] })
          yield* advance(4_000, 250)
          expect((yield* taskOf("p2")).status).toBe("SUCCESS")
        }),
        { upstreamPollInterval: "200 millis", firstPollDelay: "100 millis" }
      )
    }))
})
