import { describe, expect, it } from "@effect/vitest"
import { ApiKeys, Ids, Task, TaskConflict, TaskStore } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { Effect, Option, Redacted } from "effect"
import { MemoryAccounts, MemoryTaskStore } from "../src/index.js"

const record = (id: string, owner: string, dueAt: number | null = 0) =>
  Testing.record({ id, ownerId: owner, status: dueAt === null ? "SUCCESS" : "PENDING", dueAt, deadlineAt: 1_000_000 })

describe("MemoryTaskStore", () => {
  it.effect("get is scoped to the owner", () =>
    Effect.gen(function*() {
      const store = yield* TaskStore.TaskStore
      yield* store.create(record("t1", "alice"))
      expect(Option.isSome(yield* store.getOwned(Ids.TaskId.make("t1"), Ids.AccountId.make("alice")))).toBe(true)
      expect(Option.isNone(yield* store.getOwned(Ids.TaskId.make("t1"), Ids.AccountId.make("bob")))).toBe(true)
      expect(Option.isSome(yield* store.get(Ids.TaskId.make("t1")))).toBe(true)
      expect(Option.isNone(yield* store.get(Ids.TaskId.make("nope")))).toBe(true)
    }).pipe(Effect.provide(MemoryTaskStore.layer)))

  it.effect("update checks the version: of two writers from the same read, exactly one wins", () =>
    Effect.gen(function*() {
      const store = yield* TaskStore.TaskStore
      yield* store.create(record("t1", "alice"))
      const read = Option.getOrThrow(yield* store.get(Ids.TaskId.make("t1")))
      const first = new Task.TaskRecord({ ...read, status: "PROCESSING", version: read.version + 1 })
      const second = new Task.TaskRecord({ ...read, status: "FAILURE", version: read.version + 1 })
      const outcomes = yield* Effect.all([store.update(first, read.version), store.update(second, read.version)].map(Effect.either), {
        concurrency: "unbounded"
      })
      expect(outcomes.filter((o) => o._tag === "Right")).toHaveLength(1)
      const loser = outcomes.find((o) => o._tag === "Left")
      expect(loser?._tag === "Left" && loser.left).toBeInstanceOf(TaskConflict)
      expect(Option.getOrThrow(yield* store.get(Ids.TaskId.make("t1"))).status).toBe("PROCESSING")
    }).pipe(Effect.provide(MemoryTaskStore.layer)))

  it.effect("claimDue leases due, non-terminal tasks once until the lease expires", () =>
    Effect.gen(function*() {
      const store = yield* TaskStore.TaskStore
      yield* store.create(record("due", "a", 100))
      yield* store.create(record("later", "a", 5_000))
      yield* store.create(record("done", "a", null))
      const first = yield* store.claimDue({ now: 1_000, limit: 10, worker: "w1", leaseUntil: 2_000 })
      expect(first.map((t) => t.id)).toEqual(["due"])
      expect(first[0]).toMatchObject({ leaseOwner: "w1", leaseUntil: 2_000, version: 2 })
      expect(yield* store.claimDue({ now: 1_500, limit: 10, worker: "w2", leaseUntil: 2_500 })).toEqual([])
      const taken = yield* store.claimDue({ now: 2_001, limit: 10, worker: "w2", leaseUntil: 3_000 })
      expect(taken.map((t) => [t.id, t.leaseOwner])).toEqual([["due", "w2"]])
      const limited = yield* store.claimDue({ now: 10_000, limit: 1, worker: "w3", leaseUntil: 11_000 })
      expect(limited).toHaveLength(1)
    }).pipe(Effect.provide(MemoryTaskStore.layer)))
})

/**
 * Every string reachable from a value: map keys and values, object keys and fields, the
 * contents of Redacted values and of byte buffers (as UTF-8 and hex).
 */
const reachableStrings = (root: unknown): Array<string> => {
  const found: Array<string> = []
  const seen = new Set<unknown>()
  const visit = (value: unknown): void => {
    if (typeof value === "string") return void found.push(value)
    if (typeof value !== "object" || value === null || seen.has(value)) return
    seen.add(value)
    if (Redacted.isRedacted(value)) return visit(Redacted.value(value))
    if (value instanceof Uint8Array) return void found.push(Buffer.from(value).toString("utf8"), Buffer.from(value).toString("hex"))
    if (value instanceof Map) return [...value].forEach(([k, v]) => (visit(k), visit(v)))
    if (value instanceof Set) return [...value].forEach(visit)
    for (const key of Reflect.ownKeys(value)) {
      if (typeof key === "string") found.push(key)
      visit((value as Record<PropertyKey, unknown>)[key])
    }
  }
  visit(root)
  return found
}

describe("MemoryAccounts", () => {
  const keys = [
    { id: "a1", name: "one", apiKey: Redacted.make("secret-key"), webhookSecret: Redacted.make("whsec_c2VjcmV0") },
    { id: "a2", name: "two", apiKey: Redacted.make("other-key") }
  ]
  const accounts = MemoryAccounts.make(keys)

  it.effect("authenticates the right key only", () =>
    Effect.gen(function*() {
      expect(yield* accounts.authenticate(Redacted.make("secret-key"))).toEqual(Option.some({ id: "a1", name: "one", keyId: "key_a1", scope: ApiKeys.unscoped }))
      expect(Option.isNone(yield* accounts.authenticate(Redacted.make("secret-kez")))).toBe(true)
      expect(Option.isNone(yield* accounts.authenticate(Redacted.make("")))).toBe(true)
    }))

  it.effect("keeps only hashes of keys: no key is found in clear anywhere in what the store holds", () =>
    Effect.gen(function*() {
      const state = MemoryAccounts.state(keys)
      // The state is all the service reads: it authenticates both keys from it alone.
      const served = MemoryAccounts.fromState(state)
      expect(yield* served.authenticate(Redacted.make("secret-key"))).toEqual(Option.some({ id: "a1", name: "one", keyId: "key_a1", scope: ApiKeys.unscoped }))
      expect(yield* served.authenticate(Redacted.make("other-key"))).toEqual(Option.some({ id: "a2", name: "two", keyId: "key_a2", scope: ApiKeys.unscoped }))
      const strings = reachableStrings(state)
      expect(strings).toContain(MemoryAccounts.hashKey("secret-key").toString("hex"))
      expect(strings).toContain("whsec_c2VjcmV0")
      for (const key of ["secret-key", "other-key"]) {
        expect(strings.filter((s) => s.includes(key))).toEqual([])
      }
      // The search looks inside maps and Redacted values, where a clear key would hide.
      expect(reachableStrings({ held: new Map([["a1", { key: Redacted.make("secret-key") }]]) })).toContain("secret-key")
    }))
})

// MemoryMediaStore runs the MediaStore contract with the file and S3 stores: test/media-store-contract.test.ts.
