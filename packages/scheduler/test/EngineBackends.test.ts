/**
 * The engine's limits, fairness and hand-over on every store backend: memory, SQLite and
 * PostgreSQL (when MEDIAGATE_TEST_PG_URL is set; CI sets it). The claim rules live in the
 * stores' SQL, so the engine is checked on each of them, timed by the TestClock.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, ModelCatalog, StoreError, TaskEvents, TaskServiceAlone, TaskStore, Upstream, UpstreamError } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlTaskStore } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { Clock, Context, Duration, Effect, Exit, Fiber, Layer, Option, Redacted, Ref, Scope, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { Simulator } from "@mediagate/upstream"
import { Engine } from "../src/index.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-engine-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0

const backends: ReadonlyArray<readonly [string, Layer.Layer<TaskStore.TaskStore, unknown>]> = [
  ["memory", MemoryTaskStore.layer],
  ["sqlite", Layer.suspend(() => SqlTaskStore.layer.pipe(Layer.provide(Database.layerSqlite(join(dir, `e${++files}.db`)))))],
  ...(pgUrl === undefined ? [] : [[
    "postgres",
    SqlTaskStore.layer.pipe(
      Layer.provide(Layer.unwrapScoped(Effect.map(freshPgDatabase(pgUrl, "engine"), (url) => Database.layerPg(Redacted.make(url)))))
    )
  ] as const])
]
pgSkipReason("EngineBackends")

const result = { type: "image" as const, urls: ["https://cdn.example/a.png"] }
const job = Testing.job({ ratio: null, width: null, height: null })

/** A sync upstream whose calls take `seconds` (forever for ids in `hang`); records each call's task and start. */
const timed = (seconds: number, starts: Ref.Ref<ReadonlyArray<readonly [string, number]>>, hang: ReadonlySet<string> = new Set()) =>
  Layer.succeed(Upstream.Upstream, {
    submit: (_, { taskId }) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        yield* Ref.update(starts, (all) => [...all, [taskId, now] as const])
        yield* hang.has(taskId) ? Effect.never : Effect.sleep(Duration.seconds(seconds))
        return { _tag: "Completed" as const, result }
      }),
    poll: () => Effect.succeed({ _tag: "Running" as const })
  })

/** Store operations of the engine under test still waiting for their answer (see `counted`). */
let inFlight = 0

/** `store` with every operation counted in `inFlight` while it runs. */
const counted = (store: Context.Context<TaskStore.TaskStore>): Context.Context<TaskStore.TaskStore> => {
  const track = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.acquireUseRelease(Effect.sync(() => inFlight++), () => effect, () => Effect.sync(() => inFlight--))
  const service = Context.get(store, TaskStore.TaskStore)
  const wrapped = Object.fromEntries(Object.entries(service).map(([name, value]) => [
    name,
    Effect.isEffect(value)
      ? track(value)
      : typeof value === "function"
      ? (...args: Array<unknown>) => {
        const result = (value as (...args: Array<unknown>) => unknown)(...args)
        return Effect.isEffect(result) ? track(result) : result
      }
      : value
  ]))
  return Context.make(TaskStore.TaskStore, wrapped as unknown as Context.Tag.Service<TaskStore.TaskStore>)
}

/**
 * Virtual time in steps of 250 ms. After each step, event-loop turns until the engine's store
 * operations have all been answered and stayed so for a few turns: PostgreSQL's answers
 * arrive as I/O, which the TestClock does not hold still, and on a loaded machine they take
 * more turns than an idle one (a fixed number of turns let virtual time run past them).
 * Bounded, so a stuck operation fails the test rather than hanging it.
 */
const advance = (seconds: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < seconds * 4; i++) {
      yield* TestClock.adjust("250 millis")
      let quiet = 0
      for (let turn = 0; quiet < 5 && turn < 100_000; turn++) {
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        quiet = inFlight === 0 ? quiet + 1 : 0
      }
    }
  })

/**
 * `store` refusing a time with a fraction of a millisecond in a claim or a write, as
 * PostgreSQL's BIGINT columns do ("invalid input syntax for type bigint"), so that memory and
 * SQLite, which keep the fraction, hold the engine to it too.
 */
const wholeMillis = (store: Context.Context<TaskStore.TaskStore>): Context.Context<TaskStore.TaskStore> => {
  const service = Context.get(store, TaskStore.TaskStore)
  const whole = (operation: string, times: ReadonlyArray<number | null>) =>
    times.every((time) => time === null || Number.isInteger(time))
      ? Effect.void
      : Effect.fail(new StoreError({ message: `${operation}: a time with a fraction of a millisecond (${times.join(", ")})` }))
  return Context.make(TaskStore.TaskStore, {
    ...service,
    claimDue: (options) => Effect.zipRight(whole("claimDue", [options.now, options.leaseUntil]), service.claimDue(options)),
    update: (next, version, callbacks) =>
      Effect.zipRight(whole("update", [next.updatedAt, next.dueAt, next.leaseUntil]), service.update(next, version, callbacks))
  })
}

const engine = (store: Context.Context<TaskStore.TaskStore>, upstream: Layer.Layer<Upstream.Upstream>, options: Engine.Options) =>
  Engine.layer(options).pipe(Layer.provide(TaskServiceAlone.writes), Layer.provide([upstream, Ids.layerTest, ModelCatalog.layer, Layer.succeedContext(counted(store))]))

for (const [name, backend] of backends) {
  describe(`Engine on ${name}`, () => {
    it.scoped("a burst of 200 from one account delays another account's task by one slot turn at most", () =>
      Effect.gen(function*() {
        const store = yield* Layer.build(backend)
        const tasks = Context.get(store, TaskStore.TaskStore)
        const starts = yield* Ref.make<ReadonlyArray<readonly [string, number]>>([])
        for (let i = 0; i < 200; i++) yield* tasks.create(Testing.record({ id: `a${String(i).padStart(3, "0")}`, ownerId: "burst", job }))
        yield* Layer.build(engine(store, timed(10, starts), { maxRunning: 4, pollInterval: "1 hour" }))
        yield* advance(1)
        yield* tasks.create(Testing.record({ id: "b0", ownerId: "single", createdAt: 1_000, job }))
        yield* advance(11)
        const started = yield* Ref.get(starts)
        const single = started.findIndex(([id]) => id === "b0")
        // Four burst tasks took the slots first; the single task started in the first turn
        // after slots freed (with the burst's next task when several slots freed at once).
        const firstTurn = Math.min(...started.slice(4).map(([, at]) => at))
        expect(single).toBeGreaterThanOrEqual(4)
        // (Within half a second: on PostgreSQL a step's writes are I/O, which the TestClock does not hold still.)
        expect(started[single]![1] - firstTurn).toBeLessThanOrEqual(500)
        expect(firstTurn).toBeLessThan(15_000)
      }))

    it.scoped("tasks run while the clock stands at a fraction of a millisecond (the TestClock stops at each sleep's end, such as a third of a heartbeat window): claims and writes are in whole milliseconds", () =>
      Effect.gen(function*() {
        const store = yield* Layer.build(backend)
        const tasks = Context.get(store, TaskStore.TaskStore)
        const starts = yield* Ref.make<ReadonlyArray<readonly [string, number]>>([])
        const ids = ["f1", "f2", "f3"]
        for (const id of ids) yield* tasks.create(Testing.record({ id, job }))
        // A third of the default 15-second heartbeat window; every step after it keeps the fraction.
        yield* TestClock.adjust(Duration.millis(5_000 / 3))
        yield* Layer.build(engine(name === "postgres" ? store : wholeMillis(store), timed(1, starts), {}))
        yield* advance(3)
        for (const id of ids) {
          const task = Option.getOrThrow(yield* tasks.get(Ids.TaskId.make(id)))
          expect([id, task.status, Number.isInteger(task.updatedAt)]).toEqual([id, "SUCCESS", true])
        }
      }))

    it.scoped("transient failures back off honouring Retry-After; permanent ones end FAILURE with their class; a deadline ends TIMEOUT and cancels the job", () =>
      Effect.gen(function*() {
        const store = yield* Layer.build(backend)
        const tasks = Context.get(store, TaskStore.TaskStore)
        const calls = yield* Ref.make<ReadonlyArray<readonly [string, number]>>([])
        const cancelled = yield* Ref.make<ReadonlyArray<string>>([])
        const upstream = Layer.succeed(Upstream.Upstream, {
          submit: (_, { taskId }) =>
            Effect.gen(function*() {
              const now = yield* Clock.currentTimeMillis
              const before = (yield* Ref.getAndUpdate(calls, (all) => [...all, [taskId, now] as const])).filter(([id]) => id === taskId)
              if (taskId === "busy" && before.length === 0) {
                return yield* new UpstreamError({ message: "429", reason: null, retryable: true, retryAfterMs: 20_000 })
              }
              if (taskId === "refused") return yield* new UpstreamError({ message: "nsfw", reason: "CONTENT_MODERATION", retryable: false })
              if (taskId === "late") return { _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("job-late") }
              return { _tag: "Completed" as const, result }
            }),
          poll: () => Effect.succeed({ _tag: "Running" as const }),
          cancel: (upstreamId) => Ref.update(cancelled, (all) => [...all, upstreamId])
        })
        yield* tasks.create(Testing.record({ id: "busy", job }))
        yield* tasks.create(Testing.record({ id: "refused", job }))
        yield* tasks.create(Testing.record({ id: "late", deadlineAt: 30_000, job: { ...job, sync: false } }))
        yield* Layer.build(engine(store, upstream, {}))
        yield* advance(34)
        // The last steps' writes may still be on their way (PostgreSQL I/O): let the event loop turn.
        for (let turn = 0; turn < 500; turn++) {
          const late = Option.getOrThrow(yield* tasks.get(Ids.TaskId.make("late")))
          if (late.status === "TIMEOUT" && (yield* Ref.get(cancelled)).length > 0) break
          yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        }
        const busy = (yield* Ref.get(calls)).filter(([id]) => id === "busy").map(([, at]) => at)
        expect(busy).toHaveLength(2)
        expect(busy[1]! - busy[0]!).toBeGreaterThanOrEqual(20_000)
        const get = (id: string) => Effect.map(tasks.get(Ids.TaskId.make(id)), Option.getOrThrow)
        expect((yield* get("busy")).attempts).toMatchObject([{ outcome: "succeeded", transientFailures: 1 }])
        expect([(yield* get("refused")).status, (yield* get("refused")).failureReason]).toEqual(["FAILURE", "CONTENT_MODERATION"])
        expect((yield* get("late")).status).toBe("TIMEOUT")
        expect(yield* Ref.get(cancelled)).toEqual(["job-late"])
      }))

    it.scoped("a worker that dies after the upstream accepted, before writing it down: its successor's submit carries the same key, and the upstream runs one job per attempt", () =>
      Effect.gen(function*() {
        const store = yield* Layer.build(backend)
        const tasks = Context.get(store, TaskStore.TaskStore)
        const stats = new Simulator.Stats()
        const simulator = yield* Layer.build(
          Simulator.layer({ profile: "demo", stats }).pipe(
            Layer.provide(MemoryMediaStore.layer({ baseUrl: "https://cdn.test/media/" })),
            Layer.provide(Ids.layerTest)
          )
        )
        const upstream = Context.get(simulator, Upstream.Upstream)
        // The first worker's submits reach the upstream, then the worker dies before the answer is written.
        const dying = Layer.succeed(Upstream.Upstream, {
          ...upstream,
          submit: (submitted, context) => Effect.zipRight(upstream.submit(submitted, context), Effect.never)
        })
        const ids = Array.from({ length: 12 }, (_, i) => `t${String(i).padStart(2, "0")}`)
        for (const id of ids) yield* tasks.create(Testing.record({ id, job: { ...job, sync: false } }))
        yield* Effect.scoped(Effect.gen(function*() {
          yield* Layer.build(engine(store, dying, { releaseOnStop: false, leaseDuration: "5 seconds", upstreamCallTimeout: "4 seconds" }))
          yield* advance(1)
        }))
        expect(stats.jobs).toBe(12)
        yield* Layer.build(engine(store, Layer.succeedContext(simulator), { leaseDuration: "5 seconds" }))
        yield* advance(15)
        for (const id of ids) {
          const task = Option.getOrThrow(yield* tasks.get(Ids.TaskId.make(id)))
          expect([id, task.status, task.attempts.map((attempt) => attempt.number)]).toEqual([id, "SUCCESS", [1]])
        }
        expect(stats.jobs).toBe(12)
      }))

    it.scoped("a stopping engine gives its task back; another engine takes it at once, ahead of later work", () =>
      Effect.gen(function*() {
        const store = yield* Layer.build(backend)
        const tasks = Context.get(store, TaskStore.TaskStore)
        const starts = yield* Ref.make<ReadonlyArray<readonly [string, number]>>([])
        yield* tasks.create(Testing.record({ id: "first", job }))
        const scope = yield* Scope.make()
        yield* Layer.buildWithScope(engine(store, timed(1, starts, new Set(["first"])), { shutdownGrace: "2 seconds" }), scope)
        yield* advance(1)
        for (let i = 0; i < 5; i++) yield* tasks.create(Testing.record({ id: `later${i}`, createdAt: 1_000, job }))
        const stopping = yield* Effect.fork(Scope.close(scope, Exit.void))
        yield* advance(3)
        yield* Fiber.join(stopping)
        const given = Option.getOrThrow(yield* tasks.get(Ids.TaskId.make("first")))
        expect([given.status, given.leaseOwner]).toEqual(["PROCESSING", null])
        yield* Layer.build(
          engine(store, timed(1, starts), { maxRunning: 1, pollInterval: "1 hour" }).pipe(
            Layer.provide(Layer.succeed(TaskEvents.CallbackWakeup, { wake: Effect.void }))
          )
        )
        yield* advance(1)
        expect((yield* Ref.get(starts)).map(([id]) => id).slice(0, 2)).toEqual(["first", "first"])
      }))
  })
}
