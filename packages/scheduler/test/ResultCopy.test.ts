/**
 * Copying a finished job's results is a step of its own (docs/decisions.md, "Result
 * files"): the engine against a scripted upstream that hosts its results, on every store
 * backend (memory, SQLite, and PostgreSQL when MEDIAGATE_TEST_PG_URL is set), timed by the
 * TestClock. The job is submitted once; the upstream's result is kept on the running attempt
 * (which the store must give back as written); only the copy is tried again; a copy that
 * cannot succeed fails the task naming the job; and the engine never submits an attempt whose
 * job the upstream accepted already.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ids, Metrics, ModelCatalog, Task, TaskServiceAlone, TaskStore, Upstream } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlTaskStore } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { Context, Duration, Effect, Layer, Metric, Option, Redacted, Ref, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { Engine } from "../src/index.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-copy-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0

const backends: ReadonlyArray<readonly [string, Layer.Layer<TaskStore.TaskStore, unknown>]> = [
  ["memory", MemoryTaskStore.layer],
  ["sqlite", Layer.suspend(() => SqlTaskStore.layer.pipe(Layer.provide(Database.layerSqlite(join(dir, `c${++files}.db`)))))],
  ...(pgUrl === undefined ? [] : [[
    "postgres",
    SqlTaskStore.layer.pipe(
      Layer.provide(Layer.unwrapScoped(Effect.map(freshPgDatabase(pgUrl, "copy"), (url) => Database.layerPg(Redacted.make(url)))))
    )
  ] as const])
]
pgSkipReason("ResultCopy")

const upstreamResult: Task.TaskResult = { type: "image", urls: ["https://upstream.example/out.png"] }
const hostedResult: Task.TaskResult = { type: "image", urls: ["https://cdn.mediagate.test/media/0123.png"] }

/** What the scripted upstream saw. */
interface Calls {
  readonly submits: Ref.Ref<number>
  readonly polls: Ref.Ref<number>
  readonly copies: Ref.Ref<number>
}

/**
 * An upstream that hosts its results: a job completes at submit (`sync`) or is accepted as
 * `up-1` and completes at its first poll; each copy fails with `failure` while `copyFails`
 * says so.
 */
const hosting = (calls: Calls, copyFails: (copy: number) => Upstream.ResultCopyError | undefined, sync = true) =>
  Layer.succeed(Upstream.Upstream, {
    submit: () =>
      Effect.as(
        Ref.update(calls.submits, (n) => n + 1),
        sync ? { _tag: "Completed" as const, result: upstreamResult } : { _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("up-1") }
      ),
    poll: () => Effect.as(Ref.update(calls.polls, (n) => n + 1), { _tag: "Completed" as const, result: upstreamResult }),
    hostsResults: (job) => job.model === "alpha-image-2",
    hostResult: (_, result) =>
      Effect.flatMap(Ref.updateAndGet(calls.copies, (n) => n + 1), (copy) => {
        expect(result).toEqual(upstreamResult)
        const failure = copyFails(copy)
        return failure === undefined ? Effect.succeed(hostedResult) : Effect.fail(failure)
      })
  })

const transient = new Upstream.ResultCopyError({ message: "copying the result failed: HTTP 503", retryable: true })

/** Store calls under way (`counted`): on SQLite and PostgreSQL the engine's writes are real I/O. */
const inflight = { count: 0 }

/** The store with each of its calls counted in `inflight` while it runs. */
const counted = (store: TaskStore.TaskStore["Type"]): TaskStore.TaskStore["Type"] =>
  Object.fromEntries(Object.entries(store).map(([key, value]) => [
    key,
    typeof value !== "function" ? value : (...args: ReadonlyArray<unknown>) => {
      const result = (value as (...args: ReadonlyArray<unknown>) => unknown)(...args)
      return Effect.isEffect(result)
        ? Effect.suspend(() => {
          inflight.count++
          return Effect.ensuring(result, Effect.sync(() => inflight.count--))
        })
        : result
    }
  ])) as TaskStore.TaskStore["Type"]

/** One turn of the event loop (PostgreSQL's answers arrive as I/O). */
const turn = Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))

/**
 * Event-loop turns until no store call has been under way for ten turns in a row: what the
 * last move of virtual time woke is done. The bound is real time, not turns: on a loaded
 * machine one PostgreSQL round trip outlasted 20,000 turns (CI, four suites beside it).
 */
const settle = Effect.gen(function*() {
  const limit = performance.now() + 20_000
  for (let quiet = 0; quiet < 10;) {
    if (performance.now() > limit) return yield* Effect.dieMessage(`the store never went quiet (${inflight.count} calls under way)`)
    yield* turn
    quiet = inflight.count === 0 ? quiet + 1 : 0
  }
})

const advance = (seconds: number, step: Duration.DurationInput = "1 second") =>
  Effect.gen(function*() {
    for (let i = 0; i < seconds; i++) {
      yield* TestClock.adjust(step)
      yield* settle
    }
  })

const refused = Effect.map(Metric.value(Metrics.upstreamResubmitsOf("refused")), (state) => state.count)

for (const [name, backend] of backends) {
  describe(`Result copies on ${name}`, () => {
    /** The store, a fresh scripted upstream's calls, and a way to start an engine on them. */
    const setup = Effect.gen(function*() {
      const built = yield* Layer.build(backend)
      const store = counted(Context.get(built, TaskStore.TaskStore))
      const context = Context.add(built, TaskStore.TaskStore, store)
      const calls: Calls = { submits: yield* Ref.make(0), polls: yield* Ref.make(0), copies: yield* Ref.make(0) }
      // Started, and its first look at the store answered, before virtual time moves.
      const start = (upstream: Layer.Layer<Upstream.Upstream>) =>
        Layer.build(Engine.layer({ pollInterval: "1 hour" }).pipe(Layer.provide(TaskServiceAlone.writes), Layer.provide([upstream, Ids.layerTest, ModelCatalog.layer, Layer.succeedContext(context)]))).pipe(
          Effect.zipLeft(settle)
        )
      const get = (id: string) => Effect.map(store.get(Ids.TaskId.make(id)), Option.getOrThrow)
      return { store, calls, start, get }
    })

    it.scoped("a sync job's result that fails to copy twice: one submit, PROCESSING while copying, SUCCESS with the copy; the attempt kept every fact", () =>
      Effect.gen(function*() {
        const { calls, get, start, store } = yield* setup
        yield* store.create(Testing.record({ id: "t1" }))
        yield* start(hosting(calls, (copy) => (copy <= 2 ? transient : undefined)))
        yield* advance(5, "20 millis")
        // Recorded, then the first copy failed: the task waits for the retry, still PROCESSING.
        const waiting = yield* get("t1")
        expect(waiting.status).toBe("PROCESSING")
        expect(waiting.result).toBeNull()
        // Read back from the store: the result references and the copy's failures round-trip.
        expect(waiting.attempts).toEqual([{
          number: 1,
          model: "alpha-image-2",
          upstreamId: null,
          startedAt: 0,
          endedAt: null,
          outcome: "running",
          error: "copying the result failed: HTTP 503",
          transientFailures: 0,
          upstreamResult,
          copyFailures: 1
        }])
        yield* advance(10)
        const done = yield* get("t1")
        expect(done.status).toBe("SUCCESS")
        expect(done.result).toEqual(hostedResult)
        expect(done.attempts[0]).toMatchObject({ outcome: "succeeded", upstreamResult, copyFailures: 2 })
        expect(yield* Ref.get(calls.submits)).toBe(1)
        expect(yield* Ref.get(calls.copies)).toBe(3)
      }))

    it.scoped("a task found with its job done and its result not copied (a crash in between) runs only the copy", () =>
      Effect.gen(function*() {
        const { calls, get, start, store } = yield* setup
        const before = yield* refused
        yield* store.create(Testing.record({
          id: "t2",
          status: "PROCESSING",
          upstreamId: "up-7",
          job: Testing.job({ sync: false }),
          attempts: [{
            number: 1,
            model: "alpha-image-2",
            upstreamId: "up-7",
            startedAt: 0,
            endedAt: null,
            outcome: "running",
            error: null,
            transientFailures: 0,
            upstreamResult
          }]
        }))
        yield* start(hosting(calls, () => undefined))
        yield* advance(1)
        expect((yield* get("t2")).status).toBe("SUCCESS")
        expect([yield* Ref.get(calls.submits), yield* Ref.get(calls.polls), yield* Ref.get(calls.copies)]).toEqual([0, 0, 1])
        expect(yield* refused).toBe(before)
      }))

    it.scoped("a result that can never be copied fails the task at once, naming the reason and the upstream job", () =>
      Effect.gen(function*() {
        const { calls, get, start, store } = yield* setup
        yield* store.create(Testing.record({ id: "t3", job: Testing.job({ sync: false }) }))
        yield* start(hosting(calls, () => new Upstream.ResultCopyError({ message: "the result is not an image or video we serve (text/html)", retryable: false }), false))
        yield* advance(2)
        const ended = yield* get("t3")
        expect(ended.status).toBe("FAILURE")
        expect(ended.failureReason).toBeNull()
        expect(ended.errorMessage).toBe("the result of upstream job up-1 cannot be copied: the result is not an image or video we serve (text/html)")
        expect(ended.attempts[0]).toMatchObject({ upstreamId: "up-1", outcome: "failed", upstreamResult, copyFailures: 1 })
        expect([yield* Ref.get(calls.submits), yield* Ref.get(calls.polls), yield* Ref.get(calls.copies)]).toEqual([1, 1, 1])
      }))

    it.scoped("a copy that keeps failing ends FAILURE before the deadline, not TIMEOUT, after backing off; one submit", () =>
      Effect.gen(function*() {
        const { calls, get, start, store } = yield* setup
        yield* store.create(Testing.record({ id: "t4", job: Testing.job({ sync: false }), deadlineAt: 120_000 }))
        yield* start(hosting(calls, () => transient, false))
        yield* advance(130)
        const ended = yield* get("t4")
        expect(ended.status).toBe("FAILURE")
        expect(ended.updatedAt).toBeLessThanOrEqual(120_000)
        const copies = yield* Ref.get(calls.copies)
        expect(ended.errorMessage).toBe(
          `the result of upstream job up-1 could not be copied before the deadline (${copies} tries); the last failure: copying the result failed: HTTP 503`
        )
        // 1, 2, 4, 8, 16, 32, 60 s apart (±20%): about 7 tries in 2 minutes.
        expect(copies).toBeGreaterThanOrEqual(5)
        expect(copies).toBeLessThanOrEqual(8)
        expect(yield* Ref.get(calls.submits)).toBe(1)
      }))

    it.scoped("an attempt whose job the upstream accepted is never submitted again: refused, counted, and its job polled", () =>
      Effect.gen(function*() {
        const { calls, get, start, store } = yield* setup
        const before = yield* refused
        // The task lost its upstream id (a bug elsewhere), but its running attempt knows the job.
        yield* store.create(Testing.record({
          id: "t5",
          status: "PROCESSING",
          job: Testing.job({ sync: false }),
          attempts: [{ number: 1, model: "alpha-image-2", upstreamId: "up-9", startedAt: 0, endedAt: null, outcome: "running", error: null, transientFailures: 0 }]
        }))
        yield* start(hosting(calls, () => undefined, false))
        yield* advance(3)
        expect(yield* Ref.get(calls.submits)).toBe(0)
        expect(yield* refused).toBe(before + 1)
        const done = yield* get("t5")
        expect(done.status).toBe("SUCCESS")
        expect(done.upstreamId).toBe("up-9")
        expect(yield* Ref.get(calls.polls)).toBe(1)
      }))
  })
}
