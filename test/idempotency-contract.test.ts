/**
 * The IdempotencyKeys contract, one suite over the memory keys, SQLite and PostgreSQL (when
 * MEDIAGATE_TEST_PG_URL is set): reserve, complete, replay, mismatch, a live and a stale
 * reservation, take-over, release, expiry after 24 hours and pruning, keys per account, and
 * one winner among concurrent first requests. SQLite keys also outlive their client.
 */
import type { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { IdempotencyKeys, Ids } from "@mediagate/core"
import { MemoryIdempotencyKeys } from "@mediagate/store-memory"
import { Database, SqlIdempotencyKeys } from "@mediagate/store-sql"
import { freshPgDatabase, pgSkipReason } from "@mediagate/store-sql/testing"
import { Effect, Layer, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

let counter = 0
const uniquePrefix = () => `k${process.pid}_${++counter}_`

const sqliteDir = mkdtempSync(join(tmpdir(), "mediagate-keys-"))
afterAll(() => rmSync(sqliteDir, { recursive: true, force: true }))
const pgUrl = process.env["MEDIAGATE_TEST_PG_URL"]
pgSkipReason("idempotency-contract")

type Backend = {
  readonly name: string
  readonly shared: Layer.Layer<SqlClient.SqlClient, unknown> | undefined
  readonly keys: (prefix: string) => Layer.Layer<IdempotencyKeys.IdempotencyKeys, unknown, SqlClient.SqlClient>
}

const backends: ReadonlyArray<Backend> = [
  { name: "memory", shared: undefined, keys: () => MemoryIdempotencyKeys.layer },
  { name: "sqlite", shared: Database.layerSqlite(join(sqliteDir, "keys.db")), keys: (tablePrefix) => SqlIdempotencyKeys.layerWith({ tablePrefix }) },
  ...(pgUrl === undefined ? [] : [{
    name: "postgres",
    shared: Layer.unwrapScoped(Effect.map(freshPgDatabase(pgUrl, "keys"), (url) => Database.layerPg(Redacted.make(url)))),
    keys: (tablePrefix: string) => SqlIdempotencyKeys.layerWith({ tablePrefix })
  }])
]

const alice = Ids.AccountId.make("alice")
const bob = Ids.AccountId.make("bob")
const task = (n: number) => Ids.TaskId.make(`0190c8a4-0000-7000-8000-${String(n).padStart(12, "0")}`)
const t0 = 1_800_000_000_000
const day = IdempotencyKeys.keyLifetimeMs

const reservation = (overrides: Partial<IdempotencyKeys.Reservation> = {}): IdempotencyKeys.Reservation => {
  const now = overrides.now ?? t0
  return {
    owner: alice,
    key: "key-1",
    fingerprint: "f1",
    taskId: task(1),
    now,
    leaseUntil: now + IdempotencyKeys.reservationLeaseMs,
    expiredBefore: now - day,
    ...overrides
  }
}

for (const backend of backends) {
  const suite = (it: { readonly effect: (name: string, self: () => Effect.Effect<unknown, unknown, any>) => unknown }) => {
    const withKeys = <A, E>(body: (keys: IdempotencyKeys.IdempotencyKeys["Type"]) => Effect.Effect<A, E>) =>
      Effect.flatMap(IdempotencyKeys.IdempotencyKeys, body).pipe(Effect.provide(backend.keys(uniquePrefix())))

    it.effect("a free key is reserved; completed, it answers with its task, and tells a different body apart", () =>
      withKeys((keys) =>
        Effect.gen(function*() {
          expect(yield* keys.begin(reservation())).toEqual({ _tag: "Reserved" })
          expect(yield* keys.begin(reservation({ taskId: task(2), now: t0 + 1 }))).toEqual({ _tag: "InProgress", sameBody: true })
          expect(yield* keys.begin(reservation({ taskId: task(2), fingerprint: "f2", now: t0 + 1 }))).toEqual({ _tag: "InProgress", sameBody: false })
          yield* keys.complete(alice, "key-1", task(1))
          expect(yield* keys.begin(reservation({ taskId: task(3), now: t0 + 2 }))).toEqual({ _tag: "Completed", taskId: task(1), sameBody: true })
          expect(yield* keys.begin(reservation({ taskId: task(3), fingerprint: "f2", now: t0 + 2 }))).toEqual({ _tag: "Completed", taskId: task(1), sameBody: false })
          // Completing for another task id changes nothing.
          yield* keys.complete(alice, "key-1", task(9))
          expect(yield* keys.begin(reservation({ taskId: task(3), now: t0 + 3 }))).toMatchObject({ _tag: "Completed", taskId: task(1) })
        })
      ))

    it.effect("keys are per account", () =>
      withKeys((keys) =>
        Effect.gen(function*() {
          expect(yield* keys.begin(reservation())).toEqual({ _tag: "Reserved" })
          expect(yield* keys.begin(reservation({ owner: bob, taskId: task(2) }))).toEqual({ _tag: "Reserved" })
          yield* keys.complete(bob, "key-1", task(2))
          yield* keys.complete(alice, "key-1", task(1))
          expect(yield* keys.begin(reservation({ owner: bob, taskId: task(3) }))).toMatchObject({ _tag: "Completed", taskId: task(2) })
          expect(yield* keys.begin(reservation({ taskId: task(3) }))).toMatchObject({ _tag: "Completed", taskId: task(1) })
        })
      ))

    it.effect("a released key is free again; a completed one is not released", () =>
      withKeys((keys) =>
        Effect.gen(function*() {
          yield* keys.begin(reservation())
          yield* keys.release(alice, "key-1", task(9))
          expect(yield* keys.begin(reservation({ taskId: task(2) }))).toMatchObject({ _tag: "InProgress" })
          yield* keys.release(alice, "key-1", task(1))
          expect(yield* keys.begin(reservation({ taskId: task(2), fingerprint: "f2" }))).toEqual({ _tag: "Reserved" })
          yield* keys.complete(alice, "key-1", task(2))
          yield* keys.release(alice, "key-1", task(2))
          expect(yield* keys.begin(reservation({ taskId: task(3), fingerprint: "f2" }))).toMatchObject({ _tag: "Completed", taskId: task(2) })
        })
      ))

    it.effect("a reservation past its lease is stale; one request takes it over, and only from the task it names", () =>
      withKeys((keys) =>
        Effect.gen(function*() {
          yield* keys.begin(reservation())
          const later = t0 + IdempotencyKeys.reservationLeaseMs
          expect(yield* keys.begin(reservation({ taskId: task(2), now: later }))).toEqual({ _tag: "Stale", taskId: task(1), sameBody: true })
          expect(yield* keys.takeOver(reservation({ taskId: task(2), now: later }), task(7))).toBe(false)
          expect(yield* keys.takeOver(reservation({ taskId: task(2), now: later }), task(1))).toBe(true)
          expect(yield* keys.takeOver(reservation({ taskId: task(3), now: later }), task(1))).toBe(false)
          expect(yield* keys.begin(reservation({ taskId: task(3), now: later + 1 }))).toEqual({ _tag: "InProgress", sameBody: true })
          yield* keys.complete(alice, "key-1", task(2))
          expect(yield* keys.takeOver(reservation({ taskId: task(3), now: later + 2 * IdempotencyKeys.reservationLeaseMs }), task(2))).toBe(false)
          expect(yield* keys.begin(reservation({ taskId: task(3), now: later + 2 }))).toMatchObject({ _tag: "Completed", taskId: task(2) })
        })
      ))

    it.effect("a key expires 24 hours after its first use and is reserved afresh; prune deletes expired keys", () =>
      withKeys((keys) =>
        Effect.gen(function*() {
          yield* keys.begin(reservation())
          yield* keys.complete(alice, "key-1", task(1))
          yield* keys.begin(reservation({ key: "key-2", taskId: task(5), now: t0 + 1000 }))
          expect(yield* keys.begin(reservation({ taskId: task(2), now: t0 + day - 1 }))).toMatchObject({ _tag: "Completed", taskId: task(1) })
          expect(yield* keys.begin(reservation({ taskId: task(2), fingerprint: "f2", now: t0 + day + 1 }))).toEqual({ _tag: "Reserved" })
          yield* keys.complete(alice, "key-1", task(2))
          expect(yield* keys.begin(reservation({ taskId: task(3), fingerprint: "f2", now: t0 + day + 2 }))).toMatchObject({ _tag: "Completed", taskId: task(2) })
          // key-2 (first used at t0 + 1 s) is pruned; key-1, used again, is not.
          expect(yield* keys.prune(t0 + day)).toBe(1)
          expect(yield* keys.begin(reservation({ key: "key-2", taskId: task(6), now: t0 + day + 3 }))).toEqual({ _tag: "Reserved" })
        })
      ))

    it.effect("of 8 concurrent first requests with one key, exactly one reserves it", () =>
      withKeys((keys) =>
        Effect.gen(function*() {
          const outcomes = yield* Effect.all(
            Array.from({ length: 8 }, (_, i) => keys.begin(reservation({ key: "race", taskId: task(10 + i) }))),
            { concurrency: "unbounded" }
          )
          expect(outcomes.filter((outcome) => outcome._tag === "Reserved")).toHaveLength(1)
          expect(outcomes.filter((outcome) => outcome._tag === "InProgress")).toHaveLength(7)
        })
      ))

    it.effect("a key up to 255 characters of any visible ASCII is stored as given", () =>
      withKeys((keys) =>
        Effect.gen(function*() {
          const key = `${"x".repeat(250)}'"\\%_`
          expect(yield* keys.begin(reservation({ key }))).toEqual({ _tag: "Reserved" })
          yield* keys.complete(alice, key, task(1))
          expect(yield* keys.begin(reservation({ key, taskId: task(2) }))).toMatchObject({ _tag: "Completed", taskId: task(1) })
          expect(yield* keys.begin(reservation({ key: key.slice(0, -1), taskId: task(3) }))).toEqual({ _tag: "Reserved" })
        })
      ))
  }

  if (backend.shared === undefined) {
    describe(`IdempotencyKeys contract: ${backend.name}`, () => suite(it))
  } else {
    describe(`IdempotencyKeys contract: ${backend.name}`, () => {
      it.layer(backend.shared as Layer.Layer<SqlClient.SqlClient>, { timeout: 60_000 })((it) => suite(it))
    })
  }
}

describe("IdempotencyKeys on SQLite", () => {
  it.effect("a key outlives its client: reopened, the database still answers with the task", () =>
    Effect.gen(function*() {
      const file = join(sqliteDir, "reopen.db")
      const open = Effect.flatMap(IdempotencyKeys.IdempotencyKeys, (keys) => Effect.succeed(keys))
      yield* Effect.scoped(Effect.gen(function*() {
        const keys = yield* Layer.build(SqlIdempotencyKeys.layer.pipe(Layer.provide(Database.layerSqlite(file))))
        const service = yield* Effect.provide(open, keys)
        yield* service.begin(reservation())
        yield* service.complete(alice, "key-1", task(1))
      }))
      yield* Effect.scoped(Effect.gen(function*() {
        const keys = yield* Layer.build(SqlIdempotencyKeys.layer.pipe(Layer.provide(Database.layerSqlite(file))))
        const service = yield* Effect.provide(open, keys)
        expect(yield* service.begin(reservation({ taskId: task(2), now: t0 + 5000 }))).toEqual({ _tag: "Completed", taskId: task(1), sameBody: true })
      }))
    }))
})

describe("Idempotency-Key values and fingerprints", () => {
  it("bare and quoted keys, 1 to 255 characters", () => {
    expect(IdempotencyKeys.parseKey("abc")).toEqual({ key: "abc" })
    expect(IdempotencyKeys.parseKey("\"8e03978e-40d5-43e8-bc93-6894a57f9324\"")).toEqual({ key: "8e03978e-40d5-43e8-bc93-6894a57f9324" })
    expect(IdempotencyKeys.parseKey("\"a \\\"b\\\" \\\\ c\"")).toEqual({ key: "a \"b\" \\ c" })
    expect(IdempotencyKeys.parseKey("\"a\"b\"")).toHaveProperty("problem")
    expect(IdempotencyKeys.parseKey("")).toEqual({ problem: "Idempotency-Key must be 1 to 255 characters" })
    expect(IdempotencyKeys.parseKey("\"\"")).toEqual({ problem: "Idempotency-Key must be 1 to 255 characters" })
    expect(IdempotencyKeys.parseKey("k".repeat(255))).toEqual({ key: "k".repeat(255) })
    expect(IdempotencyKeys.parseKey("k".repeat(256))).toEqual({ problem: "Idempotency-Key must be 1 to 255 characters" })
  })

  it.effect("the fingerprint ignores key order and spacing, not values", () =>
    Effect.gen(function*() {
      const a = yield* IdempotencyKeys.fingerprint(JSON.parse("{\"model\":\"m\",\"input\":{\"prompt\":\"p\",\"n\":2}}"))
      const b = yield* IdempotencyKeys.fingerprint(JSON.parse("{ \"input\": { \"n\": 2, \"prompt\": \"p\" }, \"model\": \"m\" }"))
      const c = yield* IdempotencyKeys.fingerprint(JSON.parse("{\"model\":\"m\",\"input\":{\"prompt\":\"p\",\"n\":3}}"))
      expect(a).toBe(b)
      expect(a).not.toBe(c)
      expect(a).toMatch(/^[0-9a-f]{64}$/)
    }))
})
