/**
 * The engine against the memory store and a scripted upstream, timed by the TestClock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, Task, TaskEvents, TaskStore, Upstream, UpstreamError } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryTaskStore } from "@mediagate/store-memory"
import { Context, Deferred, Effect, Layer, Option, Ref, TestClock } from "effect"
import { Engine } from "../src/index.js"

const job = (overrides: Partial<Task.UpstreamJob> = {}) => Testing.job({ ratio: null, width: null, height: null, ...overrides })

const record = (id: string, now: number, overrides: Partial<Task.UpstreamJob> = {}, deadlineMs = 600_000) =>
  Testing.record({ id, createdAt: now, deadlineAt: now + deadlineMs, job: job(overrides) })

const result: Task.TaskResult = { type: "image", urls: ["https://cdn.example/a.png"] }

/** An upstream whose behaviour each test scripts; counts calls. */
const scripted = (
  submit: Upstream.Upstream["Type"]["submit"],
  poll: Upstream.Upstream["Type"]["poll"] = () => Effect.succeed({ _tag: "Running" })
) => Layer.succeed(Upstream.Upstream, { submit, poll })

const run = <A, E>(
  upstream: Layer.Layer<Upstream.Upstream>,
  body: Effect.Effect<A, E, TaskStore.TaskStore | TaskEvents.TaskWakeup>,
  options: Engine.Options = {}
) =>
  body.pipe(
    Effect.provide(Engine.layer(options).pipe(Layer.provideMerge(MemoryTaskStore.layer), Layer.provide([upstream, Ids.layerTest]))),
    Effect.scoped
  )

const statusOf = (id: string) =>
  Effect.flatMap(TaskStore.TaskStore, (store) => store.get(Ids.TaskId.make(id))).pipe(
    Effect.map(Option.getOrThrow)
  )

const settle = Effect.gen(function*() {
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
})

const advance = (seconds: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < seconds; i++) {
      yield* TestClock.adjust("1 second")
      yield* settle
    }
  })

describe("Engine", () => {
  it.effect("a sync job goes PENDING -> PROCESSING -> SUCCESS after the upstream's latency", () =>
    run(
      scripted(() => Effect.sleep("3 seconds").pipe(Effect.as({ _tag: "Completed" as const, result }))),
      Effect.gen(function*() {
        const store = yield* TaskStore.TaskStore
        yield* store.create(record("t1", 0))
        yield* advance(1)
        expect((yield* statusOf("t1")).status).toBe("PROCESSING")
        yield* advance(3)
        const done = yield* statusOf("t1")
        expect(done.status).toBe("SUCCESS")
        expect(done.result).toEqual(result)
        expect(done.dueAt).toBeNull()
      })
    ))

  it.effect("a non-retryable upstream error ends in FAILURE with its class", () =>
    run(
      scripted(() => Effect.fail(new UpstreamError({ message: "no credits", reason: "INSUFFICIENT_POINTS", retryable: false }))),
      Effect.gen(function*() {
        const store = yield* TaskStore.TaskStore
        yield* store.create(record("t1", 0))
        yield* advance(2)
        const done = yield* statusOf("t1")
        expect(done.status).toBe("FAILURE")
        expect(done.failureReason).toBe("INSUFFICIENT_POINTS")
        expect(done.errorMessage).toBe("no credits")
      })
    ))

  it.effect("a retryable error is tried again after the retry delay", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make(0)
      yield* run(
        scripted(() =>
          Ref.getAndUpdate(calls, (n) => n + 1).pipe(
            Effect.flatMap((n) =>
              n === 0
                ? Effect.fail(new UpstreamError({ message: "busy", reason: null, retryable: true }))
                : Effect.succeed({ _tag: "Completed" as const, result })
            )
          )
        ),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(record("t1", 0))
          yield* advance(2)
          expect((yield* statusOf("t1")).status).toBe("PROCESSING")
          expect(yield* Ref.get(calls)).toBe(1)
          yield* advance(6)
          expect((yield* statusOf("t1")).status).toBe("SUCCESS")
          expect(yield* Ref.get(calls)).toBe(2)
        }),
        { retryDelay: "5 seconds" }
      )
    }))

  it.effect("an async job goes SUBMITTED -> PROCESSING -> SUCCESS by polling", () =>
    Effect.gen(function*() {
      const polls = yield* Ref.make(0)
      yield* run(
        scripted(
          () => Effect.succeed({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("up-1") }),
          () =>
            Ref.updateAndGet(polls, (n) => n + 1).pipe(
              Effect.map((n) => (n >= 3 ? { _tag: "Completed" as const, result } : { _tag: "Running" as const }))
            )
        ),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(record("t1", 0, { sync: false }))
          yield* advance(1)
          const submitted = yield* statusOf("t1")
          expect(submitted.status).toBe("SUBMITTED")
          expect(submitted.upstreamId).toBe("up-1")
          yield* advance(2)
          expect((yield* statusOf("t1")).status).toBe("PROCESSING")
          yield* advance(6)
          expect((yield* statusOf("t1")).status).toBe("SUCCESS")
          expect(yield* Ref.get(polls)).toBe(3)
        }),
        { upstreamPollInterval: "2 seconds" }
      )
    }))

  it.effect("a task whose deadline passes becomes TIMEOUT, and not a moment before", () =>
    run(
      scripted(() => Effect.never),
      Effect.gen(function*() {
        const store = yield* TaskStore.TaskStore
        yield* store.create(record("t1", 0, {}, 60_000))
        yield* advance(59)
        expect((yield* statusOf("t1")).status).toBe("PROCESSING")
        yield* advance(2)
        expect((yield* statusOf("t1")).status).toBe("TIMEOUT")
      })
    ))

  it.effect("no more than `concurrency` tasks are worked on at once", () =>
    Effect.gen(function*() {
      const inflight = yield* Ref.make(0)
      const peak = yield* Ref.make(0)
      const gate = yield* Deferred.make<void>()
      yield* run(
        scripted(() =>
          Ref.updateAndGet(inflight, (n) => n + 1).pipe(
            Effect.tap((n) => Ref.update(peak, (p) => Math.max(p, n))),
            Effect.zipRight(Deferred.await(gate)),
            Effect.zipRight(Ref.update(inflight, (n) => n - 1)),
            Effect.as({ _tag: "Completed" as const, result })
          )
        ),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          for (let i = 0; i < 5; i++) yield* store.create(record(`t${i}`, 0))
          yield* advance(3)
          expect(yield* Ref.get(peak)).toBe(2)
          yield* Deferred.succeed(gate, void 0)
          yield* advance(3)
          for (let i = 0; i < 5; i++) expect((yield* statusOf(`t${i}`)).status).toBe("SUCCESS")
          expect(yield* Ref.get(peak)).toBe(2)
        }),
        { concurrency: 2 }
      )
    }))

  it.effect("two engines on one store never submit the same task twice", () =>
    Effect.gen(function*() {
      const submits = yield* Ref.make<ReadonlyArray<string>>([])
      const upstream = scripted((_, { taskId }) =>
        Ref.update(submits, (ids) => [...ids, taskId]).pipe(
          Effect.zipRight(Effect.sleep("1 second")),
          Effect.as({ _tag: "Completed" as const, result })
        )
      )
      const engines = Layer.merge(Engine.layer(), Engine.layer({ pollInterval: "500 millis" })).pipe(
        Layer.provideMerge(MemoryTaskStore.layer),
        Layer.provide([upstream, Ids.layerTest])
      )
      yield* Effect.gen(function*() {
        const store = yield* TaskStore.TaskStore
        for (let i = 0; i < 20; i++) yield* store.create(record(`t${i}`, 0))
        yield* advance(5)
        for (let i = 0; i < 20; i++) expect((yield* statusOf(`t${i}`)).status).toBe("SUCCESS")
      }).pipe(Effect.provide(engines), Effect.scoped)
      const ids = yield* Ref.get(submits)
      expect(ids).toHaveLength(20)
      expect(new Set(ids).size).toBe(20)
    }))

  it.effect("a sync call keeps its task to itself by heartbeat, and another worker takes over when it dies", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make(0)
      const store = yield* Layer.build(MemoryTaskStore.layer).pipe(Effect.map((ctx) => ctx))
      const upstream = (hang: boolean) =>
        scripted(() =>
          Ref.update(calls, (n) => n + 1).pipe(
            Effect.zipRight(hang ? Effect.never : Effect.sleep("2 seconds")),
            Effect.as({ _tag: "Completed" as const, result })
          )
        )
      const engine = (hang: boolean) =>
        Engine.layer({ heartbeatWindow: "15 seconds" }).pipe(Layer.provide([upstream(hang), Ids.layerTest, Layer.succeedContext(store)]))
      const tasks = Context.get(store, TaskStore.TaskStore)
      yield* tasks.create(record("t1", 0))
      // The first worker takes the task and hangs in the call for a minute: the heartbeat
      // keeps the task due in the future, so nobody else starts it.
      yield* Effect.scoped(
        Effect.gen(function*() {
          yield* Layer.build(engine(true))
          yield* Layer.build(Engine.layer({ pollInterval: "1 second" }).pipe(Layer.provide([upstream(false), Ids.layerTest, Layer.succeedContext(store)])))
          yield* advance(60)
          expect(yield* Ref.get(calls)).toBe(1)
          expect((Option.getOrThrow(yield* tasks.get(Ids.TaskId.make("t1")))).status).toBe("PROCESSING")
        })
      )
      // Both workers are gone (the first died mid-call). A new worker takes the task up
      // once the heartbeat window has passed.
      yield* Effect.scoped(
        Effect.gen(function*() {
          yield* Layer.build(engine(false))
          yield* advance(10)
          expect((Option.getOrThrow(yield* tasks.get(Ids.TaskId.make("t1")))).status).toBe("PROCESSING")
          yield* advance(10)
          expect((Option.getOrThrow(yield* tasks.get(Ids.TaskId.make("t1")))).status).toBe("SUCCESS")
          expect(yield* Ref.get(calls)).toBe(2)
        })
      )
    }).pipe(Effect.scoped))
})
