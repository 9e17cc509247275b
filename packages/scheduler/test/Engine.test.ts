/**
 * The engine against the memory store and a scripted upstream, timed by the TestClock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, ModelCatalog, StoreError, Task, TaskEvents, TaskServiceAlone, TaskStore, TaskWrites, Upstream, UpstreamError } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryTaskStore } from "@mediagate/store-memory"
import { Cause, Clock, Context, Deferred, Duration, Effect, Exit, Fiber, Layer, Logger, Option, Ref, Scope, TestClock, Tracer } from "effect"
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

/** A call that fails retryably the first time and completes after; `calls` counts them. */
const busyOnceThenDone = (calls: Ref.Ref<number>) =>
  Ref.getAndUpdate(calls, (n) => n + 1).pipe(
    Effect.flatMap((n) =>
      n === 0
        ? Effect.fail(new UpstreamError({ message: "busy", reason: null, retryable: true }))
        : Effect.succeed({ _tag: "Completed" as const, result })
    )
  )

const run = <A, E>(
  upstream: Layer.Layer<Upstream.Upstream>,
  body: Effect.Effect<A, E, TaskStore.TaskStore | TaskEvents.TaskWakeup | TaskWrites.TaskWrites>,
  options: Engine.Options = {}
) =>
  body.pipe(
    Effect.provide(
      Engine.layer(options).pipe(
        Layer.provideMerge(TaskServiceAlone.writes),
        Layer.provideMerge(MemoryTaskStore.layer),
        Layer.provide([upstream, Ids.layerTest, ModelCatalog.layer])
      )
    ),
    Effect.scoped
  )

const statusOf = (id: string) =>
  Effect.flatMap(TaskStore.TaskStore, (store) => store.get(Ids.TaskId.make(id))).pipe(
    Effect.map(Option.getOrThrow)
  )

/** Lets the fibers run: microtasks, then an event-loop turn (a woken engine claims in the next turn), then microtasks. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
  yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
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
        scripted(() => busyOnceThenDone(calls)),
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
        { retry: { baseDelay: 5_000 } }
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
        // A fixed 2-second rhythm, to see each status in turn.
        { firstPollDelay: "2 seconds", upstreamPollInterval: "2 seconds" }
      )
    }))

  it.effect("an accepted job is polled soon, then ever less often: an instant job ends within 25 ms", () =>
    Effect.gen(function*() {
      yield* run(
        scripted(
          () => Effect.succeed({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("up-fast") }),
          () => Effect.succeed({ _tag: "Completed" as const, result })
        ),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(record("t1", 0, { sync: false }))
          yield* settle
          for (let i = 0; i < 5; i++) {
            yield* TestClock.adjust("5 millis")
            yield* settle
          }
          expect((yield* statusOf("t1")).status).toBe("SUCCESS")
        })
      )
    }))

  it.effect("a job submitted after waiting a minute in line is still polled 20 ms after acceptance", () =>
    Effect.gen(function*() {
      yield* run(
        scripted(
          () => Effect.succeed({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("up-fast") }),
          () => Effect.succeed({ _tag: "Completed" as const, result })
        ),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          // Created at 0, due only at 60 s (it waited for a running slot).
          yield* store.create(Testing.record({ id: "t1", createdAt: 0, dueAt: 60_000, job: job({ sync: false }) }))
          yield* TestClock.adjust("60 seconds")
          yield* settle
          expect((yield* statusOf("t1")).status).toBe("SUBMITTED")
          // 20 ms, +10% jitter at most.
          for (let i = 0; i < 5; i++) {
            yield* TestClock.adjust("5 millis")
            yield* settle
          }
          expect((yield* statusOf("t1")).status).toBe("SUCCESS")
        })
      )
    }))

  it.effect("the engine wakes for every due time its steps set, not only the earliest", () =>
    Effect.gen(function*() {
      yield* run(
        scripted(
          (_, { taskId }) => Effect.map(Clock.currentTimeMillis, (now) => ({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make(`${taskId}_${now + 5_000}`) })),
          (upstreamId) =>
            Effect.map(Clock.currentTimeMillis, (now) =>
              now >= Number(upstreamId.split("_")[1]) ? { _tag: "Completed" as const, result } : { _tag: "Running" as const })
        ),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          const wakeup = yield* TaskEvents.TaskWakeup
          for (const [i, at] of [0, 300, 700].entries()) {
            if (at > 0) yield* TestClock.adjust(`${at - (i === 2 ? 300 : 0)} millis`)
            yield* store.create(record(`t${i}`, at, { sync: false }))
            yield* wakeup.wake
            yield* settle
          }
          yield* advance(20)
          for (let i = 0; i < 3; i++) expect((yield* statusOf(`t${i}`)).status).toBe("SUCCESS")
        }),
        // No periodic scan to speak of: only the engine's own due times wake it.
        { pollInterval: "1 hour" }
      )
    }))

  it.effect("a motion job that takes 4 hours is polled at most 50 times", () =>
    Effect.gen(function*() {
      const polls = yield* Ref.make(0)
      const fourHours = 4 * 3_600_000
      yield* run(
        scripted(
          () => Effect.succeed({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("up-slow") }),
          () =>
            Ref.update(polls, (n) => n + 1).pipe(
              Effect.zipRight(Clock.currentTimeMillis),
              Effect.map((now) => (now >= fourHours ? { _tag: "Completed" as const, result } : { _tag: "Running" as const }))
            )
        ),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          // motion's deadline is 6 hours.
          yield* store.create(record("m1", 0, { sync: false, model: "motion-2.0" }, 6 * 3_600_000))
          for (let step = 0; step < (4 * 60 + 15) / 5; step++) {
            yield* TestClock.adjust("5 minutes")
            yield* settle
          }
          expect((yield* statusOf("m1")).status).toBe("SUCCESS")
          expect(yield* Ref.get(polls)).toBeLessThanOrEqual(50)
        }),
        // No periodic scan to speak of: the engine wakes for the due times it set itself.
        { pollInterval: "1 hour" }
      )
    }))

  it.effect("a job whose provider sends a webhook is polled only as a safety net: about a dozen times in 4 hours", () =>
    Effect.gen(function*() {
      const polls = yield* Ref.make<Array<number>>([])
      const fourHours = 4 * 3_600_000
      const upstream = Layer.succeed(Upstream.Upstream, {
        submit: () => Effect.succeed({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("up-hooked") }),
        poll: () =>
          Clock.currentTimeMillis.pipe(
            Effect.tap((now) => Ref.update(polls, (all) => [...all, now])),
            Effect.map((now) => (now >= fourHours ? { _tag: "Completed" as const, result } : { _tag: "Running" as const }))
          ),
        notifies: () => true
      })
      yield* run(
        upstream,
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(record("m1", 0, { sync: false, model: "motion-2.0" }, 6 * 3_600_000))
          for (let step = 0; step < (5 * 60 + 40) / 5; step++) {
            yield* TestClock.adjust("5 minutes")
            yield* settle
          }
          expect((yield* statusOf("m1")).status).toBe("SUCCESS")
          const seen = yield* Ref.get(polls)
          // The first poll waits 30 s (the webhook comes first), then each waits as long again as the job ran.
          expect(seen[0]).toBeGreaterThanOrEqual(27_000)
          expect(seen.length).toBeLessThanOrEqual(12)
        }),
        { pollInterval: "1 hour" }
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

  it.effect("no more than `maxRunning` tasks run at the upstream at once", () =>
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
        { maxRunning: 2 }
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
        Layer.provide(TaskServiceAlone.writes),
        Layer.provideMerge(MemoryTaskStore.layer),
        Layer.provide([upstream, Ids.layerTest, ModelCatalog.layer])
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
      // `releaseOnStop: false`: the first worker dies rather than stops, keeping its lease.
      const engine = (hang: boolean) =>
        Engine.layer({ heartbeatWindow: "15 seconds", releaseOnStop: false }).pipe(Layer.provide(TaskServiceAlone.writes), Layer.provide([upstream(hang), Ids.layerTest, ModelCatalog.layer, Layer.succeedContext(store)]))
      const tasks = Context.get(store, TaskStore.TaskStore)
      yield* tasks.create(record("t1", 0))
      // The first worker takes the task and hangs in the call for a minute: the heartbeat
      // keeps its lease ahead, so nobody else starts it.
      yield* Effect.scoped(
        Effect.gen(function*() {
          yield* Layer.build(engine(true))
          yield* Layer.build(Engine.layer({ pollInterval: "1 second", releaseOnStop: false }).pipe(Layer.provide(TaskServiceAlone.writes), Layer.provide([upstream(false), Ids.layerTest, ModelCatalog.layer, Layer.succeedContext(store)])))
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

  it.effect("an async upstream call that hangs ends at its time limit, inside the claim's lease: no other worker takes the task meanwhile", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make(0)
      const inFlight = yield* Ref.make(0)
      const most = yield* Ref.make(0)
      // Every submit call hangs; count calls, and how many run at once.
      const hanging = scripted(() =>
        Effect.gen(function*() {
          yield* Ref.update(calls, (n) => n + 1)
          const now = yield* Ref.updateAndGet(inFlight, (n) => n + 1)
          yield* Ref.update(most, (m) => Math.max(m, now))
          return yield* Effect.never
        }).pipe(Effect.onInterrupt(() => Ref.update(inFlight, (n) => n - 1)))
      )
      const engines = Layer.merge(Engine.layer(), Engine.layer({ pollInterval: "500 millis" })).pipe(
        Layer.provide(TaskServiceAlone.writes),
        Layer.provideMerge(MemoryTaskStore.layer),
        Layer.provide([hanging, Ids.layerTest, ModelCatalog.layer])
      )
      yield* Effect.gen(function*() {
        const store = yield* TaskStore.TaskStore
        yield* store.create(record("t1", 0, { sync: false }))
        yield* advance(9)
        expect(yield* Ref.get(calls)).toBe(1)
        // The 10 s limit ends the call before the 15 s lease: no second worker submits.
        yield* advance(11)
        expect(yield* Ref.get(most)).toBe(1)
        // The call timed out after 10 s and was tried again, by one worker at a time.
        yield* advance(40)
        expect(yield* Ref.get(calls)).toBeGreaterThanOrEqual(3)
        expect(yield* Ref.get(most)).toBe(1)
        expect((yield* statusOf("t1")).status).toBe("PENDING")
      }).pipe(Effect.provide(engines), Effect.scoped)
    }))
})

describe("Engine: the heartbeat of an async call", () => {
  it.effect("keeps a second worker off the task when the call's time limit is longer than the lease", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make(0)
      const hanging = scripted(() => Ref.update(calls, (n) => n + 1).pipe(Effect.zipRight(Effect.never)))
      const options = { leaseDuration: "15 seconds", upstreamCallTimeout: "60 seconds" } as const
      const engines = Layer.merge(Engine.layer(options), Engine.layer({ ...options, pollInterval: "500 millis" })).pipe(
        Layer.provide(TaskServiceAlone.writes),
        Layer.provideMerge(MemoryTaskStore.layer),
        Layer.provide([hanging, Ids.layerTest, ModelCatalog.layer])
      )
      yield* Effect.gen(function*() {
        const store = yield* TaskStore.TaskStore
        yield* store.create(record("t1", 0, { sync: false }))
        // Twice the lease: only the heartbeat keeps the task's lease ahead.
        yield* advance(45)
        expect(yield* Ref.get(calls)).toBe(1)
        expect((yield* statusOf("t1")).leaseUntil).toBeGreaterThan(45_000)
      }).pipe(Effect.provide(engines), Effect.scoped)
    }))
})

describe("Engine: an async call inside the claim's lease", () => {
  it.effect("runs without heartbeat writes; a cancel meanwhile stands, and the call's answer is not written over it", () =>
    Effect.gen(function*() {
      yield* run(
        scripted(() => Effect.sleep("8 seconds").pipe(Effect.as({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("up-late") }))),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(record("t1", 0, { sync: false }))
          yield* advance(1)
          const claimed = yield* statusOf("t1")
          yield* advance(6)
          // No beat in 7 s of the call (a heartbeat beats every 5 s): the stored task is the one the claim wrote.
          expect((yield* statusOf("t1")).version).toBe(claimed.version)
          const writes = yield* TaskWrites.TaskWrites
          yield* writes.apply(yield* statusOf("t1"), { to: "CANCELLED" }, yield* Clock.currentTimeMillis)
          yield* advance(4)
          expect(yield* statusOf("t1")).toMatchObject({ status: "CANCELLED", upstreamId: null })
        }).pipe(Effect.provide(Ids.layerTest))
      )
    }))
})

describe("Engine: fallback by the failure's class (motion)", () => {
  const motionRecord = (id: string) =>
    Testing.record({
      id,
      deadlineAt: 3_600_000,
      input: { model: "motion-2.0", prompt: "a heron" },
      job: job({ model: "motion-2.0", output: "video", sync: false, duration: 8, fallbackModel: "motion-1.5-pro" })
    })

  const failingFirst = (reason: "CONTENT_MODERATION" | "INSUFFICIENT_POINTS" | "INVALID_PARAMETERS" | null) =>
    scripted(
      (job) => Effect.succeed({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make(`up-${job.model}`) }),
      (upstreamId) =>
        upstreamId === "up-motion-2.0"
          ? Effect.fail(new UpstreamError({ message: "the first model failed", reason, retryable: false }))
          : Effect.succeed({ _tag: "Completed" as const, result })
    )

  it.effect("a transient failure retries motion-2.0 itself: no fallback, one attempt", () =>
    Effect.gen(function*() {
      const polls = yield* Ref.make(0)
      yield* run(
        scripted(
          (job) => Effect.succeed({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make(`up-${job.model}`) }),
          () => busyOnceThenDone(polls)
        ),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(motionRecord("m1"))
          yield* advance(15)
          const done = yield* statusOf("m1")
          expect([done.status, done.job.model, done.upstreamId]).toEqual(["SUCCESS", "motion-2.0", "up-motion-2.0"])
          expect(done.attempts.map((a) => [a.number, a.model, a.outcome])).toEqual([[1, "motion-2.0", "succeeded"]])
          expect(yield* Ref.get(polls)).toBe(2)
        })
      )
    }))

  for (const reason of ["CONTENT_MODERATION", "INSUFFICIENT_POINTS"] as const) {
    it.effect(`${reason} does not fall back: the same prompt or account would fail again`, () =>
      run(
        failingFirst(reason),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(motionRecord("m1"))
          yield* advance(10)
          const done = yield* statusOf("m1")
          expect([done.status, done.failureReason, done.job.model]).toEqual(["FAILURE", reason, "motion-2.0"])
        })
      ))
  }

  for (const reason of [null, "INVALID_PARAMETERS"] as const) {
    it.effect(`a failure of class ${reason} falls back to motion-1.5-pro, keeping the first attempt's upstream id`, () =>
      run(
        failingFirst(reason),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(motionRecord("m1"))
          yield* advance(15)
          const done = yield* statusOf("m1")
          expect([done.status, done.job.model, done.upstreamId]).toEqual(["SUCCESS", "motion-1.5-pro", "up-motion-1.5-pro"])
          expect(done.attempts.map((a) => [a.number, a.model, a.upstreamId, a.outcome, a.error])).toEqual([
            [1, "motion-2.0", "up-motion-2.0", "failed", "the first model failed"],
            [2, "motion-1.5-pro", "up-motion-1.5-pro", "succeeded", null]
          ])
        })
      ))
  }
})

describe("Engine: a sync job SUBMITTED after a failover", () => {
  // An async provider accepted the task's job (SUBMITTED), its poll failed, and the task moved
  // to a target that answers the call itself. Before, each claim only took the lease and the
  // task waited, never called, until its deadline.
  it.effect("is called on the next target at its next step and succeeds, long before its deadline", () =>
    Effect.gen(function*() {
      const submits = yield* Ref.make<ReadonlyArray<number | null>>([])
      // Target 0, async, accepts the job, and its poll fails with the circuit open; target 1
      // answers the call with the result.
      const upstream = Layer.succeed(Upstream.Upstream, {
        submit: (job) =>
          Ref.update(submits, (all) => [...all, job.target ?? null]).pipe(
            Effect.as(job.target === 1 ? { _tag: "Completed" as const, result } : { _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("up-0") })
          ),
        poll: () => Effect.fail(new UpstreamError({ message: "target down", reason: null, retryable: true, circuitOpen: true })),
        failover: (job) => (job.target === undefined || job.target === 0 ? { ...job, target: 1, sync: true } : undefined)
      })
      yield* run(
        upstream,
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(record("t1", 0, { sync: false }))
          yield* advance(5)
          const done = yield* statusOf("t1")
          expect(yield* Ref.get(submits)).toEqual([null, 1])
          expect([done.status, done.result, done.job.target]).toEqual(["SUCCESS", result, 1])
          expect(done.attempts.map((attempt) => [attempt.upstreamId, attempt.outcome])).toEqual([["up-0", "failed"], [null, "succeeded"]])
        })
      )
    }))
})

describe("Engine: limits and fairness", () => {
  /** A sync upstream whose calls take `seconds`; records when each task's call started, and how many ran at once. */
  const timed = (seconds: number, starts: Ref.Ref<ReadonlyArray<readonly [string, number]>>, peak: Ref.Ref<number>) => {
    let running = 0
    return scripted((_, { taskId }) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        yield* Ref.update(starts, (all) => [...all, [taskId, now] as const])
        running++
        yield* Ref.update(peak, (p) => Math.max(p, running))
        yield* Effect.sleep(Duration.seconds(seconds))
        running--
        return { _tag: "Completed" as const, result }
      })
    )
  }

  it.effect("one account's burst of 1,000 tasks delays another account's single task by at most one slot turn", () =>
    Effect.gen(function*() {
      const starts = yield* Ref.make<ReadonlyArray<readonly [string, number]>>([])
      const peak = yield* Ref.make(0)
      yield* run(
        timed(10, starts, peak),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          for (let i = 0; i < 1_000; i++) yield* store.create(Testing.record({ id: `a${i}`, ownerId: "burst", createdAt: 0, job: job() }))
          yield* advance(1)
          yield* store.create(Testing.record({ id: "b0", ownerId: "single", createdAt: 1_000, dueAt: 1_000, job: job() }))
          yield* advance(12)
          const started = yield* Ref.get(starts)
          const single = started.find(([id]) => id === "b0")
          // The first slots freed at 10 s; the single task started in that turn, not after the burst.
          expect(single?.[1]).toBeLessThanOrEqual(10_100)
          expect(started.filter(([id, at]) => id !== "b0" && at < single![1])).toHaveLength(4)
          expect(yield* Ref.get(peak)).toBe(4)
        }),
        { maxRunning: 4 }
      )
    }))

  it.effect("a sync call holds no step slot: with one slot, five calls run at once", () =>
    Effect.gen(function*() {
      const starts = yield* Ref.make<ReadonlyArray<readonly [string, number]>>([])
      const peak = yield* Ref.make(0)
      yield* run(
        timed(3, starts, peak),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          for (let i = 0; i < 5; i++) yield* store.create(record(`t${i}`, 0))
          yield* advance(1)
          expect(yield* Ref.get(peak)).toBe(5)
          yield* advance(3)
          for (let i = 0; i < 5; i++) expect((yield* statusOf(`t${i}`)).status).toBe("SUCCESS")
        }),
        { concurrency: 1 }
      )
    }))

  it.effect("an account at its cap waits PENDING while another account's task runs", () =>
    Effect.gen(function*() {
      const starts = yield* Ref.make<ReadonlyArray<readonly [string, number]>>([])
      const peak = yield* Ref.make(0)
      yield* run(
        timed(10, starts, peak),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          for (let i = 0; i < 5; i++) yield* store.create(Testing.record({ id: `a${i}`, ownerId: "capped", job: job() }))
          yield* store.create(Testing.record({ id: "b0", ownerId: "other", job: job() }))
          yield* advance(1)
          expect(new Set((yield* Ref.get(starts)).map(([id]) => id))).toEqual(new Set(["a0", "a1", "b0"]))
          expect((yield* statusOf("a2")).status).toBe("PENDING")
          yield* advance(10)
          expect((yield* Ref.get(starts)).map(([id]) => id)).toContain("a2")
        }),
        { maxRunningPerAccount: 2 }
      )
    }))

  it.effect("a provider at its limit holds its tasks PENDING while another provider's task runs", () =>
    Effect.gen(function*() {
      const starts = yield* Ref.make<ReadonlyArray<readonly [string, number]>>([])
      const peak = yield* Ref.make(0)
      yield* run(
        timed(10, starts, peak),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          for (let i = 0; i < 4; i++) yield* store.create(Testing.record({ id: `f${i}`, job: job(), provider: "fal" }))
          yield* store.create(Testing.record({ id: "r0", createdAt: 1, dueAt: 1, job: job(), provider: "replicate" }))
          yield* advance(1)
          expect(new Set((yield* Ref.get(starts)).map(([id]) => id))).toEqual(new Set(["f0", "f1", "r0"]))
          expect((yield* statusOf("f2")).status).toBe("PENDING")
          yield* advance(10)
          expect((yield* Ref.get(starts)).map(([id]) => id)).toEqual(expect.arrayContaining(["f2", "f3"]))
          expect(yield* Ref.get(peak)).toBe(3)
        }),
        { maxRunningPerProvider: { fal: 2 } }
      )
    }))

  it.effect("a failover moves the task to its next provider's count", () =>
    Effect.gen(function*() {
      const upstream = Layer.succeed(Upstream.Upstream, {
        submit: (job) =>
          (job.target ?? 0) === 0
            ? Effect.fail(new UpstreamError({ message: "circuit open", reason: null, retryable: true, circuitOpen: true }))
            : Effect.succeed({ _tag: "Completed" as const, result }),
        poll: () => Effect.succeed({ _tag: "Running" as const }),
        failover: (job) => ((job.target ?? 0) === 0 ? { ...job, target: 1 } : undefined),
        provider: (job) => ((job.target ?? 0) === 0 ? "first" : "second")
      })
      yield* run(
        upstream,
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(Testing.record({ id: "t1", job: job(), provider: "first" }))
          yield* advance(1)
          const done = yield* statusOf("t1")
          expect([done.status, done.provider, done.job.target]).toEqual(["SUCCESS", "second", 1])
        })
      )
    }))
})

describe("Engine: spans", () => {
  /** Runs one instant task with a tracer that records span names. */
  const spansOf = (options: Engine.Options) =>
    Effect.gen(function*() {
      const names: Array<string> = []
      const native = yield* Effect.tracer
      const recording = Tracer.make({
        span: (name, ...rest) => {
          names.push(name)
          return native.span(name, ...rest)
        },
        context: (f, fiber) => native.context(f, fiber)
      })
      yield* run(
        scripted(() => Effect.succeed({ _tag: "Completed" as const, result })),
        Effect.gen(function*() {
          yield* (yield* TaskStore.TaskStore).create(record("t1", 0))
          yield* advance(1)
          expect((yield* statusOf("t1")).status).toBe("SUCCESS")
        }),
        options
      ).pipe(Effect.withTracer(recording))
      return names.filter((name) => name === "Engine.step").length
    })

  it.effect("a span per step when stepSpans is on; none by default", () =>
    Effect.gen(function*() {
      expect(yield* spansOf({ stepSpans: true })).toBeGreaterThanOrEqual(1)
      expect(yield* spansOf({})).toBe(0)
    }))
})

describe("Engine: transient failures, attempts and idempotency keys", () => {
  it.effect("a Retry-After is honoured: the next call comes no sooner", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make<ReadonlyArray<number>>([])
      yield* run(
        scripted(() =>
          Effect.gen(function*() {
            const now = yield* Clock.currentTimeMillis
            const before = yield* Ref.getAndUpdate(calls, (all) => [...all, now])
            return before.length === 0
              ? yield* Effect.fail(new UpstreamError({ message: "429 slow down", reason: null, retryable: true, retryAfterMs: 30_000 }))
              : { _tag: "Completed" as const, result }
          })
        ),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(record("t1", 0))
          yield* advance(29)
          expect(yield* Ref.get(calls)).toHaveLength(1)
          yield* advance(2)
          const [first, second] = yield* Ref.get(calls)
          expect(second! - first!).toBeGreaterThanOrEqual(30_000)
          const done = yield* statusOf("t1")
          expect(done.status).toBe("SUCCESS")
          expect(done.attempts).toMatchObject([{ number: 1, outcome: "succeeded", transientFailures: 1, error: "429 slow down" }])
        })
      )
    }))

  it.effect("transient failures back off exponentially, and after the last one the task fails with the message", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make<ReadonlyArray<number>>([])
      yield* run(
        scripted(() =>
          Clock.currentTimeMillis.pipe(
            Effect.flatMap((now) => Ref.update(calls, (all) => [...all, now])),
            Effect.zipRight(Effect.fail(new UpstreamError({ message: "503", reason: null, retryable: true })))
          )
        ),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(record("t1", 0))
          yield* advance(120)
          const at = yield* Ref.get(calls)
          // 1 try and 3 retries; the gaps roughly double (±20% jitter).
          expect(at).toHaveLength(4)
          const gaps = at.slice(1).map((t, i) => t - at[i]!)
          for (const [i, gap] of gaps.entries()) {
            expect(gap).toBeGreaterThanOrEqual(0.8 * 2_000 * 2 ** i)
            expect(gap).toBeLessThanOrEqual(1.2 * 2_000 * 2 ** i + 1_000)
          }
          const done = yield* statusOf("t1")
          expect(done.status).toBe("FAILURE")
          expect(done.failureReason).toBeNull()
          expect(done.errorMessage).toMatch(/failed 4 times in a row; the last failure: 503/)
        }),
        { retry: { baseDelay: 2_000, maxTransientFailures: 3 } }
      )
    }))

  it.effect("a retried submit sends the same idempotency key; a fallback's submit sends the next", () =>
    Effect.gen(function*() {
      const keys = yield* Ref.make<ReadonlyArray<string>>([])
      const motion = Testing.record({
        id: "m1",
        deadlineAt: 3_600_000,
        input: { model: "motion-2.0", prompt: "a heron" },
        job: job({ model: "motion-2.0", output: "video", sync: false, duration: 8, fallbackModel: "motion-1.5-pro" })
      })
      yield* run(
        scripted((submitted, { idempotencyKey }) =>
          Ref.getAndUpdate(keys, (all) => [...all, idempotencyKey]).pipe(
            Effect.flatMap((before) =>
              before.length === 0
                ? Effect.fail(new UpstreamError({ message: "timeout", reason: null, retryable: true }))
                : before.length === 1
                ? Effect.fail(new UpstreamError({ message: "model broken", reason: null, retryable: false }))
                : Effect.succeed({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make(`up-${submitted.model}`) })
            )
          ), () => Effect.succeed({ _tag: "Completed" as const, result })),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(motion)
          yield* advance(20)
          expect(yield* Ref.get(keys)).toEqual(["m1.1", "m1.1", "m1.2"])
          const done = yield* statusOf("m1")
          expect(done.attempts.map((a) => [a.number, a.model, a.outcome])).toEqual([
            [1, "motion-2.0", "failed"],
            [2, "motion-1.5-pro", "succeeded"]
          ])
        })
      )
    }))
})

describe("Engine: deadlines, cancels and stopping", () => {
  it.effect("a task past its deadline ends TIMEOUT and its upstream job is cancelled", () =>
    Effect.gen(function*() {
      const cancelled = yield* Ref.make<ReadonlyArray<string>>([])
      const upstream = Layer.succeed(Upstream.Upstream, {
        submit: () => Effect.succeed({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("up-slow") }),
        poll: () => Effect.succeed({ _tag: "Running" as const }),
        cancel: (upstreamId) => Ref.update(cancelled, (all) => [...all, upstreamId])
      })
      yield* run(
        upstream,
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          yield* store.create(record("t1", 0, { sync: false }, 60_000))
          yield* advance(62)
          const done = yield* statusOf("t1")
          expect(done.status).toBe("TIMEOUT")
          expect(done.attempts).toMatchObject([{ upstreamId: "up-slow", outcome: "timed_out" }])
          expect(yield* Ref.get(cancelled)).toEqual(["up-slow"])
        })
      )
    }))

  it.effect("a task cancelled during its sync call frees its slot at once and the call is abandoned", () =>
    Effect.gen(function*() {
      const interrupted = yield* Ref.make(0)
      const started = yield* Ref.make<ReadonlyArray<string>>([])
      yield* run(
        scripted((_, { taskId }) =>
          Ref.update(started, (all) => [...all, taskId]).pipe(
            Effect.zipRight(Effect.never),
            Effect.onInterrupt(() => Ref.update(interrupted, (n) => n + 1))
          )
        ),
        Effect.gen(function*() {
          const store = yield* TaskStore.TaskStore
          const wakeup = yield* TaskEvents.TaskWakeup
          yield* store.create(record("t1", 0))
          yield* store.create(record("t2", 0))
          yield* advance(1)
          expect(yield* Ref.get(started)).toEqual(["t1"])
          const writes = yield* TaskWrites.TaskWrites
          const now = yield* Clock.currentTimeMillis
          yield* writes.apply(yield* statusOf("t1"), { to: "CANCELLED" }, now)
          yield* wakeup.wake
          yield* settle
          // The freed slot goes to the waiting task at once ...
          expect(yield* Ref.get(started)).toEqual(["t1", "t2"])
          // ... and the heartbeat finds the task cancelled and abandons the call.
          yield* advance(6)
          expect(yield* Ref.get(interrupted)).toBe(1)
          expect((yield* statusOf("t1")).status).toBe("CANCELLED")
        }).pipe(Effect.provide(Ids.layerTest)),
        { maxRunning: 1 }
      )
    }))

  it.effect("a stopping engine finishes its calls within the grace period, then gives the rest back to another engine at once", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make<ReadonlyArray<string>>([])
      const store = yield* Layer.build(MemoryTaskStore.layer)
      const tasks = Context.get(store, TaskStore.TaskStore)
      const upstream = scripted((_, { taskId }) =>
        Ref.update(calls, (all) => [...all, taskId]).pipe(
          Effect.zipRight(taskId === "slow" ? Effect.sleep("1 minute") : Effect.sleep("2 seconds")),
          Effect.as({ _tag: "Completed" as const, result })
        )
      )
      const engine = (options: Engine.Options) =>
        Engine.layer(options).pipe(Layer.provide(TaskServiceAlone.writes), Layer.provide([upstream, Ids.layerTest, ModelCatalog.layer, Layer.succeedContext(store)]))
      yield* tasks.create(record("quick", 0))
      yield* tasks.create(record("slow", 0))
      const scope = yield* Scope.make()
      yield* Layer.buildWithScope(engine({ shutdownGrace: "5 seconds" }), scope)
      yield* advance(1)
      const stopping = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* advance(5)
      yield* Fiber.join(stopping)
      expect((Option.getOrThrow(yield* tasks.get(Ids.TaskId.make("quick")))).status).toBe("SUCCESS")
      const slow = Option.getOrThrow(yield* tasks.get(Ids.TaskId.make("slow")))
      expect([slow.status, slow.leaseOwner, slow.leaseUntil]).toEqual(["PROCESSING", null, null])
      // Another engine takes the slow task up at once, not when a lease would have run out.
      yield* Layer.build(engine({ pollInterval: "1 hour" }).pipe(Layer.provide(Layer.succeed(TaskEvents.TaskWakeup, { wake: Effect.void }))))
      yield* settle
      expect(yield* Ref.get(calls)).toEqual(["quick", "slow", "slow"])
    }).pipe(Effect.scoped))

  it.effect("a task whose worker died is taken up before a backlog submitted after it", () =>
    Effect.gen(function*() {
      const order = yield* Ref.make<ReadonlyArray<string>>([])
      const store = yield* Layer.build(MemoryTaskStore.layer)
      const tasks = Context.get(store, TaskStore.TaskStore)
      const upstream = (hang: boolean) =>
        scripted((_, { taskId }) =>
          hang ? Effect.never : Ref.update(order, (all) => [...all, taskId]).pipe(Effect.as({ _tag: "Completed" as const, result }))
        )
      const engine = (hang: boolean, options: Engine.Options) =>
        Engine.layer({ maxRunning: 1, ...options }).pipe(Layer.provide(TaskServiceAlone.writes), Layer.provide([upstream(hang), Ids.layerTest, ModelCatalog.layer, Layer.succeedContext(store)]))
      yield* tasks.create(record("first", 0))
      yield* Effect.scoped(Effect.gen(function*() {
        yield* Layer.build(engine(true, { releaseOnStop: false }))
        yield* advance(1)
      }))
      for (let i = 0; i < 10; i++) yield* tasks.create(Testing.record({ id: `later${i}`, createdAt: 2_000, job: job() }))
      yield* Layer.build(engine(false, {}))
      yield* advance(30)
      expect((yield* Ref.get(order))[0]).toBe("first")
      expect(yield* Ref.get(order)).toHaveLength(11)
    }).pipe(Effect.scoped))
})

describe("Engine: running, for readiness", () => {
  it.effect("says it runs while its loop runs, and not once it stops", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        Engine.layer().pipe(Layer.provide(TaskServiceAlone.writes), Layer.provide([MemoryTaskStore.layer, scripted(() => Effect.never), Ids.layerTest, ModelCatalog.layer])),
        scope
      )
      const running = Context.get(context, TaskEvents.TaskWakeup).running!
      expect(yield* running).toBe(true)
      yield* Scope.close(scope, Exit.void)
      expect(yield* running).toBe(false)
    }))
})

describe("Engine: failures in the logs", () => {
  type Line = { level: string; message: unknown; annotations: Record<string, unknown>; cause: string }
  /** A logger replacing the default one, keeping every line. */
  const capturing = (lines: Array<Line>) =>
    Logger.replace(
      Logger.defaultLogger,
      Logger.make(({ annotations, cause, logLevel, message }) =>
        void lines.push({
          level: logLevel.label,
          message: Array.isArray(message) ? message[0] : message,
          annotations: Object.fromEntries(annotations),
          cause: Cause.isEmpty(cause) ? "" : Cause.pretty(cause)
        }))
    )

  it.effect("a failed upstream call is a warning annotated with the task id and the model", () => {
    const lines: Array<Line> = []
    return run(
      scripted(() => Effect.fail(new UpstreamError({ message: "no credits", reason: "INSUFFICIENT_POINTS", retryable: false }))),
      Effect.gen(function*() {
        const store = yield* TaskStore.TaskStore
        yield* store.create(record("t-logged", 0))
        yield* advance(2)
        expect((yield* statusOf("t-logged")).status).toBe("FAILURE")
        expect(lines.filter((line) => line.level === "WARN")).toEqual([{
          level: "WARN",
          message: "engine: upstream call of task t-logged failed: no credits",
          annotations: { taskId: "t-logged", model: "alpha-image-2/text-to-image", reason: "INSUFFICIENT_POINTS", retryable: false },
          cause: ""
        }])
      })
    ).pipe(Effect.provide(capturing(lines)))
  })

  it.effect("a step that fails on the store is an error with its cause, annotated with the task id and the model", () => {
    const lines: Array<Line> = []
    // The store cannot write: every update fails, as with a lost database connection.
    const broken = Layer.effect(
      TaskStore.TaskStore,
      Effect.map(TaskStore.TaskStore, (store) => ({ ...store, update: () => Effect.fail(new StoreError({ message: "database is gone" })) }))
    ).pipe(Layer.provide(MemoryTaskStore.layer))
    return Effect.gen(function*() {
      const store = yield* TaskStore.TaskStore
      yield* store.create(record("t-broken", 0))
      yield* advance(1)
      const errors = lines.filter((line) => line.level === "ERROR" && line.annotations["taskId"] === "t-broken")
      expect(errors.length).toBeGreaterThanOrEqual(1)
      expect(errors[0]).toMatchObject({
        message: "engine: step of task t-broken failed",
        annotations: { taskId: "t-broken", model: "alpha-image-2/text-to-image" }
      })
      expect(errors[0]!.cause).toContain("database is gone")
    }).pipe(
      Effect.provide(
        Engine.layer().pipe(
          Layer.provide(TaskServiceAlone.writes),
          Layer.provideMerge(broken),
          Layer.provide([scripted(() => Effect.never), Ids.layerTest, ModelCatalog.layer])
        )
      ),
      Effect.scoped,
      Effect.provide(capturing(lines))
    )
  })
})
