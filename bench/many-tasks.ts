/**
 * `npm run bench:many-tasks`: many long tasks at once, the simulator's realistic
 * profile (`BENCH_TASKS`, default 10,000).
 *
 * 1. Virtual time, on the memory store and on SQLite: the tasks (a mix of motion, clip3, beta-imagine video, canvas images and
 *    alpha-image-2) run through 4 simulated hours on a virtual clock (below); wall time,
 *    tasks done, and upstream calls per task.
 * 2. Real time: 10,000 motion tasks in flight (2 min to 4 h each) for `BENCH_SECONDS`
 *    (default 30) after the first minute of polling; polls per task, resident memory and
 *    the CPU the process used in that window.
 */
import { Heap, Ids, ModelCatalog, TaskServiceAlone, TaskStore, Upstream } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { Engine } from "@mediagate/scheduler"
import { MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlTaskStore } from "@mediagate/store-sql"
import { Simulator } from "@mediagate/upstream"
import { Clock, Context, Duration, Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { writeSection } from "../scripts/benchmarks-doc.js"
import { tmpdir } from "node:os"
import { join } from "node:path"

const tasks = Number(process.env["BENCH_TASKS"] ?? 10_000)
const seconds = Number(process.env["BENCH_SECONDS"] ?? 30)
type StoreKind = "memory" | "sqlite"
const dir = mkdtempSync(join(tmpdir(), "mediagate-bench-many-"))
let file = 0

const kinds = [
  { model: "motion-2.0", output: "video", sync: false, duration: 8 },
  { model: "clip3", output: "video", sync: false, duration: 8 },
  { model: "beta-imagine/text-to-video", output: "video", sync: false, duration: 6 },
  { model: "canvas-2", output: "image", sync: false, duration: null },
  { model: "alpha-image-2", output: "image", sync: true, duration: null }
] as const

/** An upstream that counts the calls of the simulator it wraps. */
const counted = (calls: { n: number }) =>
  Layer.effect(
    Upstream.Upstream,
    Effect.map(Upstream.Upstream, (simulator) => ({
      submit: (job: Parameters<typeof simulator.submit>[0], context: Parameters<typeof simulator.submit>[1]) =>
        Effect.suspend(() => (calls.n++, simulator.submit(job, context))),
      poll: (id: Parameters<typeof simulator.poll>[0], job: Parameters<typeof simulator.poll>[1]) =>
        Effect.suspend(() => (calls.n++, simulator.poll(id, job)))
    }))
  ).pipe(Layer.provide(Simulator.layer({ profile: "realistic" }).pipe(Layer.provide(MemoryMediaStore.layer({ baseUrl: "https://cdn.bench/media/" })), Layer.provide(Ids.layer))))

const setUp = (mix: ReadonlyArray<typeof kinds[number]>, calls: { n: number }, storeKind: StoreKind) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const store = yield* Layer.build(
      storeKind === "memory"
        ? MemoryTaskStore.layer
        : SqlTaskStore.layer.pipe(Layer.provide(Database.layerSqlite(join(dir, `m${++file}.db`))))
    )
    const stored = Context.get(store, TaskStore.TaskStore)
    const ids: Array<Ids.TaskId> = []
    for (let i = 0; i < tasks; i++) {
      const kind = mix[i % mix.length]!
      const id = Ids.TaskId.make(Ids.uuidV7(now, Array.from({ length: 10 }, () => Math.floor(Math.random() * 256))))
      ids.push(id)
      const job = Testing.job({ model: kind.model, output: kind.output, sync: kind.sync, duration: kind.duration, ratio: null, width: 64, height: 64 })
      yield* stored.create(Testing.record({ id, createdAt: now, deadlineAt: now + 6 * 3_600_000, input: { model: kind.model, prompt: "p" }, job }))
    }
    yield* Layer.build(
      // One engine wakes itself for every due time its steps set: its periodic scan (the
      // safety net for other nodes' work) runs every 30 s here, not every second, which in
      // 4 compressed hours would be 14,400 claims of nothing.
      Engine.layer({ maxRunning: tasks, maxRunningPerAccount: tasks, pollInterval: "30 seconds" }).pipe(
        Layer.provide(TaskServiceAlone.writes),
        Layer.provide([counted(calls), Ids.layer, ModelCatalog.layer, Layer.succeedContext(store)])
      )
    )
    return { stored, ids }
  })

/**
 * Virtual time without the TestClock: Effect's TestClock waits, at every wake-up, until
 * every fiber has suspended, polling with real `setTimeout`s, which at tens of thousands of
 * wake-ups is minutes of idle waiting (90% of a profile). This clock keeps its sleepers in
 * order and, whenever the event loop has nothing else to do, moves to the next one's time.
 */
class VirtualClock implements Clock.Clock {
  readonly [Clock.ClockTypeId]: Clock.ClockTypeId = Clock.ClockTypeId
  private now = 0
  private seq = 0
  /** The sleepers by wake-up time, then by order of arrival. */
  private readonly heap = new Heap<Sleeper>((a, b) => a.at < b.at || (a.at === b.at && a.seq < b.seq))
  unsafeCurrentTimeMillis() {
    return this.now
  }
  unsafeCurrentTimeNanos() {
    return BigInt(this.now) * 1_000_000n
  }
  readonly currentTimeMillis = Effect.sync(() => this.now)
  readonly currentTimeNanos = Effect.sync(() => this.unsafeCurrentTimeNanos())
  sleep(duration: Duration.Duration) {
    return Effect.async<void>((resume) => {
      const entry: Sleeper = { at: this.now + Duration.toMillis(duration), seq: this.seq++, resume: () => resume(Effect.void), cancelled: false }
      this.heap.push(entry)
      // A cancelled sleeper waits in the heap until its time: it must not keep its fiber alive.
      return Effect.sync(() => {
        entry.cancelled = true
        entry.resume = () => {}
      })
    })
  }
  /** Runs until `until` (ms of virtual time). */
  async run(until: number) {
    const idle = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)))
    for (;;) {
      await idle()
      // Sleepers interrupted before their time (timeouts of calls that answered) are dropped.
      let next = this.heap.peek()
      while (next !== undefined && next.cancelled) {
        this.heap.pop()
        next = this.heap.peek()
      }
      if (next === undefined || next.at > until) break
      // Every sleeper due at that instant wakes, before the fibers run.
      this.now = Math.max(this.now, next.at)
      while ((next = this.heap.peek()) !== undefined && next.at <= this.now) {
        this.heap.pop()
        if (!next.cancelled) next.resume()
      }
    }
    this.now = until
  }
}

interface Sleeper {
  readonly at: number
  readonly seq: number
  resume: () => void
  cancelled: boolean
}

const virtualTime = (storeKind: StoreKind) => Effect.gen(function*() {
  const clock = new VirtualClock()
  const calls = { n: 0 }
  return yield* Effect.scoped(Effect.gen(function*() {
    const { ids, stored } = yield* setUp(kinds, calls, storeKind)
    const started = performance.now()
    yield* Effect.promise(() => clock.run(4 * 3_600_000))
    const wall = (performance.now() - started) / 1000
    let done = 0
    for (const id of ids) {
      const task = yield* stored.get(id)
      if (task._tag === "Some" && task.value.status === "SUCCESS") done++
    }
    return { wall, done, callsPerTask: calls.n / tasks }
  })).pipe(Effect.withClock(clock))
})

const realTime = Effect.scoped(
  Effect.gen(function*() {
    const calls = { n: 0 }
    yield* setUp([kinds[0]], calls, "sqlite")
    // The first minute of polling (the most frequent), then the window measured.
    yield* Effect.sleep("60 seconds")
    const before = { calls: calls.n, cpu: process.cpuUsage() }
    yield* Effect.sleep(`${seconds} seconds`)
    const cpu = process.cpuUsage(before.cpu)
    return {
      pollsPerTaskPerMinute: ((calls.n - before.calls) / tasks) * (60 / seconds),
      cpuPercent: ((cpu.user + cpu.system) / 1000 / (seconds * 1000)) * 100,
      rssMb: process.memoryUsage().rss / 1024 / 1024
    }
  })
)

const main = Effect.gen(function*() {
  const skipped = { wall: 0, done: 0, callsPerTask: 0 }
  // BENCH_STORES=memory (or sqlite) runs virtual time on that store only, for profiling.
  const stores = (process.env["BENCH_STORES"] ?? "memory,sqlite").split(",")
  const runs = (kind: StoreKind) => process.env["BENCH_REAL_ONLY"] === undefined && stores.includes(kind)
  const virtual = {
    memory: runs("memory") ? yield* virtualTime("memory") : skipped,
    sqlite: runs("sqlite") ? yield* virtualTime("sqlite") : skipped
  }
  console.log(virtual)
  if (process.env["BENCH_VIRTUAL_ONLY"] !== undefined) return
  const real = yield* realTime
  console.log(real)
  rmSync(dir, { recursive: true, force: true })
  const section = [
    "<!-- bench:many-tasks:start -->",
    "## Many long tasks",
    "",
    "Command: `npm run bench:many-tasks` (`BENCH_TASKS`, default 10,000; `BENCH_SECONDS`, default",
    "30). The simulator's realistic profile, one engine; virtual time on the memory store and",
    "on SQLite, real time on SQLite.",
    "",
    `| ${tasks.toLocaleString("en")} tasks | memory | SQLite |`,
    "|---|---|---|",
    `| virtual time (a virtual clock, not the TestClock: see the file): 4 simulated hours of a mix (motion, clip3, beta-imagine video, canvas, alpha-image-2), wall time | ${virtual.memory.wall.toFixed(1)} s | ${virtual.sqlite.wall.toFixed(1)} s |`,
    `| virtual time: tasks done after 4 hours | ${virtual.memory.done.toLocaleString("en")} | ${virtual.sqlite.done.toLocaleString("en")} |`,
    `| virtual time: upstream calls per task (submit and polls) | ${virtual.memory.callsPerTask.toFixed(1)} | ${virtual.sqlite.callsPerTask.toFixed(1)} |`,
    `| real time: motion tasks in flight, polls per task per minute after the first minute | | ${real.pollsPerTaskPerMinute.toFixed(2)} |`,
    `| real time: CPU of the process in that window | | ${real.cpuPercent.toFixed(1)}% of one core |`,
    `| real time: resident memory | | ${real.rssMb.toFixed(0)} MB |`,
    "<!-- bench:many-tasks:end -->"
  ].join("\n")
  writeSection(section)
})

Effect.runPromise(main).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
