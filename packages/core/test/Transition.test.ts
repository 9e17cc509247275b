/**
 * The task state machine (DESIGN.md section 2): every (from, to) pair of the seven
 * statuses, the data each legal change writes, rescheduling, and time monotonicity.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { IllegalTransition, Ids, Task, Transition } from "../src/index.js"
import * as TaskFixtures from "./TaskFixtures.js"

const statuses: ReadonlyArray<Task.TaskStatus> = [
  "PENDING",
  "SUBMITTED",
  "PROCESSING",
  "SUCCESS",
  "FAILURE",
  "TIMEOUT",
  "CANCELLED"
]

/** The legal changes, written out from DESIGN.md independently of Transition.ts. */
const legal: Readonly<Record<Task.TaskStatus, ReadonlyArray<Task.TaskStatus>>> = {
  PENDING: ["SUBMITTED", "PROCESSING", "SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"],
  SUBMITTED: ["PROCESSING", "SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"],
  PROCESSING: ["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"],
  SUCCESS: [],
  FAILURE: [],
  TIMEOUT: [],
  CANCELLED: []
}
const isLegal = (from: Task.TaskStatus, to: Task.TaskStatus) => legal[from].includes(to)
const terminal = ["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"]

const CREATED = 1_000
const UPDATED = 2_000
const NOW = 3_000

const job = TaskFixtures.job(true)

/** A record as the engine would hold it in `status`, leased by a worker. */
const record = (status: Task.TaskStatus, overrides: Partial<Task.TaskRecord> = {}) =>
  new Task.TaskRecord({
    id: Ids.TaskId.make("task-1"),
    ownerId: Ids.AccountId.make("acct-1"),
    status,
    input: { model: "alpha-image-2/text-to-image", prompt: "a lighthouse" },
    job,
    result: status === "SUCCESS" ? { type: "image", urls: ["https://cdn.example/old.png"] } : null,
    failureReason: status === "FAILURE" ? "CONTENT_MODERATION" : null,
    errorMessage: terminal.includes(status) && status !== "SUCCESS" ? "earlier" : null,
    callBackUrl: "https://hooks.example/cb",
    userId: "u-1",
    upstreamId: status === "SUBMITTED" || status === "PROCESSING" ? Ids.UpstreamId.make("up-0") : null,
    createdAt: CREATED,
    updatedAt: UPDATED,
    deadlineAt: 600_000,
    dueAt: terminal.includes(status) ? null : UPDATED,
    leaseOwner: "worker-a",
    leaseUntil: 50_000,
    version: 7,
    ...overrides
  })

const result: Task.TaskResult = { type: "image", urls: ["https://cdn.example/new.png"] }

/** The change a caller asks for to reach `to`, with the data that status needs. */
const changeTo = (to: Task.TaskStatus): Transition.TaskChange => {
  switch (to) {
    case "SUBMITTED":
      return { to, upstreamId: Ids.UpstreamId.make("up-1"), dueAt: 5_000 }
    case "PROCESSING":
      return { to, dueAt: 6_000 }
    case "SUCCESS":
      return { to, result }
    case "FAILURE":
      return { to, reason: "INVALID_PARAMETERS", message: "upstream said no" }
    case "TIMEOUT":
      return { to, message: "deadline passed" }
    case "CANCELLED":
      return { to }
    case "PENDING":
      // The type has no way back to PENDING; ask anyway to prove the function refuses it.
      return { to } as unknown as Transition.TaskChange
  }
}

const leftOf = <A, E>(outcome: Either.Either<A, E>): E => {
  if (Either.isRight(outcome)) throw new Error(`expected a Left, got ${JSON.stringify(outcome.right)}`)
  return outcome.left
}

const pairs = statuses.flatMap((from) => statuses.map((to) => ({ from, to, legal: isLegal(from, to) })))

describe("Transition.apply: all 49 (from, to) pairs", () => {
  it("covers 49 pairs, 15 legal and 34 illegal", () => {
    expect(pairs).toHaveLength(49)
    expect(pairs.filter((p) => p.legal)).toHaveLength(15)
  })

  for (const { from, legal: allowed, to } of pairs) {
    it(`${from} -> ${to} is ${allowed ? "legal" : "illegal"}`, () => {
      const before = record(from)
      expect(Transition.canTransition(from, to)).toBe(allowed)
      const outcome = Transition.apply(before, changeTo(to), NOW)

      if (!allowed) {
        const error = leftOf(outcome)
        expect(error).toBeInstanceOf(IllegalTransition)
        expect(error._tag).toBe("IllegalTransition")
        expect({ taskId: error.taskId, from: error.from, to: error.to }).toEqual({ taskId: "task-1", from, to })
        expect(error.message).toBe(`task task-1: illegal transition ${from} -> ${to}`)
      } else {
        const next = Either.getOrThrow(outcome)
        expect(next).toBeInstanceOf(Task.TaskRecord)
        expect(next.status).toBe(to)
        expect(next.version).toBe(8)
        expect(next.updatedAt).toBe(NOW)
        expect([next.leaseOwner, next.leaseUntil]).toEqual([null, null])
        // What the client submitted never changes.
        expect(next).toMatchObject({
          id: "task-1",
          ownerId: "acct-1",
          createdAt: CREATED,
          deadlineAt: 600_000,
          callBackUrl: "https://hooks.example/cb",
          userId: "u-1",
          input: before.input,
          job: before.job
        })

        switch (to) {
          case "SUBMITTED":
            expect([next.upstreamId, next.dueAt]).toEqual(["up-1", 5_000])
            break
          case "PROCESSING":
            expect(next.dueAt).toBe(6_000)
            // No new upstream id given: the one from SUBMITTED (or none from PENDING) stays.
            expect(next.upstreamId).toBe(from === "SUBMITTED" ? "up-0" : null)
            break
          case "SUCCESS":
            expect(next.result).toEqual(result)
            expect(next.failureReason).toBeNull()
            break
          case "FAILURE":
            expect([next.failureReason, next.errorMessage]).toEqual(["INVALID_PARAMETERS", "upstream said no"])
            break
          case "TIMEOUT":
            expect(next.errorMessage).toBe("deadline passed")
            expect(next.failureReason).toBeNull()
            break
          case "CANCELLED":
            expect(next.errorMessage).toBeNull()
            expect(next.failureReason).toBeNull()
            break
        }
        if (terminal.includes(to)) expect(next.dueAt).toBeNull()
        else expect(next.dueAt).not.toBeNull()
        if (to !== "SUCCESS") expect(next.result).toBeNull()
      }

      // apply is pure: the record it was given is untouched either way.
      expect(before).toEqual(record(from))
    })
  }
})

describe("Transition.apply: details", () => {
  it("PROCESSING takes a new upstream id when one is given", () => {
    const next = Either.getOrThrow(
      Transition.apply(record("SUBMITTED"), { to: "PROCESSING", upstreamId: Ids.UpstreamId.make("up-2"), dueAt: 9_000 }, NOW)
    )
    expect(next.upstreamId).toBe("up-2")
  })

  it("FAILURE with no specific reason stores null and the query shows failure_reason null", () => {
    const next = Either.getOrThrow(Transition.apply(record("PROCESSING"), { to: "FAILURE", reason: null, message: "x" }, NOW))
    expect(next.failureReason).toBeNull()
    expect(Task.toWire(next)).toMatchObject({ status: "FAILURE", result: null, failure_reason: null })
  })

  it("a task walked PENDING -> SUBMITTED -> PROCESSING -> SUCCESS shows its result only at the end", () => {
    let current = record("PENDING", { leaseOwner: null, leaseUntil: null, version: 1 })
    const steps: ReadonlyArray<[Transition.TaskChange, number]> = [
      [{ to: "SUBMITTED", upstreamId: Ids.UpstreamId.make("up-9"), dueAt: 3_500 }, 3_000],
      [{ to: "PROCESSING", dueAt: 4_500 }, 4_000],
      [{ to: "SUCCESS", result }, 5_000]
    ]
    for (const [change, now] of steps) {
      expect(Task.toWire(current).result).toBeNull()
      current = Either.getOrThrow(Transition.apply(current, change, now))
    }
    expect(current).toMatchObject({ status: "SUCCESS", version: 4, upstreamId: Ids.UpstreamId.make("up-9"), dueAt: null, updatedAt: 5_000 })
    expect(Task.toWire(current)).toMatchObject({ result, failure_reason: null, updated_at: "1970-01-01T00:00:05.000Z" })
    // Once terminal nothing moves it, not even to another terminal state.
    for (const to of statuses) expect(Either.isLeft(Transition.apply(current, changeTo(to), 6_000))).toBe(true)
  })
})

describe("Transition: updatedAt never goes backwards", () => {
  const legalPairs = pairs.filter((p) => p.legal)

  for (const { from, to } of legalPairs) {
    it(`${from} -> ${to} at a clock earlier than updatedAt keeps updatedAt`, () => {
      const next = Either.getOrThrow(Transition.apply(record(from), changeTo(to), UPDATED - 1_500))
      expect(next.updatedAt).toBe(UPDATED)
    })
  }

  it("at the same instant updatedAt stays equal", () => {
    const next = Either.getOrThrow(Transition.apply(record("PENDING"), changeTo("PROCESSING"), UPDATED))
    expect(next.updatedAt).toBe(UPDATED)
  })

  it("along a chain with a clock that jumps back and forth updatedAt is non-decreasing", () => {
    let current = record("PENDING")
    const seen = [current.updatedAt]
    const walk: ReadonlyArray<[Transition.TaskChange, number]> = [
      [{ to: "SUBMITTED", upstreamId: Ids.UpstreamId.make("u"), dueAt: 1 }, 10_000],
      [{ to: "PROCESSING", dueAt: 2 }, 4_000],
      [{ to: "CANCELLED" }, 12_000]
    ]
    for (const [change, now] of walk) {
      current = Either.getOrThrow(Transition.apply(current, change, now))
      seen.push(current.updatedAt)
    }
    expect(seen).toEqual([2_000, 10_000, 10_000, 12_000])
  })
})

describe("Transition.reschedule", () => {
  it.each(statuses.filter((s) => !terminal.includes(s)))(
    "%s: moves dueAt, keeps status, updatedAt and data, bumps version, releases the lease",
    (status) => {
      const before = record(status)
      const next = Either.getOrThrow(Transition.reschedule(before, 9_000))
      expect(next.status).toBe(status)
      expect(next.dueAt).toBe(9_000)
      expect(next.updatedAt).toBe(UPDATED)
      expect(next.version).toBe(8)
      expect([next.leaseOwner, next.leaseUntil]).toEqual([null, null])
      expect(next.upstreamId).toBe(before.upstreamId)
      expect(Task.toWire(next)).toEqual(Task.toWire(before))
      expect(before).toEqual(record(status))
    }
  )

  it.each(statuses.filter((s) => terminal.includes(s)))("%s: refused with IllegalTransition", (status) => {
    const error = leftOf(Transition.reschedule(record(status), 9_000))
    expect(error).toBeInstanceOf(IllegalTransition)
    expect({ taskId: error.taskId, from: error.from, to: error.to }).toEqual({ taskId: "task-1", from: status, to: status })
  })

  it("may swap the job and the upstream id (fallback, resubmission) without touching status or updatedAt", () => {
    const fallbackJob: Task.UpstreamJob = { ...job, model: "fallback-model", fallbackModel: null }
    const next = Either.getOrThrow(
      Transition.reschedule(record("SUBMITTED"), 9_000, { job: fallbackJob, upstreamId: null })
    )
    expect(next).toMatchObject({ status: "SUBMITTED", dueAt: 9_000, updatedAt: UPDATED, upstreamId: null, version: 8 })
    expect(next.job.model).toBe("fallback-model")
    expect(Either.isLeft(Transition.reschedule(record("FAILURE"), 9_000, { job: fallbackJob }))).toBe(true)
  })

  it("every reschedule is a write the optimistic check sees", () => {
    const once = Either.getOrThrow(Transition.reschedule(record("PROCESSING"), 9_000))
    const twice = Either.getOrThrow(Transition.reschedule(once, 10_000))
    expect([once.version, twice.version, twice.dueAt]).toEqual([8, 9, 10_000])
  })
})

describe("Task.checkedRecord", () => {
  const fields = () => {
    const { attempts: _attempts, progress: _progress, ...rest } = record("PENDING")
    return rest
  }

  it("is the record the class's constructor makes, its defaults filled in", () => {
    expect(Task.checkedRecord(fields())).toEqual(new Task.TaskRecord(fields()))
    expect(Task.checkedRecord(fields())).toBeInstanceOf(Task.TaskRecord)
  })

  it("refuses, as the constructor does, a field that does not fit its schema, in the job too", () => {
    for (const bad of [{ version: 1.5 }, { status: "WAITING" }, { job: { ...job, n: 0.5 } }, { job: { ...job, priceMicroUsd: 0.1 } }]) {
      const wrong = { ...fields(), ...bad } as unknown as ConstructorParameters<typeof Task.TaskRecord>[0]
      expect(() => new Task.TaskRecord(wrong)).toThrow()
      expect(() => Task.checkedRecord(wrong)).toThrow()
    }
  })
})
