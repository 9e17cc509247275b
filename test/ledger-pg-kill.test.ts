/**
 * Credits on PostgreSQL while the database drops the store's connections: the standalone
 * composition (engine, simulator, SQL task store and ledger, settlement sweep at its
 * defaults) runs a few dozen tasks while a separate connection keeps terminating every
 * other backend of the database (`pg_terminate_backend`). A settlement write that dies with
 * its connection must not wait for the settlement sweep (every 5 minutes, for reservations
 * older than 10): within seconds of the kills stopping, every ended task is charged
 * (SUCCESS) or released (any other end), nothing is held, and the balance is the sum of the
 * entries. Database I/O is real, so real time passes here: every wait polls with a bound.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import type { Accounts, StoreError } from "@mediagate/core"
import { Ids, Ledger, Task, TaskService, TaskStore } from "@mediagate/core"
import { Deployment } from "@mediagate/server"
import { SqlBackends } from "@mediagate/server/sql"
import { freshPgDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { Context, Effect, Exit, Fiber, HashSet, Layer, Logger, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"

const dir = mkdtempSync(join(tmpdir(), "mediagate-ledger-pg-kill-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
pgSkipReason("ledger-pg-kill")

const owner: Accounts.Account = { id: Ids.AccountId.make("acct_killed"), name: "killed" }
const credits = 1_000_000_000
const tasksCount = 48
/** An asynchronous model (the engine submits, then polls), so each task makes several writes while the kills run. */
const model = "dream-4"
/** How long the connections are killed for at most, and how long the ledger then has to be settled. */
const killingFor = 12_000
const settleWithin = 8_000
/** Submits made while the connections are killed. */
const submitsCount = 150

/** Every backend of the database but the killer's own, terminated; how many. */
const killAll = (killer: pg.Client) =>
  Effect.promise(() =>
    killer.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
  ).pipe(Effect.map((result) => result.rowCount ?? 0))

/** Log lines kept to count (the kills make the stores log every failed statement); nothing printed. */
const lines: Array<string> = []
const quietLogger = Logger.replace(
  Logger.defaultLogger,
  Logger.make(({ message }) => {
    lines.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
  })
)

describe.skipIf(pgUrl === undefined)("ledger on PostgreSQL while its connections are killed", () => {
  it.live(`${tasksCount} tasks: every ended task is settled within seconds, nothing stays held`, () =>
    Effect.gen(function*() {
      const url = yield* freshPgDatabase(pgUrl!, "ledger_kill")
      const composition = Deployment.services({
        simulatorProfile: "demo",
        allowPrivateUrls: true,
        backends: SqlBackends.make({ publicUrl: "http://127.0.0.1:1", databaseUrl: url, mediaDir: join(dir, "media") }),
        // A short lease, so that a task whose write died with its connection is taken up again soon.
        engine: { leaseDuration: "2 seconds", heartbeatWindow: "2 seconds" }
      })
      const context = yield* Layer.build(composition)
      const ledger = Context.get(context, Ledger.Ledger)
      const store = Context.get(context, TaskStore.TaskStore)
      const tasks = Context.get(context, TaskService)
      yield* ledger.credit({ id: "start", accountId: owner.id, amount: credits, at: 0, note: null })

      const ids = yield* Effect.forEach(
        Array.from({ length: tasksCount }, (_, i) => `task ${i}${i % 6 === 5 ? " [sim:fail]" : ""}`),
        (prompt) => Effect.map(tasks.submit(owner, { model, input: { prompt, n: 1 } }), (submitted) => submitted.taskId),
        { concurrency: 8 }
      )

      const killer = new pg.Client({ connectionString: url })
      yield* Effect.promise(() => killer.connect())
      yield* Effect.addFinalizer(() => Effect.promise(() => killer.end()))

      /**
       * When each task was first seen ended, and first seen settled (a charge or a release in
       * the ledger), sampled every 100 ms; a read that fails with its connection (StoreError) is tried at the next look.
       */
      const endedAt = new Map<string, number>()
      const settledAt = new Map<string, number>()
      const readable = <A>(effect: Effect.Effect<A, StoreError>) => Effect.option(effect)
      const look = Effect.forEach(ids.filter((id) => !settledAt.has(id)), (id) =>
        Effect.gen(function*() {
          const task = yield* readable(store.get(id))
          if (!endedAt.has(id) && Option.isSome(task) && Option.isSome(task.value) && Task.isTerminal(task.value.value.status)) endedAt.set(id, Date.now())
          if (!endedAt.has(id)) return
          const entries = yield* readable(ledger.forTask(id))
          if (Option.isSome(entries) && entries.value.some((entry) => entry.kind === "charge" || entry.kind === "release")) settledAt.set(id, Date.now())
        }), { concurrency: 8, discard: true })

      // Kill every connection of the store every 100 ms while the tasks run (bounded).
      let kills = 0
      const started = Date.now()
      const killing = yield* Effect.fork(
        Effect.gen(function*() {
          for (;;) {
            kills += yield* killAll(killer)
            yield* Effect.sleep("100 millis")
          }
        })
      )
      while (Date.now() - started < killingFor && endedAt.size < ids.length) {
        yield* look
        yield* Effect.sleep("100 millis")
      }
      yield* Fiber.interrupt(killing)
      const killedFor = Date.now() - started

      // Once the kills stop: every task ends, and every ended task has its settlement, within seconds.
      const stopped = Date.now()
      let lastUnsettled = 0
      while (settledAt.size < ids.length && Date.now() - stopped < settleWithin) {
        yield* look
        // The last look that found an ended task not yet settled.
        if (settledAt.size < endedAt.size) lastUnsettled = Date.now() - stopped
        if (settledAt.size < ids.length) yield* Effect.sleep("100 millis")
      }
      const after = Date.now() - stopped
      const lags = ids.filter((id) => settledAt.has(id)).map((id) => settledAt.get(id)! - endedAt.get(id)!)
      const failedSettlements = lines.filter((line) => line.includes("credits:") && line.includes("but its reservation was not settled")).length
      console.log(
        `ledger-pg-kill: ${kills} connections killed over ${killedFor} ms; ${failedSettlements} settlement writes failed; ` +
          `${endedAt.size}/${ids.length} tasks ended and ${settledAt.size} settled ${after} ms after the kills stopped; ` +
          `an ended task was last seen unsettled ${lastUnsettled} ms after; seen ended to seen settled: longest ${Math.max(0, ...lags)} ms`
      )
      if (process.env["LEDGER_KILL_DEBUG"]) for (const line of lines.filter((l) => l.includes("credits"))) console.log(line.slice(0, 300))
      expect(ids.filter((id) => !endedAt.has(id))).toEqual([])
      expect(ids.filter((id) => !settledAt.has(id))).toEqual([])
      expect(yield* ledger.open({ before: Number.MAX_SAFE_INTEGER, limit: 10 })).toEqual([])

      // Each task: its reservation, then a charge on SUCCESS or a release otherwise, once.
      let successes = 0
      for (const id of ids) {
        const task = Option.getOrThrow(yield* store.get(id))
        const movements = (yield* ledger.forTask(id)).map((entry) => entry.kind)
        if (task.status === "SUCCESS") successes++
        expect({ id, status: task.status, movements }).toEqual({
          id,
          status: task.status,
          movements: ["reserve", task.status === "SUCCESS" ? "charge" : "release"]
        })
      }
      expect(successes).toBeGreaterThan(0)
      const entries = yield* ledger.entries(owner.id, 10_000)
      const { balance, reserved } = yield* ledger.balance(owner.id)
      expect(balance).toBe(entries.reduce((sum, entry) => sum + entry.amount, 0))
      expect(reserved).toBe(0)
      expect(entries.reduce((sum, entry) => sum + entry.held, 0)).toBe(0)
      expect(HashSet.size(HashSet.fromIterable(entries.map((entry) => entry.id)))).toBe(entries.length)
    }).pipe(Effect.scoped, Effect.provide(quietLogger)), { timeout: 60_000 })

  it.live(`${submitsCount} submits while the connections are killed: no hold is left without its task`, () =>
    Effect.gen(function*() {
      const url = yield* freshPgDatabase(pgUrl!, "ledger_kill_submits")
      const context = yield* Layer.build(Deployment.services({
        simulatorProfile: "demo",
        allowPrivateUrls: true,
        backends: SqlBackends.make({ publicUrl: "http://127.0.0.1:1", databaseUrl: url, mediaDir: join(dir, "media-submits") })
      }))
      const ledger = Context.get(context, Ledger.Ledger)
      const store = Context.get(context, TaskStore.TaskStore)
      const tasks = Context.get(context, TaskService)
      yield* ledger.credit({ id: "start", accountId: owner.id, amount: credits, at: 0, note: null })

      const killer = new pg.Client({ connectionString: url })
      yield* Effect.promise(() => killer.connect())
      yield* Effect.addFinalizer(() => Effect.promise(() => killer.end()))
      let kills = 0
      const killing = yield* Effect.fork(Effect.forever(Effect.zipRight(
        Effect.map(killAll(killer), (killed) => kills += killed),
        Effect.sleep("100 millis")
      )))
      const submitted = yield* Effect.forEach(
        Array.from({ length: submitsCount }, (_, i) => `submit ${i}`),
        (prompt) => Effect.exit(tasks.submit(owner, { model, input: { prompt, n: 1 } })),
        { concurrency: 8 }
      )
      yield* Fiber.interrupt(killing)
      const failed = submitted.filter(Exit.isFailure).length

      // At once, not at the settlement sweep (every 5 minutes, for holds older than 10): every
      // open reservation's task is stored. Reads that meet a connection killed last are tried again.
      const again = Effect.retry({ times: 5 })
      const open = yield* again(ledger.open({ before: Number.MAX_SAFE_INTEGER, limit: 10_000 }))
      const unstored = yield* Effect.filter(open, (entry) => Effect.map(again(store.get(Ids.TaskId.make(entry.taskId!))), Option.isNone))
      console.log(
        `ledger-pg-kill: ${kills} connections killed during ${submitsCount} submits; ${failed} submits failed; ` +
          `${open.length} reservations open, ${unstored.length} of them without a stored task`
      )
      expect(failed).toBeGreaterThan(0)
      expect(unstored.map((entry) => entry.taskId)).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(quietLogger)), { timeout: 60_000 })
})
