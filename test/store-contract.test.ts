/**
 * The TaskStore contract, one suite run unchanged against the memory store, SQLite and
 * PostgreSQL (when MEDIAGATE_TEST_PG_URL is set; CI sets it). Each test gets a store of
 * its own: a fresh memory store, or fresh tables under a unique table prefix in a
 * database created for this run.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Ids, Task, TaskConflict, TaskStore } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { MemoryTaskStore } from "@mediagate/store-memory"
import { Database, SqlTaskStore } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason } from "@mediagate/store-sql/testing"
import { Cause, Effect, Either, Exit, Layer, Option, Redacted } from "effect"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

let counter = 0
const uniquePrefix = () => `t${process.pid}_${++counter}_`

/** A task with every optional part filled in, so a round trip checks them all. */
const record = (overrides: Omit<Parameters<typeof Testing.record>[0], "id"> = {}) => {
  const createdAt = overrides.createdAt ?? 1_700_000_000_000 + counter
  return Testing.record({
    id: Ids.uuidV7(createdAt, Array.from(randomBytes(10))),
    ownerId: "alice",
    input: { model: "alpha-image-2/text-to-image", prompt: "p", n: 2 },
    job: Testing.job({ n: 2, params: { k: [1, "x"] }, adjustments: [{ field: "duration", requested: 6, applied: 8, reason: "r" }] }),
    callBackUrl: "https://example.com/hook",
    userId: "user-1",
    createdAt,
    provider: "fal",
    ...overrides
  })
}

const withVersion = (task: Task.TaskRecord, changes: Partial<Task.TaskRecord>) =>
  new Task.TaskRecord({ ...task, ...changes, version: task.version + 1 })

type Backend = {
  readonly name: string
  readonly shared: Layer.Layer<SqlClient.SqlClient, unknown> | undefined
  readonly store: (prefix: string) => Layer.Layer<TaskStore.TaskStore, unknown, SqlClient.SqlClient>
}

const sqliteDir = mkdtempSync(join(tmpdir(), "mediagate-contract-"))
afterAll(() => rmSync(sqliteDir, { recursive: true, force: true }))

const pgUrl = process.env["MEDIAGATE_TEST_PG_URL"]

/** A database of its own for this run, dropped afterwards. */
const freshPgClient = (url: string): Layer.Layer<SqlClient.SqlClient, unknown> =>
  Layer.unwrapScoped(Effect.map(freshPgDatabase(url, "contract"), (target) => Database.layerPg(Redacted.make(target))))

const backends: ReadonlyArray<Backend> = [
  { name: "memory", shared: undefined, store: () => MemoryTaskStore.layer },
  {
    name: "sqlite",
    shared: Database.layerSqlite(join(sqliteDir, "contract.db")),
    store: (tablePrefix) => SqlTaskStore.layerWith({ tablePrefix })
  },
  ...(pgUrl === undefined
    ? []
    : [{ name: "postgres", shared: freshPgClient(pgUrl), store: (tablePrefix: string) => SqlTaskStore.layerWith({ tablePrefix }) }])
]
pgSkipReason("store-contract")

for (const backend of backends) {
  /** The suite, written once; `it.effect` bodies may need the backend's SqlClient. */
  const suite = (it: { readonly effect: (name: string, self: () => Effect.Effect<unknown, unknown, any>) => unknown }) => {
    /** Runs a test body against a store of its own. */
    const withStore = <A, E>(body: (store: TaskStore.TaskStore["Type"]) => Effect.Effect<A, E, SqlClient.SqlClient>) =>
      Effect.flatMap(TaskStore.TaskStore, body).pipe(Effect.provide(backend.store(uniquePrefix())))

    it.effect("create then get returns every field as written", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record({ result: { type: "image", urls: ["https://cdn/a.png"] }, status: "SUCCESS", dueAt: null, leaseOwner: "w", leaseUntil: 5 })
          yield* store.create(task)
          expect(Option.getOrThrow(yield* store.get(task.id))).toEqual(task)
        })
      ))

    it.effect("a task's progress is written and read back, and cleared", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record({ status: "PROCESSING", upstreamId: Ids.UpstreamId.make("up-1") })
          yield* store.create(task)
          expect(Option.getOrThrow(yield* store.get(task.id)).progress).toBeNull()
          const progress = { stage: "running" as const, queuePosition: null, percent: 42.5, logsTail: ["step 1", "é \"quoted\""], updatedAt: 1_700_000_000_500 }
          const running = withVersion(task, { progress })
          yield* store.update(running, task.version)
          expect(Option.getOrThrow(yield* store.get(task.id))).toEqual(running)
          const cleared = withVersion(running, { progress: null })
          yield* store.update(cleared, running.version)
          expect(Option.getOrThrow(yield* store.get(task.id)).progress).toBeNull()
        })
      ))

    it.effect("getOwned is scoped to the owner, and the owner cannot be left out", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record()
          yield* store.create(task)
          expect(Option.isSome(yield* store.getOwned(task.id, Ids.AccountId.make("alice")))).toBe(true)
          expect(Option.isNone(yield* store.getOwned(task.id, Ids.AccountId.make("bob")))).toBe(true)
          // The typecheck (part of CI) fails when these compile: an owner is required and branded.
          // @ts-expect-error the owner is required
          yield* Effect.ignore(Effect.suspend(() => store.getOwned(task.id)))
          // @ts-expect-error a plain string is not an account id
          yield* store.getOwned(task.id, "alice")
          // @ts-expect-error a plain string is not a task id
          yield* store.get("0190c8a4-0000-7000-8000-000000000000")
          expect(Option.isNone(yield* store.get(Ids.TaskId.make("0190c8a4-0000-7000-8000-000000000000")))).toBe(true)
        })
      ))

    it.effect("creating the same id twice is a defect (a caller's bug) and keeps the first", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record()
          yield* store.create(task)
          const exit = yield* Effect.exit(store.create(withVersion(task, { userId: "other" })))
          expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
          expect(Option.getOrThrow(yield* store.get(task.id)).userId).toBe("user-1")
        })
      ))

    it.effect("two concurrent writers from the same read: exactly one wins, the other gets TaskConflict", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record()
          yield* store.create(task)
          const outcomes = yield* Effect.all(
            [
              store.update(withVersion(task, { status: "PROCESSING" }), task.version),
              store.update(withVersion(task, { status: "FAILURE", dueAt: null }), task.version)
            ].map(Effect.either),
            { concurrency: "unbounded" }
          )
          const winners = outcomes.filter(Either.isRight)
          const losers = outcomes.filter(Either.isLeft).map((o) => o.left)
          expect(winners).toHaveLength(1)
          expect(losers).toHaveLength(1)
          expect(losers[0]).toBeInstanceOf(TaskConflict)
          const stored = Option.getOrThrow(yield* store.get(task.id))
          expect(stored.version).toBe(2)
          expect(["PROCESSING", "FAILURE"]).toContain(stored.status)
        })
      ))

    it.effect("countPending counts the PENDING tasks of every owner, and only those", () =>
      withStore((store) =>
        Effect.gen(function*() {
          expect(yield* store.countPending!).toBe(0)
          for (const status of ["PENDING", "PENDING", "SUBMITTED", "PROCESSING", "SUCCESS", "FAILURE"] as const) {
            yield* store.create(record({ status, ...(Task.isTerminal(status) ? { dueAt: null } : {}) }))
          }
          yield* store.create(record({ status: "PENDING", ownerId: Ids.AccountId.make("bob") }))
          expect(yield* store.countPending!).toBe(3)
        })
      ))

    it.effect("updating a missing task is a conflict", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const error = yield* store.update(record(), 1).pipe(Effect.flip)
          expect(error).toBeInstanceOf(TaskConflict)
        })
      ))

    it.effect("an update with callback rows writes both when its version is current, and neither when it is stale", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record({ status: "PROCESSING", callBackUrl: "https://example.com/hook" })
          yield* store.create(task)
          const hook = (id: string) => ({ id: `${id}_${randomBytes(4).toString("hex")}`, taskId: task.id, url: "https://example.com/hook", createdAt: 10 })
          const [first, second, stale] = [hook("msg_1"), hook("msg_2"), hook("msg_stale")]
          const ended = withVersion(task, { status: "SUCCESS", dueAt: null })
          yield* store.update(ended, task.version, [first, second])
          const late = yield* store.update(withVersion(task, { status: "FAILURE", dueAt: null }), task.version, [stale]).pipe(Effect.flip)
          expect(late).toBeInstanceOf(TaskConflict)
          expect(Option.getOrThrow(yield* store.get(task.id)).status).toBe("SUCCESS")
          expect((yield* store.callbacks(task.id)).map((c) => c.id).sort()).toEqual([first.id, second.id].sort())
        })
      ))

    it.effect("claimDue leases due tasks earliest first and never terminal or future ones", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const later = record({ dueAt: 2_000 })
          const first = record({ dueAt: 500 })
          const second = record({ dueAt: 900 })
          const done = record({ status: "SUCCESS", dueAt: null })
          for (const task of [later, first, second, done]) yield* store.create(task)
          const claimed = yield* store.claimDue({ now: 1_000, limit: 10, worker: "w1", leaseUntil: 61_000 })
          expect(claimed.map((t) => t.id)).toEqual([first.id, second.id])
          expect(claimed[0]).toMatchObject({ leaseOwner: "w1", leaseUntil: 61_000, version: 2 })
          expect(Option.getOrThrow(yield* store.get(first.id)).version).toBe(2)
        })
      ))

    it.effect("no task is claimed twice while its lease holds, with 4 concurrent claimers", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const tasks = Array.from({ length: 40 }, (_, i) => record({ dueAt: i }))
          yield* Effect.forEach(tasks, (task) => store.create(task), { concurrency: 4 })
          const claimer = (worker: string) =>
            Effect.gen(function*() {
              const mine: Array<string> = []
              for (let round = 0; round < 20; round++) {
                const batch = yield* store.claimDue({ now: 1_000, limit: 3, worker, leaseUntil: 60_000 })
                mine.push(...batch.map((t) => t.id))
                if (batch.length === 0) break
              }
              return mine
            })
          const results = yield* Effect.all(["a", "b", "c", "d"].map(claimer), { concurrency: "unbounded" })
          const all = results.flat()
          expect(all).toHaveLength(40)
          expect(new Set(all).size).toBe(40)
          for (const [i, worker] of ["a", "b", "c", "d"].entries()) {
            for (const id of results[i]!) expect(Option.getOrThrow(yield* store.get(Ids.TaskId.make(id))).leaseOwner).toBe(worker)
          }
        })
      ))

    it.effect("an expired lease hands the task to another claimer", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record({ dueAt: 0 })
          yield* store.create(task)
          expect(yield* store.claimDue({ now: 100, limit: 1, worker: "crashed", leaseUntil: 200 })).toHaveLength(1)
          expect(yield* store.claimDue({ now: 150, limit: 1, worker: "other", leaseUntil: 300 })).toHaveLength(0)
          const taken = yield* store.claimDue({ now: 201, limit: 1, worker: "other", leaseUntil: 300 })
          expect(taken.map((t) => [t.id, t.leaseOwner])).toEqual([[task.id, "other"]])
        })
      ))

    it.effect("work in flight is claimed before new work, each earliest due first", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const waiting = record({ dueAt: 100 })
          const polling = record({ status: "SUBMITTED", upstreamId: "up-1", dueAt: 800 })
          const recovered = record({ status: "PROCESSING", dueAt: 300, leaseOwner: "dead", leaseUntil: 900 })
          for (const task of [waiting, polling, recovered]) yield* store.create(task)
          const claimed = yield* store.claimDue({ now: 1_000, limit: 2, worker: "w", leaseUntil: 2_000 })
          expect(claimed.map((t) => t.id)).toEqual([recovered.id, polling.id])
          expect((yield* store.claimDue({ now: 1_000, limit: 2, worker: "w", leaseUntil: 2_000 })).map((t) => t.id)).toEqual([waiting.id])
        })
      ))

    it.effect("owners take turns: one owner's burst does not hold back another owner's task", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const burst = Array.from({ length: 6 }, (_, i) => record({ ownerId: "busy", dueAt: i }))
          const single = record({ ownerId: "quiet", dueAt: 50 })
          for (const task of [...burst, single]) yield* store.create(task)
          const claimed = yield* store.claimDue({ now: 1_000, limit: 3, worker: "w", leaseUntil: 2_000 })
          expect(new Set(claimed.map((t) => t.id))).toEqual(new Set([burst[0]!.id, single.id, burst[1]!.id]))
        })
      ))

    it.effect("new work waits while the running limit is reached, and starts when a task ends", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const limits = { running: 2, perAccount: 100 }
          const running = record({ status: "SUBMITTED", upstreamId: "up-1", dueAt: 5_000 })
          const waiting = Array.from({ length: 3 }, (_, i) => record({ dueAt: i }))
          for (const task of [running, ...waiting]) yield* store.create(task)
          const first = yield* store.claimDue({ now: 1_000, limit: 10, worker: "w", leaseUntil: 2_000, limits })
          expect(first.map((t) => t.id)).toEqual([waiting[0]!.id])
          // The claimed PENDING task holds its place while leased.
          expect(yield* store.claimDue({ now: 1_500, limit: 10, worker: "w", leaseUntil: 2_000, limits })).toEqual([])
          const stored = Option.getOrThrow(yield* store.get(running.id))
          yield* store.update(withVersion(stored, { status: "SUCCESS", dueAt: null }), stored.version)
          const next = yield* store.claimDue({ now: 1_500, limit: 10, worker: "w", leaseUntil: 2_000, limits })
          expect(next.map((t) => t.id)).toEqual([waiting[1]!.id])
        })
      ))

    it.effect("an owner at its cap waits while other owners' work starts", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const limits = { running: 100, perAccount: 2 }
          const mine = record({ ownerId: "capped", status: "PROCESSING", dueAt: 9_000 })
          const more = Array.from({ length: 3 }, (_, i) => record({ ownerId: "capped", dueAt: i }))
          const other = record({ ownerId: "other", dueAt: 10 })
          for (const task of [mine, ...more, other]) yield* store.create(task)
          const claimed = yield* store.claimDue({ now: 1_000, limit: 10, worker: "w", leaseUntil: 2_000, limits })
          expect(new Set(claimed.map((t) => t.id))).toEqual(new Set([more[0]!.id, other.id]))
        })
      ))

    it.effect("a provider at its limit holds its waiting tasks while other providers' work starts", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const limits = { running: 100, perAccount: 100, perProvider: { fal: 2, "*": 100 } }
          const running = record({ status: "PROCESSING", upstreamId: "up-1", dueAt: 9_000, provider: "fal" })
          const fal = Array.from({ length: 3 }, (_, i) => record({ dueAt: i, provider: "fal" }))
          const replicate = record({ dueAt: 10, provider: "replicate" })
          const unnamed = record({ dueAt: 20, provider: null })
          for (const task of [running, ...fal, replicate, unnamed]) yield* store.create(task)
          const claimed = yield* store.claimDue({ now: 1_000, limit: 10, worker: "w", leaseUntil: 2_000, limits })
          expect(claimed.map((t) => [t.id, t.provider])).toEqual([[fal[0]!.id, "fal"], [replicate.id, "replicate"], [unnamed.id, null]])
          // The claimed task counts while its lease holds; when a fal task ends, the next one starts.
          expect(yield* store.claimDue({ now: 1_500, limit: 10, worker: "w", leaseUntil: 2_000, limits })).toEqual([])
          const stored = Option.getOrThrow(yield* store.get(running.id))
          yield* store.update(withVersion(stored, { status: "SUCCESS", dueAt: null }), stored.version)
          const next = yield* store.claimDue({ now: 1_500, limit: 10, worker: "w", leaseUntil: 2_000, limits })
          expect(next.map((t) => t.id)).toEqual([fal[1]!.id])
        })
      ))

    it.effect("a full provider's tasks do not hide the same owner's later tasks on other providers", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const limits = { running: 100, perAccount: 100, perProvider: { fal: 1, "*": 100 } }
          yield* store.create(record({ status: "SUBMITTED", upstreamId: "up-1", dueAt: 9_000, provider: "fal" }))
          for (let i = 0; i < 5; i++) yield* store.create(record({ dueAt: i, provider: "fal" }))
          const later = record({ dueAt: 50, provider: "replicate" })
          yield* store.create(later)
          const claimed = yield* store.claimDue({ now: 1_000, limit: 1, worker: "w", leaseUntil: 2_000, limits })
          expect(claimed.map((t) => t.id)).toEqual([later.id])
        })
      ))

    it.effect("a target with a limit of its own counts against it and against its provider's; a full provider holds its targets' tasks without hiding other work", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const target = "fal:fal-ai/flux/dev"
          const perProvider = { [target]: 2, fal: 3, "*": 100 }
          const limits = { running: 100, perAccount: 100, perProvider, within: { [target]: "fal" } }
          yield* store.create(record({ status: "PROCESSING", upstreamId: "up-1", dueAt: 9_000, provider: target }))
          yield* store.create(record({ status: "PROCESSING", upstreamId: "up-2", dueAt: 9_000, provider: "fal" }))
          const onTarget = Array.from({ length: 3 }, (_, i) => record({ dueAt: i, provider: target }))
          const onFal = Array.from({ length: 3 }, (_, i) => record({ dueAt: 10 + i, provider: "fal" }))
          const replicate = record({ dueAt: 50, provider: "replicate" })
          for (const task of [...onTarget, ...onFal, replicate]) yield* store.create(task)
          // The target has room for one (1 of 2), and then fal is full (3 of 3): nothing more on fal.
          const claimed = yield* store.claimDue({ now: 1_000, limit: 10, worker: "w", leaseUntil: 2_000, limits })
          expect(claimed.map((t) => t.id)).toEqual([onTarget[0]!.id, replicate.id])
          // With fal full, the target's tasks wait though the target itself has room (1 of 2).
          yield* store.create(record({ dueAt: 60, provider: "replicate" }))
          const more = yield* store.claimDue({ now: 1_000, limit: 1, worker: "w", leaseUntil: 2_000, limits: { ...limits, perProvider: { ...perProvider, [target]: 3 } } })
          expect(more.map((t) => t.provider)).toEqual(["replicate"])
        })
      ))

    it.effect("released leases free a node's tasks at once, keeping their due times", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const tasks = [record({ dueAt: 10 }), record({ dueAt: 20 })]
          for (const task of tasks) yield* store.create(task)
          expect(yield* store.claimDue({ now: 100, limit: 1, worker: "leaving", leaseUntil: 60_000 })).toHaveLength(1)
          yield* store.releaseLeases("leaving")
          const taken = yield* store.claimDue({ now: 101, limit: 2, worker: "other", leaseUntil: 60_000 })
          expect(taken.map((t) => [t.id, t.dueAt])).toEqual([[tasks[0]!.id, 10], [tasks[1]!.id, 20]])
        })
      ))

    it.effect("a task's upstream attempts round-trip", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const attempts: ReadonlyArray<Task.UpstreamAttempt> = [
            { number: 1, model: "motion-2.0", upstreamId: "j1", startedAt: 1, endedAt: 2, outcome: "failed", error: "no", transientFailures: 2 },
            { number: 2, model: "motion-1.5-pro", upstreamId: null, startedAt: 3, endedAt: null, outcome: "running", error: null, transientFailures: 0 }
          ]
          const task = record({ attempts })
          yield* store.create(task)
          expect(Option.getOrThrow(yield* store.get(task.id)).attempts).toEqual(attempts)
        })
      ))

    it.effect("a terminal transition and its callback row are written together", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record()
          yield* store.create(task)
          const done = withVersion(task, { status: "SUCCESS", dueAt: null, result: { type: "image", urls: ["u"] } })
          const callback = { id: `msg_${randomBytes(6).toString("hex")}`, taskId: task.id, url: task.callBackUrl!, createdAt: 5 }
          yield* store.update(done, task.version, [callback])
          expect(yield* store.callbacks(task.id)).toEqual([{ ...callback, attempts: 0, status: "pending", nextAttemptAt: 5 }])
          expect(Option.getOrThrow(yield* store.get(task.id)).status).toBe("SUCCESS")
        })
      ))

    it.effect("when the callback row cannot be written, the transition is not written either", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const other = record()
          const task = record()
          const callback = { id: `msg_${randomBytes(6).toString("hex")}`, taskId: other.id, url: "https://example.com/a", createdAt: 1 }
          yield* store.create(other, [callback])
          yield* store.create(task)
          // Same callback id again: the insert fails, so the whole write must roll back.
          const exit = yield* Effect.exit(store.update(withVersion(task, { status: "FAILURE", dueAt: null }), task.version, [
            { ...callback, taskId: task.id }
          ]))
          expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
          const stored = Option.getOrThrow(yield* store.get(task.id))
          expect([stored.status, stored.version]).toEqual(["PENDING", 1])
          expect(yield* store.callbacks(task.id)).toEqual([])
          expect(yield* store.callbacks(other.id)).toEqual([{ ...callback, attempts: 0, status: "pending", nextAttemptAt: 1 }])
        })
      ))

    it.effect("callbacks are claimed when due, leased, retried at their time, and done once delivered or given up", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record()
          const row = (id: string, createdAt: number) => ({ id: `${id}_${randomBytes(4).toString("hex")}`, taskId: task.id, url: "https://example.com/hook", createdAt })
          const [first, second] = [row("msg_a", 100), row("msg_b", 200)]
          yield* store.create(task, [first, second])
          expect(yield* store.claimCallbacks({ now: 50, limit: 10, leaseUntil: 1_000 })).toEqual([])
          const claimed = yield* store.claimCallbacks({ now: 300, limit: 10, leaseUntil: 1_000 })
          // Each with its task as it stands, read with the claim.
          expect(claimed).toEqual([{ ...first, attempts: 0, roundStart: 0, task }, { ...second, attempts: 0, roundStart: 0, task }])
          // Leased: nobody else takes them before the lease ends.
          expect(yield* store.claimCallbacks({ now: 400, limit: 10, leaseUntil: 2_000 })).toEqual([])
          const failed = { callbackId: first.id, attempt: 1, at: 400, status: 500, error: "HTTP 500", durationMs: 12, outcome: { _tag: "Retry" as const, retryAt: 5_400 } }
          yield* store.recordCallbackAttempt(failed)
          const delivered = { callbackId: second.id, attempt: 1, at: 410, status: 204, error: null, durationMs: 8, outcome: { _tag: "Delivered" as const } }
          yield* store.recordCallbackAttempt(delivered)
          expect(yield* store.claimCallbacks({ now: 5_000, limit: 10, leaseUntil: 6_000 })).toEqual([])
          const moved = { ...task, updatedAt: task.updatedAt + 1, version: task.version + 1 }
          yield* store.update(moved, task.version)
          const again = yield* store.claimCallbacks({ now: 5_400, limit: 10, leaseUntil: 6_000 })
          // The task as it stands at this claim, not as it stood at the last.
          expect(again).toEqual([{ ...first, attempts: 1, roundStart: 0, task: moved }])
          const gaveUp = { callbackId: first.id, attempt: 2, at: 5_400, status: null, error: "timed out", durationMs: 15_000, outcome: { _tag: "GaveUp" as const } }
          yield* store.recordCallbackAttempt(gaveUp)
          expect(yield* store.claimCallbacks({ now: 99_999, limit: 10, leaseUntil: 100_000 })).toEqual([])
          expect(yield* store.callbackAttempts(first.id)).toEqual([failed, gaveUp])
          expect(yield* store.callbackAttempts(second.id)).toEqual([delivered])
        })
      ))

    it.effect("a callback written leased (a hand-off to the writer's deliverer) is claimed by nobody until its lease ends", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record()
          const handed = { id: `msg_h_${randomBytes(4).toString("hex")}`, taskId: task.id, url: "https://example.com/hook", createdAt: 100, leaseUntil: 2_000 }
          yield* store.create(task)
          const ended = withVersion(task, { status: "SUCCESS", dueAt: null, updatedAt: 100 })
          yield* store.update(ended, task.version, [handed])
          expect(yield* store.claimCallbacks({ now: 1_999, limit: 10, leaseUntil: 5_000 })).toEqual([])
          // The row reads back as any other: the lease is the delivery's, not the row's.
          const { leaseUntil: _, ...row } = handed
          expect(yield* store.callbacks(task.id)).toEqual([{ ...row, attempts: 0, status: "pending", nextAttemptAt: 100 }])
          // The lease ended with the callback unsent (its writer stopped): it is owed as any other.
          expect(yield* store.claimCallbacks({ now: 2_000, limit: 10, leaseUntil: 5_000 })).toEqual([{ ...row, attempts: 0, roundStart: 0, task: ended }])
          yield* store.recordCallbackAttempt({ callbackId: handed.id, attempt: 1, at: 2_100, status: 204, error: null, durationMs: 5, outcome: { _tag: "Delivered" } })
          // Sent by its writer within the lease, it is done.
          const other = record()
          const sent = { id: `msg_s_${randomBytes(4).toString("hex")}`, taskId: other.id, url: "https://example.com/hook", createdAt: 100, leaseUntil: 2_000 }
          yield* store.create(other, [sent])
          yield* store.recordCallbackAttempt({ callbackId: sent.id, attempt: 1, at: 150, status: 204, error: null, durationMs: 5, outcome: { _tag: "Delivered" } })
          expect(yield* store.claimCallbacks({ now: 9_000, limit: 10, leaseUntil: 10_000 })).toEqual([])
        })
      ))

    it.effect("attempts of several callbacks recorded in one write each take effect, as one by one", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record()
          const row = (id: string, createdAt: number) => ({ id: `${id}_${randomBytes(4).toString("hex")}`, taskId: task.id, url: "https://example.com/hook", createdAt })
          const [retried, delivered, gaveUp, untouched] = [row("msg_r", 100), row("msg_d", 110), row("msg_g", 120), row("msg_u", 130)]
          yield* store.create(task, [retried, delivered, gaveUp, untouched])
          expect((yield* store.claimCallbacks({ now: 200, limit: 3, leaseUntil: 1_000 })).map((c) => c.id)).toEqual([retried.id, delivered.id, gaveUp.id])
          yield* store.recordCallbackAttempts([])
          const attempts = [
            { callbackId: retried.id, attempt: 1, at: 300, status: 503, error: "HTTP 503", durationMs: 5, outcome: { _tag: "Retry" as const, retryAt: 5_300 } },
            { callbackId: delivered.id, attempt: 1, at: 301, status: 200, error: null, durationMs: 6, outcome: { _tag: "Delivered" as const } },
            { callbackId: gaveUp.id, attempt: 1, at: 302, status: null, error: "refused", durationMs: 7, outcome: { _tag: "GaveUp" as const } }
          ]
          yield* store.recordCallbackAttempts(attempts)
          // Leases released: the untouched one is due still; the retried one comes back at its time; the others are done.
          expect((yield* store.claimCallbacks({ now: 400, limit: 10, leaseUntil: 10_000 })).map((c) => c.id)).toEqual([untouched.id])
          expect(yield* store.claimCallbacks({ now: 5_300, limit: 10, leaseUntil: 6_000 })).toEqual([{ ...retried, attempts: 1, roundStart: 0, task }])
          for (const attempt of attempts) expect(yield* store.callbackAttempts(attempt.callbackId)).toEqual([attempt])
          expect(yield* store.callbackAttempts(untouched.id)).toEqual([])
        })
      ))

    it.effect("attempts recorded together keep any error text as written, and two of one callback take effect in order", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record()
          const row = (id: string, createdAt: number) => ({ id: `${id}_${randomBytes(4).toString("hex")}`, taskId: task.id, url: "https://example.com/hook", createdAt })
          const [odd, twice] = [row("msg_o", 100), row("msg_t", 110)]
          yield* store.create(task, [odd, twice])
          yield* store.claimCallbacks({ now: 200, limit: 10, leaseUntil: 1_000 })
          // What an array literal has to escape: quotes, a backslash, braces, commas, NULL as a word, a line break.
          const error = `"quoted", {braced} \\ back\\slash, NULL, a\nline, ünïcode 🎉`
          const first = { callbackId: twice.id, attempt: 1, at: 300, status: 503, error: "HTTP 503", durationMs: 5, outcome: { _tag: "Retry" as const, retryAt: 400 } }
          const second = { callbackId: twice.id, attempt: 2, at: 400, status: 204, error: null, durationMs: 6, outcome: { _tag: "Delivered" as const } }
          const strange = { callbackId: odd.id, attempt: 1, at: 301, status: null, error, durationMs: 7, outcome: { _tag: "Retry" as const, retryAt: 9_000 } }
          yield* store.recordCallbackAttempts([strange])
          yield* store.recordCallbackAttempts([first, second])
          expect(yield* store.callbackAttempts(odd.id)).toEqual([strange])
          expect(yield* store.callbackAttempts(twice.id)).toEqual([first, second])
          expect(yield* store.callbacks(task.id)).toEqual([
            { ...odd, attempts: 1, status: "pending", nextAttemptAt: 9_000 },
            { ...twice, attempts: 2, status: "delivered", nextAttemptAt: null }
          ])
        })
      ))

    it.effect("a callback's state follows its attempts: pending with its next attempt, then delivered or failed", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record()
          const row = (id: string, createdAt: number) => ({ id: `${id}_${randomBytes(4).toString("hex")}`, taskId: task.id, url: "https://example.com/hook", createdAt })
          const [delivered, failed, waiting] = [row("msg_d", 100), row("msg_f", 110), row("msg_w", 120)]
          yield* store.create(task, [delivered, failed, waiting])
          const other = record()
          yield* store.create(other, [{ ...row("msg_other", 90), taskId: other.id }])
          yield* store.claimCallbacks({ now: 200, limit: 10, leaseUntil: 1_000 })
          yield* store.recordCallbackAttempts([
            { callbackId: delivered.id, attempt: 1, at: 300, status: 204, error: null, durationMs: 5, outcome: { _tag: "Delivered" } },
            { callbackId: failed.id, attempt: 1, at: 301, status: 410, error: "HTTP 410", durationMs: 6, outcome: { _tag: "GaveUp" } },
            { callbackId: waiting.id, attempt: 1, at: 302, status: 429, error: "HTTP 429", durationMs: 7, outcome: { _tag: "Retry", retryAt: 9_000 } }
          ])
          expect(yield* store.callbacks(task.id)).toEqual([
            { ...delivered, attempts: 1, status: "delivered", nextAttemptAt: null },
            { ...failed, attempts: 1, status: "failed", nextAttemptAt: null },
            { ...waiting, attempts: 1, status: "pending", nextAttemptAt: 9_000 }
          ])
        })
      ))

    it.effect("a redeliver starts a new round for every callback of the task: due now, numbering carried on, schedule from the round", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const task = record()
          const other = record()
          const row = (id: string, taskId: Ids.TaskId, createdAt: number) => ({ id: `${id}_${randomBytes(4).toString("hex")}`, taskId, url: "https://example.com/hook", createdAt })
          const [delivered, gaveUp, untouched] = [row("msg_d", task.id, 100), row("msg_g", task.id, 110), row("msg_u", other.id, 10_000)]
          yield* store.create(task, [delivered, gaveUp])
          yield* store.create(other, [untouched])
          expect((yield* store.claimCallbacks({ now: 200, limit: 2, leaseUntil: 1_000 })).map((c) => c.id)).toEqual([delivered.id, gaveUp.id])
          yield* store.recordCallbackAttempts([
            { callbackId: delivered.id, attempt: 1, at: 300, status: 200, error: null, durationMs: 5, outcome: { _tag: "Delivered" } },
            { callbackId: gaveUp.id, attempt: 1, at: 301, status: 500, error: "HTTP 500", durationMs: 6, outcome: { _tag: "Retry", retryAt: 400 } }
          ])
          expect((yield* store.claimCallbacks({ now: 400, limit: 10, leaseUntil: 1_000 })).map((c) => c.id)).toEqual([gaveUp.id])
          yield* store.recordCallbackAttempt({ callbackId: gaveUp.id, attempt: 2, at: 500, status: 410, error: "HTTP 410", durationMs: 6, outcome: { _tag: "GaveUp" } })
          expect(yield* store.claimCallbacks({ now: 2_000, limit: 10, leaseUntil: 3_000 })).toEqual([])

          expect(yield* store.redeliverCallbacks(task.id, 5_000)).toBe(2)
          expect(yield* store.redeliverCallbacks(Ids.TaskId.make("0190c8a4-0000-7000-8000-000000000000"), 5_000)).toBe(0)
          expect(yield* store.callbacks(task.id)).toEqual([
            { ...delivered, attempts: 1, status: "pending", nextAttemptAt: 5_000 },
            { ...gaveUp, attempts: 2, status: "pending", nextAttemptAt: 5_000 }
          ])
          // Not before `now`; then both, with the attempts of earlier rounds as their round's start.
          expect(yield* store.claimCallbacks({ now: 4_999, limit: 10, leaseUntil: 6_000 })).toEqual([])
          // Both due at the same time: in either order.
          const due = [...yield* store.claimCallbacks({ now: 5_000, limit: 10, leaseUntil: 6_000 })].sort((a, b) => a.createdAt - b.createdAt)
          expect(due).toEqual([{ ...delivered, attempts: 1, roundStart: 1, task }, { ...gaveUp, attempts: 2, roundStart: 2, task }])
          const again = { callbackId: gaveUp.id, attempt: 3, at: 5_100, status: 204, error: null, durationMs: 4, outcome: { _tag: "Delivered" as const } }
          yield* store.recordCallbackAttempt(again)
          expect((yield* store.callbackAttempts(gaveUp.id)).map((a) => a.attempt)).toEqual([1, 2, 3])
          expect((yield* store.callbacks(task.id)).map((c) => c.status)).toEqual(["pending", "delivered"])
          // The other task's callback is not part of the round.
          expect(yield* store.callbacks(other.id)).toEqual([{ ...untouched, attempts: 0, status: "pending", nextAttemptAt: 10_000 }])
        })
      ))

    it.effect("callback events: a row's event and first due time are kept, the task's events read back; a redeliver restarts the terminal callback only", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const callbackEvents = { events: ["started", "progress", "completed"] as const, lastProgress: { id: "msg_p", dueAt: 2_000 } }
          const task = record({ status: "PROCESSING", callBackUrl: "https://example.com/hook", callbackEvents })
          const row = (id: string, createdAt: number, event: "started" | "progress" | "completed") =>
            ({ id: `${id}_${randomBytes(4).toString("hex")}`, taskId: task.id, url: "https://example.com/hook", createdAt, event })
          const started = row("msg_s", 100, "started")
          const progress = { ...row("msg_p", 600, "progress"), dueAt: 2_000 }
          yield* store.create(task, [started, progress])
          expect(Option.getOrThrow(yield* store.get(task.id)).callbackEvents).toEqual(callbackEvents)
          // The progress callback is not due before its time.
          expect((yield* store.claimCallbacks({ now: 1_999, limit: 10, leaseUntil: 10_000 })).map((c) => [c.id, c.event])).toEqual([[started.id, "started"]])
          const { dueAt: _, ...progressRow } = progress
          expect(yield* store.claimCallbacks({ now: 2_000, limit: 10, leaseUntil: 10_000 })).toEqual([{ ...progressRow, attempts: 0, roundStart: 0, task }])
          const ended = withVersion(task, { status: "SUCCESS", dueAt: null })
          const completed = row("msg_c", 3_000, "completed")
          yield* store.update(ended, task.version, [completed])
          expect((yield* store.callbacks(task.id)).map((c) => [c.id, c.event, c.nextAttemptAt])).toEqual([
            [started.id, "started", 100], [progress.id, "progress", 2_000], [completed.id, "completed", 3_000]
          ])
          expect(yield* store.redeliverCallbacks(task.id, 5_000)).toBe(1)
          expect((yield* store.callbacks(task.id)).find((c) => c.id === completed.id)?.nextAttemptAt).toBe(5_000)
          // The spec's callback (no event) is the terminal one too.
          const plain = record({ status: "SUCCESS", dueAt: null, callBackUrl: "https://example.com/hook" })
          yield* store.create(plain, [{ id: `msg_x_${randomBytes(4).toString("hex")}`, taskId: plain.id, url: "https://example.com/hook", createdAt: 1 }])
          expect(yield* store.redeliverCallbacks(plain.id, 5_000)).toBe(1)
          expect((yield* store.callbacks(plain.id))[0]!.event).toBeUndefined()
        })
      ))

    it.effect("list pages an owner's tasks newest first with a cursor, stable under concurrent inserts", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const mine = Array.from({ length: 25 }, (_, i) => record({ createdAt: 1_800_000_000_000 + i * 10 }))
          for (const task of mine) yield* store.create(task)
          yield* store.create(record({ ownerId: "bob" }))
          const seen: Array<string> = []
          let cursor: Ids.TaskId | undefined
          let inserted = 0
          for (let page = 0; page < 10; page++) {
            const result = yield* store.list(Ids.AccountId.make("alice"), { limit: 10, cursor })
            seen.push(...result.tasks.map((t) => t.id))
            // Newer tasks arrive while the client pages.
            yield* store.create(record({ createdAt: 1_900_000_000_000 + ++inserted }))
            if (result.nextCursor === null) break
            cursor = result.nextCursor
          }
          expect(seen).toEqual(mine.map((t) => t.id).reverse())
          const first = yield* store.list(Ids.AccountId.make("alice"), { limit: 3 })
          expect(first.tasks).toHaveLength(3)
          expect(first.tasks[0]!.createdAt).toBeGreaterThanOrEqual(1_900_000_000_000)
          expect((yield* store.list(Ids.AccountId.make("nobody"), { limit: 10 })).nextCursor).toBeNull()
        })
      ))

    it.effect("list filters by status, model and creation time, each alone and together, paging with the cursor", () =>
      withStore((store) =>
        Effect.gen(function*() {
          const alice = Ids.AccountId.make("alice")
          const base = 1_800_000_000_000
          const statuses = ["PENDING", "SUCCESS", "FAILURE", "PROCESSING", "SUCCESS", "CANCELLED"] as const
          const made: Array<Task.TaskRecord> = []
          for (let i = 0; i < 12; i++) {
            const status = statuses[i % statuses.length]!
            const model = i % 3 === 0 ? "dream-4" : "alpha-image-2/text-to-image"
            const task = record({
              createdAt: base + i * 1000,
              status,
              dueAt: status === "SUCCESS" || status === "FAILURE" || status === "CANCELLED" ? null : base,
              input: { model, prompt: `filter ${i}` }
            })
            made.push(task)
            yield* store.create(task)
          }
          // Another owner's tasks never show.
          yield* store.create(record({ ownerId: "bob", createdAt: base + 500, status: "SUCCESS", dueAt: null, input: { model: "dream-4", prompt: "b" } }))
          const all = (filter: TaskStore.ListFilter) =>
            Effect.gen(function*() {
              const seen: Array<string> = []
              let cursor: Ids.TaskId | undefined
              for (let page = 0; page < 20; page++) {
                const result = yield* store.list(alice, { limit: 2, cursor, filter })
                expect(result.tasks.length).toBeLessThanOrEqual(2)
                seen.push(...result.tasks.map((task) => task.id))
                if (result.nextCursor === null) break
                cursor = result.nextCursor
              }
              return seen
            })
          const expected = (keep: (task: Task.TaskRecord) => boolean) => made.filter(keep).map((task) => task.id).reverse()
          expect(yield* all({ statuses: ["SUCCESS"] })).toEqual(expected((task) => task.status === "SUCCESS"))
          expect(yield* all({ statuses: ["SUCCESS", "FAILURE"] })).toEqual(expected((task) => task.status === "SUCCESS" || task.status === "FAILURE"))
          expect(yield* all({ model: "dream-4" })).toEqual(expected((task) => task.input["model"] === "dream-4"))
          expect(yield* all({ model: "dream" })).toEqual([])
          expect(yield* all({ createdAfter: base + 3000 })).toEqual(expected((task) => task.createdAt > base + 3000))
          expect(yield* all({ createdBefore: base + 3000 })).toEqual(expected((task) => task.createdAt < base + 3000))
          expect(yield* all({ createdAfter: base + 1000, createdBefore: base + 9000, statuses: ["SUCCESS", "PENDING"], model: "alpha-image-2/text-to-image" }))
            .toEqual(expected((task) =>
              task.createdAt > base + 1000 && task.createdAt < base + 9000 && (task.status === "SUCCESS" || task.status === "PENDING") &&
              task.input["model"] === "alpha-image-2/text-to-image"
            ))
          expect(yield* all({ statuses: [] })).toEqual([])
          expect(yield* all({})).toEqual(expected(() => true))
        })
      ))
  }

  if (backend.shared === undefined) {
    describe(`TaskStore contract: ${backend.name}`, () => suite(it))
  } else {
    describe(`TaskStore contract: ${backend.name}`, () => {
      it.layer(backend.shared as Layer.Layer<SqlClient.SqlClient>, { timeout: 60_000 })((it) => suite(it))
    })
  }
}
