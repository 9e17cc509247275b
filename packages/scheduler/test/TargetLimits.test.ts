/**
 * A route target's `maxRunning` through the router and two engines (two workers, as two
 * nodes) sharing one store: memory, one SQLite file, and PostgreSQL (two connection pools on
 * one fresh database, when MEDIAGATE_TEST_PG_URL is set). The limit is counted by the store's
 * claim, so it holds across both engines; tasks over it wait PENDING, accounts in turn, and
 * start when a running one ends (the engines' periodic scans are an hour apart here, so only
 * the wake-up of a step's end starts them). Timed by the TestClock.
 */
import { FetchHttpClient } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Ids, ModelCatalog, TaskServiceAlone, TaskStore, Upstream } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlTaskStore } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { Router } from "@mediagate/upstream"
import { Clock, Context, Duration, Effect, Layer, Option, Redacted, Ref, TestClock } from "effect"
import type { Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { Engine } from "../src/index.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-targets-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0

type Stores = Effect.Effect<readonly [Context.Context<TaskStore.TaskStore>, Context.Context<TaskStore.TaskStore>], unknown, Scope.Scope>

/** Each backend's store as the two nodes see it: one store (memory, one SQLite file), or two pools on one PostgreSQL database. */
const backends: ReadonlyArray<readonly [string, Stores]> = [
  ["memory", Effect.map(Layer.build(MemoryTaskStore.layer), (store) => [store, store] as const)],
  ["sqlite", Effect.suspend(() =>
    Effect.map(
      Layer.build(SqlTaskStore.layer.pipe(Layer.provide(Database.layerSqlite(join(dir, `t${++files}.db`))))),
      (store) => [store, store] as const
    ))],
  ...(pgUrl === undefined ? [] : [[
    "postgres",
    Effect.gen(function*() {
      const url = yield* freshPgDatabase(pgUrl!, "targets")
      const node = () => Layer.build(SqlTaskStore.layer.pipe(Layer.provide(Database.layerPg(Redacted.make(url)))))
      const first = yield* node()
      return [first, yield* node()] as const
    })
  ] as const])
]
pgSkipReason("TargetLimits")

const target = "fal:fal-ai/flux/dev"
const job = Testing.job({ ratio: null, width: null, height: null })

/** A provider whose jobs (synchronous calls) take 10 s; counts the jobs running at it and records each start. */
const holdingProvider = (running: Ref.Ref<number>, peak: Ref.Ref<number>, starts: Ref.Ref<ReadonlyArray<readonly [string, number]>>): Router.Provider => ({
  name: "fal",
  submit: (_, __, { taskId }) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      yield* Ref.update(starts, (all) => [...all, [taskId, now] as const])
      const n = yield* Ref.updateAndGet(running, (n) => n + 1)
      yield* Ref.update(peak, (p) => Math.max(p, n))
      yield* Effect.sleep(Duration.seconds(10)).pipe(Effect.ensuring(Ref.update(running, (n) => n - 1)))
      return { _tag: "Completed" as const, result: { type: "image" as const, urls: ["https://cdn.example/a.png"] } }
    }),
  poll: () => Effect.succeed({ _tag: "Running" as const })
})

/** The router with one route whose fal target runs at most two jobs at once. */
const router = (provider: Router.Provider) =>
  Router.layer({
    routes: [{ model: "alpha-image-2", targets: [{ provider: "fal", model: "fal-ai/flux/dev", maxRunning: 2, input: (j) => ({ prompt: j.prompt }) }] }],
    providers: [provider]
  }).pipe(Layer.provide(FetchHttpClient.layer))

/** An engine (a node of its own: its own worker name) on `store`. */
const engine = (store: Context.Context<TaskStore.TaskStore>, upstream: Layer.Layer<Upstream.Upstream>) =>
  Engine.layer({ pollInterval: "1 hour" }).pipe(
    Layer.provide(TaskServiceAlone.writes),
    Layer.provide([upstream, Ids.layerTest, ModelCatalog.layer, Layer.succeedContext(counted(store))])
  )

/** Store operations of the engines under test still waiting for their answer (see `counted`). */
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
 * Virtual time in steps of 250 ms; after each, event-loop turns until the engines' store
 * operations have all been answered and stayed so for a few turns (PostgreSQL's answers are
 * I/O, which the TestClock does not hold still). Bounded, so a stuck operation fails the test.
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

const statuses = (store: Context.Context<TaskStore.TaskStore>, ids: ReadonlyArray<string>) =>
  Effect.forEach(ids, (id) =>
    Effect.map(Context.get(store, TaskStore.TaskStore).get(Ids.TaskId.make(id)), (task) => Option.getOrThrow(task)))

for (const [name, stores] of backends) {
  describe(`route target maxRunning on ${name}, two engines`, () => {
    it.scoped("a target with maxRunning 2 never runs more than 2 jobs across both engines; the rest wait PENDING and all finish", () =>
      Effect.gen(function*() {
        const [first, second] = yield* stores
        const running = yield* Ref.make(0)
        const peak = yield* Ref.make(0)
        const starts = yield* Ref.make<ReadonlyArray<readonly [string, number]>>([])
        const upstream = Layer.succeedContext(yield* Layer.build(router(holdingProvider(running, peak, starts))))
        const ids = Array.from({ length: 8 }, (_, i) => `t${i}`)
        const tasks = Context.get(first, TaskStore.TaskStore)
        // Tasks carry the target's name as the key they count under (as TaskService writes it).
        for (const [i, id] of ids.entries()) yield* tasks.create(Testing.record({ id, ownerId: `acct${i % 3}`, job, provider: target }))
        yield* Layer.build(engine(first, upstream))
        yield* Layer.build(engine(second, upstream))
        yield* advance(2)
        expect(yield* Ref.get(running)).toBe(2)
        const waiting = (yield* statuses(first, ids)).filter((task) => task.status === "PENDING")
        expect(waiting).toHaveLength(6)
        yield* advance(50)
        const ended = yield* statuses(second, ids)
        expect(ended.map((task) => [task.id, task.status, task.provider])).toEqual(ids.map((id) => [id, "SUCCESS", target]))
        expect(yield* Ref.get(peak)).toBe(2)
        expect(yield* Ref.get(starts)).toHaveLength(8)
        // Each waiting job started as a slot freed (the job two starts before it ended), woken
        // by that step's end, not by a scan (an hour apart): within half a second.
        const times = (yield* Ref.get(starts)).map(([, at]) => at).sort((a, b) => a - b)
        for (let i = 2; i < times.length; i++) {
          expect(times[i]! - (times[i - 2]! + 10_000)).toBeGreaterThanOrEqual(0)
          expect(times[i]! - (times[i - 2]! + 10_000)).toBeLessThanOrEqual(500)
        }
      }))

    it.scoped("account A submits 10, then account B 1: B's task takes one of the next two slots, before A's backlog drains", () =>
      Effect.gen(function*() {
        const [first, second] = yield* stores
        const running = yield* Ref.make(0)
        const peak = yield* Ref.make(0)
        const starts = yield* Ref.make<ReadonlyArray<readonly [string, number]>>([])
        const upstream = Layer.succeedContext(yield* Layer.build(router(holdingProvider(running, peak, starts))))
        const tasks = Context.get(first, TaskStore.TaskStore)
        for (let i = 0; i < 10; i++) yield* tasks.create(Testing.record({ id: `a${i}`, ownerId: "A", job, provider: target }))
        yield* Layer.build(engine(first, upstream))
        yield* Layer.build(engine(second, upstream))
        yield* advance(1)
        yield* Context.get(second, TaskStore.TaskStore).create(Testing.record({ id: "b0", ownerId: "B", createdAt: 1_000, job, provider: target }))
        yield* advance(12)
        const order = (yield* Ref.get(starts)).map(([id]) => id)
        expect(order.slice(0, 2).every((id) => id.startsWith("a"))).toBe(true)
        expect(order.slice(2, 4)).toContain("b0")
        expect(yield* Ref.get(peak)).toBe(2)
      }))
  })
}
