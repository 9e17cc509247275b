/**
 * Credits through the whole task life on every backend (memory, SQLite, PostgreSQL when
 * MEDIAGATE_TEST_PG_URL is set): a hundred and more concurrent submits with random outcomes
 * (success, upstream failure, timeout, cancellation, too little credit), every ledger
 * movement asked twice at once, crashes between a task's write and its settlement, submits
 * that die storing the task with its hold (after holding the price, when the ledger is in
 * another database than the tasks), and an engine that dies mid-flight
 * and is replaced. Once everything has ended and the settlement sweep has run: the balance
 * equals the sum of the entries, nothing is still held, every stored task has exactly one
 * reservation and one end (a charge exactly when it succeeded), no movement was written
 * twice, and the balance is what the successes cost.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import type { Accounts } from "@mediagate/core"
import {
  IdempotencyKeys,
  Ids,
  Ledger,
  ModelCatalog,
  Moderation,
  Pricing,
  TaskChanges,
  TaskEvents,
  TaskService,
  TaskStore,
  TaskWrites,
  Upstream
} from "@mediagate/core"
import { Engine, Settlements } from "@mediagate/scheduler"
import { MemoryLedger, MemoryMediaStore, MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlLedger, SqlTaskStore } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { Simulator } from "@mediagate/upstream"
import { Context, Duration, Effect, Either, Exit, Layer, Option, Redacted, Scope, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { sized } from "./soak.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-ledger-engine-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0
pgSkipReason("ledger-engine")

type Stores = Layer.Layer<TaskStore.TaskStore | Ledger.Ledger, unknown>

/**
 * Tasks and ledger on one database, each with a client of its own, as the standalone server
 * has them (on SQLite the task store keeps its connection to itself).
 */
const onSql = (client: () => Layer.Layer<SqlClient.SqlClient, unknown>): Stores =>
  Layer.mergeAll(
    SqlTaskStore.layerWith({ tablePrefix: "le_" }).pipe(Layer.provide(client())),
    SqlLedger.layerWith({ tablePrefix: "le_" }).pipe(Layer.provide(client()))
  )

/**
 * Tasks per backend: enough that some submits are refused for want of credit, some die after
 * holding their price and every outcome happens many times (MEDIAGATE_TEST_SOAK=1: 240).
 */
const tasksCount = sized(120, 240)

/** Each backend with its number of tasks. */
const backends: ReadonlyArray<readonly [string, () => Stores, number]> = [
  ["memory", () => Layer.merge(MemoryTaskStore.layer, MemoryLedger.layer), tasksCount],
  ["sqlite", () => {
    const file = join(dir, `l${++files}.db`)
    return onSql(() => Database.layerSqlite(file))
  }, tasksCount],
  ...(pgUrl === undefined ? [] : [[
    "postgres",
    () => {
      const database = freshPgDatabase(pgUrl!, "ledger_engine")
      return Layer.unwrapScoped(Effect.map(database, (url) => onSql(() => Database.layerPg(Redacted.make(url)))))
    },
    tasksCount
  ] as const])
]

const owner: Accounts.Account = { id: Ids.AccountId.make("acct_busy"), name: "busy" }
/**
 * The model every task runs: an asynchronous one (the engine polls its jobs), so a task that
 * never finishes ends TIMEOUT at its deadline without a call being interrupted.
 */
const model = "dream-4"
const input = (prompt: string) => ({ prompt, n: 2 })
/** Its price, from the catalog's price function and the default table. */
const price = (() => {
  const spec = ModelCatalog.allModels.find((candidate) => candidate.id === model)!
  return spec.price(Either.getOrThrow(spec.normalize(input("p"))).job, Pricing.defaultPrices)
})()
/** Room for about five in six of the tasks held at once: the rest fail INSUFFICIENT_POINTS. */
const startingCreditsFor = (tasksCount: number) => Math.floor((tasksCount * 5) / 6) * price

type Outcome = "succeed" | "fail" | "time out" | "cancel" | "die before storing"

/** A deterministic mix of outcomes and crash points. */
const plan = (tasksCount: number) => {
  let seed = 42
  const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648
  return Array.from({ length: tasksCount }, (_, i) => {
    const r = random()
    const outcome: Outcome = r < 0.5 ? "succeed" : r < 0.65 ? "fail" : r < 0.75 ? "time out" : r < 0.9 ? "cancel" : "die before storing"
    const crash = random()
    return {
      prompt: `task ${i}${outcome === "fail" ? " [sim:fail]" : outcome === "time out" ? " [sim:timeout]" : ""}${outcome === "die before storing" ? " [die]" : ""}`,
      outcome,
      // The first settlement of the task dies before it is written (the process died after the task's write).
      dieBeforeSettling: crash < 0.15,
      // The first settlement is written, then the caller dies before it hears so.
      dieAfterSettling: crash >= 0.15 && crash < 0.3
    }
  })
}

/**
 * The ledger as crashing, retrying callers see it: every movement asked twice at once, and
 * the first settlement of the marked tasks dying before or after it is written.
 */
const flakyLedger = (
  inner: Ledger.Ledger["Type"],
  marks: { readonly before: Set<string>; readonly after: Set<string> }
): Ledger.Ledger["Type"] => {
  const twice = <A, E>(effect: Effect.Effect<A, E>) => Effect.map(Effect.all([effect, effect], { concurrency: 2 }), ([first]) => first)
  const settle = (kind: "charge" | "release") => (input: { readonly id: string; readonly taskId: string; readonly at: number }) =>
    Effect.suspend(() => {
      if (marks.before.delete(input.taskId)) return Effect.dieMessage(`crash before the ${kind} of ${input.taskId}`)
      const dieAfter = marks.after.delete(input.taskId)
      return twice(inner[kind](input)).pipe(Effect.tap(() => (dieAfter ? Effect.dieMessage(`crash after the ${kind} of ${input.taskId}`) : Effect.void)))
    })
  return { ...inner, reserve: (input) => twice(inner.reserve(input)), charge: settle("charge"), release: settle("release") }
}

/**
 * The task store, whose task writes die for `[die]` prompts: with the ledger in the store's
 * database the submit dies in the transaction of its hold and its task, and holds nothing;
 * otherwise it dies after holding the price. With the ledger in the store's database a task's
 * ending write settles it too (`updateSettled`), and the marked tasks' first such write dies
 * before it is written, or after.
 */
const dyingStore = (
  inner: TaskStore.TaskStore["Type"],
  marks: { readonly before: Set<string>; readonly after: Set<string> }
): TaskStore.TaskStore["Type"] => {
  const dies = (task: { readonly job: { readonly prompt: string } }) => task.job.prompt.includes("[die]")
  const createHeld = inner.createHeld
  const updateSettled = inner.updateSettled
  return {
    ...inner,
    create: (task, callbacks) => (dies(task) ? Effect.dieMessage("crash before the task was stored") : inner.create(task, callbacks)),
    ...(createHeld === undefined ? {} : {
      createHeld: (task, callbacks, hold) => (dies(task) ? Effect.dieMessage("crash before the transaction of the task and its hold") : createHeld(task, callbacks, hold))
    }),
    ...(updateSettled === undefined ? {} : {
      updateSettled: (task, version, callbacks, end) =>
        Effect.suspend(() => {
          if (marks.before.delete(task.id)) return Effect.dieMessage(`crash before the ending write of ${task.id}`)
          const dieAfter = marks.after.delete(task.id)
          return updateSettled(task, version, callbacks, end).pipe(Effect.tap(() => (dieAfter ? Effect.dieMessage(`crash after the ending write of ${task.id}`) : Effect.void)))
        })
    })
  }
}

/** Store, ledger and upstream calls under way, counted by `counting`. */
const inflight = { count: 0 }

/** The service with each of its calls counted in `inflight` while it runs. */
const counting = <S extends object>(service: S): S =>
  Object.fromEntries(Object.entries(service).map(([key, value]) => [
    key,
    typeof value !== "function" ? value : (...args: ReadonlyArray<unknown>) => {
      const result = value(...args)
      return Effect.isEffect(result)
        ? Effect.suspend(() => {
          inflight.count++
          return result.pipe(Effect.ensuring(Effect.sync(() => inflight.count--)))
        })
        : result
    }
  ])) as S

/** One turn of the event loop, timers included (database I/O, the runtime's yields). */
const turn = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 0)))

/**
 * Lets real time pass until no store or ledger call has been under way for ten turns in a
 * row: everything the last change of virtual time woke has done its I/O. So the test moves
 * virtual time only when the system waits on it, however slowly the database answers.
 */
const settle = Effect.gen(function*() {
  // Bounded by real time, not turns: under load one PostgreSQL round trip outlasted 20,000 turns.
  const limit = performance.now() + 20_000
  for (let quiet = 0; quiet < 10;) {
    if (performance.now() > limit) return yield* Effect.dieMessage(`the stores never went quiet (${inflight.count} calls under way)`)
    yield* turn
    quiet = inflight.count === 0 ? quiet + 1 : 0
  }
})

/** Advances virtual time `steps` times by `step`, each time until the stores are quiet. */
const advance = (steps: number, step: Duration.DurationInput = "1 second") =>
  Effect.gen(function*() {
    for (let i = 0; i < steps; i++) {
      yield* TestClock.adjust(step)
      yield* settle
    }
  })

/**
 * Short leases, so the dying engine's tasks are taken up soon; no time limit on upstream
 * calls that a step of virtual time could reach: on a loaded machine a 10-second step may
 * land while the runtime still has a poll queued (the memory store answers at once, so
 * its calls never look in flight), and timeouts in a row are the likeliest way a task that
 * should have timed out ended FAILURE, seen twice on memory under load.
 */
const engineOptions: Engine.Options = { leaseDuration: "5 seconds", heartbeatWindow: "5 seconds", maxRunning: 100, upstreamCallTimeout: "1 hour" }

for (const [name, stores, tasksCount] of backends) {
  const startingCredits = startingCreditsFor(tasksCount)
  describe(`credits through the engine on ${name}`, () => {
    it.scoped(`${tasksCount} concurrent tasks with random outcomes, crashes and retries: the ledger balances, nothing twice`, () =>
      Effect.gen(function*() {
        const base = yield* Layer.build(stores())
        const ledger = Context.get(base, Ledger.Ledger)
        const store = Context.get(base, TaskStore.TaskStore)
        inflight.count = 0
        yield* ledger.credit({ id: "start", accountId: owner.id, amount: startingCredits, at: 0, note: "starting credits" })

        const tasks = plan(tasksCount)
        const marks = { before: new Set<string>(), after: new Set<string>() }
        const flaky = Layer.mergeAll(
          Layer.succeed(Ledger.Ledger, counting(flakyLedger(ledger, marks))),
          Layer.succeed(TaskStore.TaskStore, counting(dyingStore(store, marks)))
        )
        const media = MemoryMediaStore.layer({ baseUrl: "https://cdn.test/media/" })
        const simulator = Layer.effect(Upstream.Upstream, Effect.map(Upstream.Upstream, counting)).pipe(
          Layer.provide(Simulator.layer({ profile: "demo" })),
          Layer.provide(media),
          Layer.provide(Ids.layerTest)
        )
        const common = Layer.mergeAll(Ids.layerTest, ModelCatalog.layer, Moderation.layerAllowAll, simulator)
        // The submitting node and each engine have their own write path, with no deliverer and no engine to wake here.
        const writes = TaskWrites.layer.pipe(Layer.provide([TaskChanges.layer, TaskEvents.CallbackWakeup.layerNone]))
        const service = yield* Layer.build(TaskService.Default.pipe(
          Layer.provide(writes),
          Layer.provide([TaskChanges.layer, IdempotencyKeys.layerMemory, TaskEvents.TaskWakeup.layerNone, TaskEvents.CallbackWakeup.layerNone]),
          Layer.provide(Layer.mergeAll(flaky, common))
        ))
        const engine = (scope: Scope.Scope, options: Engine.Options) =>
          Layer.buildWithScope(Engine.layer(options).pipe(Layer.provide(writes), Layer.provide(Layer.mergeAll(flaky, common))), scope)

        // A first engine that dies (its leases are not given back) a few seconds in.
        const firstScope = yield* Scope.make()
        yield* engine(firstScope, { releaseOnStop: false, ...engineOptions })

        const submitted = yield* Effect.forEach(tasks, (task) =>
          Effect.gen(function*() {
            const exit = yield* Effect.exit(Effect.flatMap(TaskService, (s) =>
              s.submit(owner, { model, input: input(task.prompt) })).pipe(Effect.provide(service)))
            if (Exit.isFailure(exit)) return { ...task, taskId: null }
            const taskId = exit.value.taskId
            if (task.dieBeforeSettling) marks.before.add(taskId)
            if (task.dieAfterSettling) marks.after.add(taskId)
            return { ...task, taskId }
          }), { concurrency: 50 })
        expect(submitted.filter((task) => task.taskId === null).length).toBe(tasks.filter((task) => task.outcome === "die before storing").length)

        yield* advance(2)
        yield* Scope.close(firstScope, Exit.void)
        yield* engine(yield* Effect.scope, engineOptions)
        for (const task of submitted) {
          if (task.outcome === "cancel" && task.taskId !== null) {
            yield* Effect.exit(Effect.flatMap(TaskService, (s) => s.cancel(owner, Ids.TaskId.make(task.taskId!))).pipe(Effect.provide(service)))
          }
        }

        expect(price).toBeGreaterThan(0)
        // Every stored task ends. Virtual time moves a second at a time, each time once the
        // stores are quiet, until every task but those that never finish has ended (well
        // within the model's 15-minute deadline), then in larger steps past the deadline for those.
        const stored = submitted.filter((task) => task.taskId !== null)
        const statuses = new Map<string, { status: string; reason: string | null; error: string | null }>()
        const look = Effect.forEach(stored, (task) =>
          statuses.has(task.taskId!) ? Effect.void : Effect.map(store.get(Ids.TaskId.make(task.taskId!)), (found) => {
            const record = Option.getOrThrow(found)
            if (["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"].includes(record.status)) {
              statuses.set(task.taskId!, { status: record.status, reason: record.failureReason, error: record.errorMessage })
            }
          }), { discard: true })
        const finishing = stored.filter((task) => task.outcome !== "time out")
        while (finishing.some((task) => !statuses.has(task.taskId!)) && (yield* TestClock.currentTimeMillis) < 14 * 60_000) {
          yield* advance(1)
          yield* look
        }
        expect(finishing.filter((task) => !statuses.has(task.taskId!))).toEqual([])
        while (statuses.size < stored.length && (yield* TestClock.currentTimeMillis) < 60 * 60_000) {
          yield* advance(1, "10 seconds")
          yield* look
        }
        expect(statuses.size).toBe(stored.length)

        // Crashes left reservations open; the sweep (with the real ledger: the crashed
        // process is gone) settles them once they are older than its grace.
        const sweepScope = yield* Effect.scope
        yield* Layer.buildWithScope(Settlements.layer({ interval: "1 minute", grace: "2 minutes" }).pipe(Layer.provide(Layer.succeedContext(base)), Layer.provide(Ids.layerTest)), sweepScope)
        // Until nothing is open: on PostgreSQL a sweep's movements are I/O that virtual time does not wait for.
        for (let round = 0; round < 60 && (yield* ledger.open({ before: Number.MAX_SAFE_INTEGER, limit: 1 })).length > 0; round++) {
          yield* advance(1, "30 seconds")
        }

        const entries = yield* ledger.entries(owner.id, 10_000)
        const { balance, reserved } = yield* ledger.balance(owner.id)
        expect(balance).toBe(entries.reduce((sum, entry) => sum + entry.amount, 0))
        expect(reserved).toBe(entries.reduce((sum, entry) => sum + entry.held, 0))
        expect(reserved).toBe(0)
        expect(new Set(entries.map((entry) => entry.id)).size).toBe(entries.length)
        expect(yield* ledger.open({ before: Number.MAX_SAFE_INTEGER, limit: 10 })).toEqual([])

        const byTask = new Map<string, Array<Ledger.LedgerEntry>>()
        for (const entry of [...entries].reverse()) {
          if (entry.taskId !== null) byTask.set(entry.taskId, [...(byTask.get(entry.taskId) ?? []), entry])
        }
        let successes = 0
        let refused = 0
        for (const task of stored) {
          const { error, reason, status } = statuses.get(task.taskId!)!
          const movements = (byTask.get(task.taskId!) ?? []).map((entry) => [entry.kind, entry.amount, entry.held])
          if (reason === "INSUFFICIENT_POINTS") {
            refused++
            expect(movements).toEqual([])
            continue
          }
          if (status === "SUCCESS") successes++
          expect(movements).toEqual([["reserve", 0, price], status === "SUCCESS" ? ["charge", -price, -price] : ["release", 0, -price]])
          // (The task's error in the message: a wrong end says why it ended so.)
          expect(status, `${task.prompt}: ${error}`).toBe(
            task.outcome === "succeed" ? "SUCCESS" : task.outcome === "fail" ? "FAILURE" : task.outcome === "time out" ? "TIMEOUT" : status
          )
        }
        // Submits that died: on one database the hold died with the task, and nothing is left
        // of them; otherwise after holding the price, which each gave back itself, no task.
        const orphans = [...byTask.keys()].filter((taskId) => !statuses.has(taskId))
        if (store.databaseId !== undefined && store.databaseId === ledger.databaseId) {
          expect(orphans).toEqual([])
        } else {
          // (A dying submit refused for want of credit held nothing, so it left no orphan.)
          expect(orphans.length).toBeGreaterThan(0)
          expect(orphans.length).toBeLessThanOrEqual(tasks.filter((task) => task.outcome === "die before storing").length)
          for (const taskId of orphans) expect(byTask.get(taskId)!.map((entry) => entry.kind)).toEqual(["reserve", "release"])
        }

        expect(successes).toBeGreaterThan(tasksCount / 6)
        expect(refused).toBeGreaterThan(0)
        expect(balance).toBe(startingCredits - successes * price)
      }), { timeout: 240_000 })
  })
}
