/**
 * Usage reports equal the ledger, on every backend (memory, SQLite, PostgreSQL when
 * MEDIAGATE_TEST_PG_URL is set): real tasks, run by the engine on the simulator under the
 * TestClock, that succeed, fail and are cancelled, over two accounts, three keys, two models
 * and two UTC days, and uploads of both accounts. The report's spend is the sum of the charges
 * the ledger lists (what `credits show` prints), its refunds the sum of the releases, balance =
 * credits - spend, its uploads those created in the window, and the groups by day, model and key
 * each sum to the totals; deleting the uploads afterwards changes no report. The overview's figures are checked
 * against the tasks themselves, and every backend answers the same reports.
 */
import type { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import type { Accounts } from "@mediagate/core"
import {
  IdempotencyKeys,
  Ids,
  Insights,
  Ledger,
  ModelCatalog,
  Moderation,
  TaskChanges,
  TaskEvents,
  TaskService,
  TaskStore,
  TaskWrites,
  Uploads,
  Usage,
  UsageRecords,
  UsageStore
} from "@mediagate/core"
import { Engine } from "@mediagate/scheduler"
import { MemoryAccounts, MemoryLedger, MemoryMediaStore, MemoryTaskStore, MemoryUploads, MemoryUsage } from "@mediagate/store-memory"
import { Database, SqlLedger, SqlTaskStore, SqlUploads, SqlUsage } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason, pgUrl } from "@mediagate/store-sql/testing"
import { Simulator } from "@mediagate/upstream"
import { Context, Effect, Layer, Option, Redacted, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const dir = mkdtempSync(join(tmpdir(), "mediagate-usage-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0
const skipped = pgSkipReason("usage-contract")

type Stores = Layer.Layer<TaskStore.TaskStore | Ledger.Ledger | Uploads.Uploads | UsageStore.UsageStore, unknown>

const onSql = (client: () => Layer.Layer<SqlClient.SqlClient, unknown>): Stores => {
  const shared = client()
  return Layer.mergeAll(
    SqlTaskStore.layerWith({ tablePrefix: "us_" }).pipe(Layer.provide(client())),
    SqlLedger.layerWith({ tablePrefix: "us_" }).pipe(Layer.provide(shared)),
    SqlUploads.layerWith({ tablePrefix: "us_" }).pipe(Layer.provide(shared)),
    SqlUsage.layerWith({ tablePrefix: "us_" }).pipe(Layer.provide(shared))
  )
}

const backends: ReadonlyArray<readonly [string, () => Stores]> = [
  ["memory", () => MemoryUsage.layer.pipe(Layer.provideMerge(Layer.mergeAll(MemoryTaskStore.layer, MemoryLedger.layer, MemoryAccounts.layer([]), MemoryUploads.layer)))],
  ["sqlite", () => {
    const file = join(dir, `u${++files}.db`)
    return onSql(() => Database.layerSqlite(file))
  }],
  ...(pgUrl === undefined ? [] : [[
    "postgres",
    () => Layer.unwrapScoped(Effect.map(freshPgDatabase(pgUrl!, "usage"), (url) => onSql(() => Database.layerPg(Redacted.make(url)))))
  ] as const])
]

const alice = (keyId: string): Accounts.Account => ({ id: Ids.AccountId.make("acct_alice"), name: "alice", keyId })
const bob: Accounts.Account = { id: Ids.AccountId.make("acct_bob"), name: "bob", keyId: "key_bob" }

const dream = "dream-4"
const alpha = "alpha-image-2/text-to-image"

/** Who submits what, and what becomes of it. */
const plan: ReadonlyArray<{ readonly account: Accounts.Account; readonly model: string; readonly prompt: string; readonly cancel?: true }> = [
  { account: alice("key_a1"), model: dream, prompt: "a" },
  { account: alice("key_a1"), model: dream, prompt: "b" },
  { account: alice("key_a1"), model: dream, prompt: "c [sim:fail]" },
  { account: alice("key_a1"), model: alpha, prompt: "d" },
  { account: alice("key_a2"), model: alpha, prompt: "e" },
  { account: alice("key_a2"), model: dream, prompt: "f", cancel: true },
  { account: bob, model: dream, prompt: "g" },
  { account: bob, model: alpha, prompt: "h [sim:fail]" },
  { account: bob, model: alpha, prompt: "i", cancel: true }
]

/** 23:58 UTC: the first round ends that day, the second is submitted the next. */
const start = Date.UTC(2026, 10, 29, 23, 58)

/** Files uploaded: alice's with each key, on both days; bob's with no key known (null). */
const uploadPlan: ReadonlyArray<{ readonly ownerId: Accounts.Account["id"]; readonly keyId: string | null; readonly bytes: number; readonly createdAt: number }> = [
  { ownerId: alice("").id, keyId: "key_a1", bytes: 1_000, createdAt: start - 60_000 },
  { ownerId: alice("").id, keyId: "key_a1", bytes: 2_500, createdAt: start + 5 * 60_000 },
  { ownerId: alice("").id, keyId: "key_a2", bytes: 300, createdAt: start + 6 * 60_000 },
  { ownerId: bob.id, keyId: null, bytes: 70_000, createdAt: start - 30_000 }
]
const uploadRecords: ReadonlyArray<Uploads.UploadRecord> = uploadPlan.map((upload, i) => ({
  ...upload,
  id: `file_${String(i).padStart(24, "0")}`,
  mediaKey: `upload-${i}.png`,
  url: `https://cdn.test/media/upload-${i}.png`,
  contentType: "image/png",
  width: 1,
  height: 1,
  durationSeconds: null,
  expiresAt: upload.createdAt + 86_400_000,
  pinnedUntil: null
}))
const window = { from: Date.UTC(2026, 10, 1), to: Date.UTC(2026, 11, 31) }

const turns = (n: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 0))).pipe(Effect.repeatN(n - 1))

/** The sum of `figures` over the groups: they must add up to the totals. */
const summed = (groups: ReadonlyArray<Usage.UsageFigures>) => ({
  tasks: Object.fromEntries(Object.keys(groups[0]?.tasks ?? {}).map((status) => [status, groups.reduce((sum, group) => sum + group.tasks[status as "total"], 0)])),
  spendMicroUsd: groups.reduce((sum, group) => sum + group.spendMicroUsd, 0),
  charges: groups.reduce((sum, group) => sum + group.charges, 0),
  refundsMicroUsd: groups.reduce((sum, group) => sum + group.refundsMicroUsd, 0),
  releases: groups.reduce((sum, group) => sum + group.releases, 0),
  uploads: groups.reduce((sum, group) => sum + group.uploads, 0),
  uploadBytes: groups.reduce((sum, group) => sum + group.uploadBytes, 0)
})

/** Every backend's reports, to compare at the end. */
const answers = new Map<string, unknown>()

describe("usage reports", () => {
  for (const [name, stores] of backends) {
    it.scoped(`on ${name}: real tasks; spend = the charges, refunds = the releases, balance = credits - spend, groups sum to totals`, () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(start)
        const base = yield* Layer.build(stores())
        const ledger = Context.get(base, Ledger.Ledger)
        const store = Context.get(base, TaskStore.TaskStore)
        const usage = Context.get(base, UsageStore.UsageStore)
        const uploads = Context.get(base, Uploads.Uploads)
        yield* Effect.forEach(uploadRecords, uploads.create)
        yield* ledger.credit({ id: "start-alice", accountId: alice("").id, amount: 20_000_000, at: start - 1000, note: "top-up" })
        yield* ledger.credit({ id: "start-bob", accountId: bob.id, amount: 5_000_000, at: start - 1000, note: "top-up" })

        const media = MemoryMediaStore.layer({ baseUrl: "https://cdn.test/media/" })
        const simulator = Simulator.layer({ profile: "demo" }).pipe(Layer.provide(media), Layer.provide(Ids.layerTest))
        const common = Layer.mergeAll(Ids.layerTest, ModelCatalog.layer, Moderation.layerAllowAll, simulator, Layer.succeedContext(base))
        const writes = TaskWrites.layer.pipe(Layer.provide([TaskChanges.layer, TaskEvents.CallbackWakeup.layerNone]), Layer.provide(common))
        const service = Context.get(
          yield* Layer.build(TaskService.Default.pipe(
            Layer.provide(writes),
            Layer.provide([TaskChanges.layer, IdempotencyKeys.layerMemory, TaskEvents.TaskWakeup.layerNone, TaskEvents.CallbackWakeup.layerNone]),
            Layer.provide(common)
          )),
          TaskService
        )
        yield* Layer.build(Engine.layer({ pollInterval: "1 second" }).pipe(Layer.provide(writes), Layer.provide(common)))

        // Two rounds, the second a few minutes later, on the next UTC day.
        const ids: Array<string> = []
        for (const round of [0, 1]) {
          for (const task of plan) {
            const { taskId } = yield* service.submit(task.account, { model: task.model, input: { prompt: `${task.prompt} ${round}` } })
            if (task.cancel) yield* service.cancel(task.account, taskId)
            ids.push(taskId)
          }
          const done = () =>
            Effect.map(
              Effect.forEach(ids, (id) => store.get(Ids.TaskId.make(id))),
              (found) => found.every((task) => Option.isSome(task) && task.value.dueAt === null)
            )
          for (let i = 0; i < 600 && !(yield* done()); i++) {
            yield* TestClock.adjust("1 second")
            yield* turns(20)
          }
          expect(yield* done()).toBe(true)
          if (round === 0) yield* TestClock.adjust("3 minutes")
        }
        const records = (yield* Effect.forEach(ids, (id) => store.get(Ids.TaskId.make(id)))).map(Option.getOrThrow)
        expect(records.map((task) => task.status).sort()).toEqual(
          [...Array(10).fill("SUCCESS"), ...Array(4).fill("FAILURE"), ...Array(4).fill("CANCELLED")].sort()
        )

        for (const account of [alice("").id, bob.id, undefined]) {
          const accounts = account === undefined ? [alice("").id, bob.id] : [account]
          // What `credits show` prints: the balance and every entry.
          const balances = yield* Effect.forEach(accounts, (id) => ledger.balance(id))
          const entries = (yield* Effect.forEach(accounts, (id) => ledger.entries(id, 10_000))).flat()
          const sumOf = (kind: Ledger.EntryKind, field: "amount" | "held") =>
            entries.filter((entry) => entry.kind === kind).reduce((sum, entry) => sum + entry[field], 0)
          const mine = records.filter((task) => accounts.includes(task.ownerId))
          const mineUploaded = uploadRecords.filter((upload) => accounts.includes(upload.ownerId))
          for (const groupBy of ["day", "model", "key"] as const) {
            const report = Usage.report({ ...window, groupBy }, yield* usage.usage({ ...window, groupBy, accountId: account }))
            answers.set(`${name} ${account} ${groupBy}`, report)
            const { totals } = report
            expect(totals.spendMicroUsd).toBe(-sumOf("charge", "amount"))
            expect(totals.refundsMicroUsd).toBe(-sumOf("release", "held"))
            expect(totals.creditsMicroUsd).toBe(sumOf("credit", "amount"))
            expect(balances.reduce((sum, balance) => sum + balance.balance, 0)).toBe(totals.creditsMicroUsd - totals.spendMicroUsd)
            expect(balances.every((balance) => balance.reserved === 0)).toBe(true)
            expect(totals.tasks.total).toBe(mine.length)
            expect(totals.tasks.SUCCESS).toBe(mine.filter((task) => task.status === "SUCCESS").length)
            expect(totals.charges).toBe(totals.tasks.SUCCESS)
            expect(totals.releases).toBe(totals.tasks.FAILURE + totals.tasks.CANCELLED)
            expect(totals.spendMicroUsd).toBe(mine.filter((task) => task.status === "SUCCESS").reduce((sum, task) => sum + task.job.priceMicroUsd, 0))
            expect([totals.uploads, totals.uploadBytes]).toEqual([mineUploaded.length, mineUploaded.reduce((sum, upload) => sum + upload.bytes, 0)])
            const { creditsMicroUsd: _, ...figures } = totals
            expect(summed(report.groups)).toEqual(figures)
            if (groupBy === "day") {
              expect(report.groups.map((group) => group.group)).toEqual(["2026-11-29", "2026-11-30"])
              for (const group of report.groups) {
                const of = mineUploaded.filter((upload) => Usage.dayLabel(Math.floor(upload.createdAt / 86_400_000)) === group.group)
                expect([group.uploads, group.uploadBytes]).toEqual([of.length, of.reduce((sum, upload) => sum + upload.bytes, 0)])
              }
            }
            if (groupBy === "model") {
              // Uploads have no model: every one is in the null group, last.
              expect(report.groups.map((group) => group.group)).toEqual([alpha, dream, null])
              expect(report.groups.at(-1)).toMatchObject({ tasks: { total: 0 }, charges: 0, uploads: totals.uploads, uploadBytes: totals.uploadBytes })
              for (const group of report.groups) {
                const succeeded = mine.filter((task) => task.input["model"] === group.group && task.status === "SUCCESS")
                expect(group.spendMicroUsd).toBe(succeeded.reduce((sum, task) => sum + task.job.priceMicroUsd, 0))
              }
            }
            if (groupBy === "key") {
              for (const group of report.groups) {
                const of = mine.filter((task) => task.keyId === group.group)
                expect(group.tasks.total).toBe(of.length)
                expect(group.spendMicroUsd).toBe(of.filter((task) => task.status === "SUCCESS").reduce((sum, task) => sum + task.job.priceMicroUsd, 0))
                expect(group.uploads).toBe(mineUploaded.filter((upload) => upload.keyId === group.group).length)
              }
              expect(report.groups.map((group) => group.group)).toEqual(
                account === bob.id ? ["key_bob", null] : account === undefined ? ["key_a1", "key_a2", "key_bob", null] : ["key_a1", "key_a2"]
              )
            }
          }
        }
        // Deleting the uploads changes no report: a window's usage stays what it was.
        const now = yield* TestClock.currentTimeMillis
        for (const upload of uploadRecords) expect(Option.isSome(yield* uploads.delete(upload.id, upload.ownerId, now))).toBe(true)
        for (const account of [alice("").id, bob.id, undefined]) {
          for (const groupBy of ["day", "model", "key"] as const) {
            const report = Usage.report({ ...window, groupBy }, yield* usage.usage({ ...window, groupBy, accountId: account }))
            expect(report, `${account} ${groupBy} after the uploads were deleted`).toEqual(answers.get(`${name} ${account} ${groupBy}`))
          }
        }
        // Another window sees nothing of these.
        const before = Usage.report({ from: window.from - 40 * 86_400_000, to: window.from, groupBy: "day" }, yield* usage.usage({ from: window.from - 40 * 86_400_000, to: window.from, groupBy: "day" }))
        expect(before.groups).toEqual([])
        expect(before.totals.tasks.total).toBe(0)
        expect(before.totals.uploads).toBe(0)

        // The overview, from the same tasks.
        const windows = Insights.statsWindows(now, 60, 30)
        const overview = Insights.overview(windows, yield* usage.stats(windows))
        expect(overview.perMinute).toHaveLength(60)
        expect(overview.perMinute.reduce((sum, minute) => sum + minute.counts.SUCCESS + minute.counts.FAILURE + minute.counts.CANCELLED, 0)).toBe(records.length)
        for (const row of overview.perMinute) {
          const created = records.filter((task) => Math.floor(task.createdAt / 60_000) === row.minute)
          expect(row.counts.SUCCESS).toBe(created.filter((task) => task.status === "SUCCESS").length)
        }
        for (const model of [alpha, dream]) {
          const durations = records.filter((task) => task.status === "SUCCESS" && task.input["model"] === model).map((task) => task.updatedAt - task.createdAt).sort((a, b) => a - b)
          expect(overview.timeToResult.find((row) => row.model === model)).toEqual({
            model,
            count: durations.length,
            p50: UsageRecords.nearestRank(durations, 50),
            p95: UsageRecords.nearestRank(durations, 95)
          })
        }
        expect(overview.failures.reduce((sum, row) => sum + row.count, 0)).toBe(records.filter((task) => task.status === "FAILURE").length)
        expect(overview.spendPerDay).toHaveLength(30)
        expect(overview.spendPerDay.at(-1)!.day).toBe("2026-11-30")
        expect(overview.spendPerDay.reduce((sum, day) => sum + day.spendMicroUsd, 0)).toBe(
          records.filter((task) => task.status === "SUCCESS").reduce((sum, task) => sum + task.job.priceMicroUsd, 0)
        )
      }), { timeout: 120_000 })
  }

  it(`every backend answers the same reports${skipped}`, () => {
    const names = backends.map(([name]) => name)
    for (const [key, report] of answers) {
      if (!key.startsWith("memory ")) continue
      for (const other of names.slice(1)) expect(answers.get(key.replace("memory", other)), `${other}: ${key}`).toEqual(report)
    }
    expect(answers.size).toBe(names.length * 9)
  })
})
