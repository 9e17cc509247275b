import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { IllegalTransition, Task, Transition } from "../src/index.js"

const statuses: ReadonlyArray<Task.TaskStatus> = [
  "PENDING", "PROCESSING", "SUBMITTED", "SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"
]

/** The state machine of DESIGN.md section 2, written out independently of the code. */
const legal: ReadonlyArray<string> = [
  "PENDING->SUBMITTED", "PENDING->PROCESSING", "PENDING->SUCCESS", "PENDING->FAILURE", "PENDING->TIMEOUT", "PENDING->CANCELLED",
  "SUBMITTED->PROCESSING", "SUBMITTED->SUCCESS", "SUBMITTED->FAILURE", "SUBMITTED->TIMEOUT", "SUBMITTED->CANCELLED",
  "PROCESSING->SUCCESS", "PROCESSING->FAILURE", "PROCESSING->TIMEOUT", "PROCESSING->CANCELLED"
]

const record = (status: Task.TaskStatus) =>
  new Task.TaskRecord({
    id: "t1",
    ownerId: "a",
    status,
    input: { model: "m", prompt: "p" },
    job: {
      model: "alpha-image-2", mode: "text-to-image", output: "image", prompt: "p", n: 1, ratio: null,
      resolution: "1k", width: null, height: null, imageUrls: [], sync: true, priceMicroUsd: 20_000
    },
    result: null,
    failureReason: null,
    errorMessage: null,
    callBackUrl: null,
    userId: null,
    upstreamId: status === "SUBMITTED" || status === "PROCESSING" ? "up-0" : null,
    createdAt: 1_000,
    updatedAt: 2_000,
    deadlineAt: 100_000,
    dueAt: Task.isTerminal(status) ? null : 2_000,
    leaseOwner: "w",
    leaseUntil: 50_000,
    version: 7
  })

const result: Task.TaskResult = { type: "image", urls: ["https://cdn/x.png"] }

const changeTo = (to: Task.TaskStatus): Transition.TaskChange => {
  switch (to) {
    case "SUBMITTED":
      return { to, upstreamId: "up-1", dueAt: 5_000 }
    case "PROCESSING":
      return { to, dueAt: 6_000 }
    case "SUCCESS":
      return { to, result }
    case "FAILURE":
      return { to, reason: "INVALID_PARAMETERS", message: "bad" }
    case "TIMEOUT":
    case "CANCELLED":
      return { to }
    case "PENDING":
      // Nothing returns to PENDING; ask for it through a cast to prove the function refuses.
      return { to } as unknown as Transition.TaskChange
  }
}

describe("Transition.apply", () => {
  for (const from of statuses) {
    for (const to of statuses) {
      const isLegal = legal.includes(`${from}->${to}`)
      it(`${from} -> ${to} is ${isLegal ? "legal" : "illegal"}`, () => {
        expect(Transition.canTransition(from, to)).toBe(isLegal)
        const outcome = Transition.apply(record(from), changeTo(to), 3_000)
        if (!isLegal) {
          expect(Either.isLeft(outcome)).toBe(true)
          const error = Either.getLeft(outcome).pipe((o) => o._tag === "Some" ? o.value : undefined)
          expect(error).toBeInstanceOf(IllegalTransition)
          expect(error).toMatchObject({ taskId: "t1", from, to })
          return
        }
        const next = Either.getOrThrow(outcome)
        expect(next.status).toBe(to)
        expect(next.version).toBe(8)
        expect(next.updatedAt).toBe(3_000)
        expect(next.leaseOwner).toBeNull()
        expect(next.leaseUntil).toBeNull()
        expect(next.createdAt).toBe(1_000)
        if (to === "SUBMITTED") expect([next.upstreamId, next.dueAt]).toEqual(["up-1", 5_000])
        if (to === "PROCESSING") expect(next.dueAt).toBe(6_000)
        if (to === "SUCCESS") expect(next.result).toEqual(result)
        if (to === "FAILURE") expect([next.failureReason, next.errorMessage]).toEqual(["INVALID_PARAMETERS", "bad"])
        if (Task.isTerminal(to)) expect(next.dueAt).toBeNull()
        if (to !== "SUCCESS") expect(next.result).toBeNull()
      })
    }
  }

  it("the legal table has exactly the 15 transitions of the design", () => {
    const count = statuses.flatMap((from) => statuses.filter((to) => Transition.canTransition(from, to))).length
    expect(count).toBe(15)
  })

  it("PROCESSING keeps the upstream id it had when none is given", () => {
    const next = Either.getOrThrow(Transition.apply(record("SUBMITTED"), { to: "PROCESSING", dueAt: 9 }, 3_000))
    expect(next.upstreamId).toBe("up-0")
  })

  it("updatedAt never goes backwards", () => {
    const next = Either.getOrThrow(Transition.apply(record("PENDING"), { to: "TIMEOUT" }, 500))
    expect(next.updatedAt).toBe(2_000)
  })
})

describe("Transition.reschedule", () => {
  for (const status of statuses) {
    it(`${status}: ${Task.isTerminal(status) ? "refused" : "moves dueAt, keeps status and updatedAt"}`, () => {
      const outcome = Transition.reschedule(record(status), 9_000)
      if (Task.isTerminal(status)) {
        expect(Either.isLeft(outcome)).toBe(true)
        return
      }
      const next = Either.getOrThrow(outcome)
      expect(next.status).toBe(status)
      expect(next.dueAt).toBe(9_000)
      expect(next.updatedAt).toBe(2_000)
      expect(next.version).toBe(8)
      expect(next.leaseOwner).toBeNull()
    })
  }
})
