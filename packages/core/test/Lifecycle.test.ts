/**
 * What happens to a task on an event (`Lifecycle.decide`): properties over every event in
 * every state (total and legal for the state machine, nothing leaves a terminal state, never
 * a second upstream submit once the running attempt's job was accepted, what the write owes
 * agrees with `TaskWrites`), then one case per row of the table.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, FastCheck } from "effect"
import { Attempt, Ids, Lifecycle, Task, TaskWrites, Transition, UpstreamError } from "../src/index.js"
import * as TaskFixtures from "./TaskFixtures.js"

const statuses: ReadonlyArray<Task.TaskStatus> = ["PENDING", "SUBMITTED", "PROCESSING", "SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"]
const DEADLINE = 600_000
const NOW = 10_000
const result: Task.TaskResult = { type: "image", urls: ["https://up.example/1.png"] }
const policy = Attempt.defaultRetryPolicy

const job = TaskFixtures.job

const attempt = (overrides: Partial<Task.UpstreamAttempt> = {}): Task.UpstreamAttempt => ({
  number: 1,
  model: "alpha-image-2",
  upstreamId: null,
  startedAt: 1_000,
  endedAt: null,
  outcome: "running",
  error: null,
  transientFailures: 0,
  ...overrides
})

const record = (status: Task.TaskStatus, overrides: Partial<Task.TaskRecord> = {}) =>
  new Task.TaskRecord({
    id: Ids.TaskId.make("task-1"),
    ownerId: Ids.AccountId.make("acct-1"),
    status,
    input: { model: "alpha-image-2/text-to-image", prompt: "a lighthouse" },
    job: job(false),
    result: status === "SUCCESS" ? result : null,
    failureReason: null,
    errorMessage: null,
    callBackUrl: "https://hooks.example/cb",
    userId: null,
    upstreamId: null,
    createdAt: 0,
    updatedAt: 500,
    deadlineAt: DEADLINE,
    dueAt: Task.isTerminal(status) ? null : 500,
    leaseOwner: null,
    leaseUntil: null,
    version: 3,
    ...overrides
  }, true)

const retry = (overrides: Partial<Lifecycle.Retry> = {}): Lifecycle.Retry => ({ policy, jitter: 0.5, fallback: () => undefined, ...overrides })
const lease = { owner: "worker-a", until: NOW + 30_000 }

// ---- arbitraries: every state a stored task can be in, and every event ----

const arbAttempt = FastCheck.record({
  upstreamId: FastCheck.constantFrom(null, "up-1"),
  upstreamResult: FastCheck.option(FastCheck.constant(result), { nil: undefined }),
  copyFailures: FastCheck.option(FastCheck.integer({ min: 0, max: 5 }), { nil: undefined }),
  transientFailures: FastCheck.integer({ min: 0, max: 7 }),
  error: FastCheck.constantFrom(null, "boom"),
  outcome: FastCheck.constantFrom("running" as const, "failed" as const)
}).map(({ copyFailures, upstreamResult, ...rest }) =>
  attempt({ ...rest, ...(copyFailures === undefined ? {} : { copyFailures }), ...(upstreamResult === undefined ? {} : { upstreamResult }) })
)

const arbRecord = FastCheck.record({
  status: FastCheck.constantFrom(...statuses),
  sync: FastCheck.boolean(),
  upstreamId: FastCheck.constantFrom(null, Ids.UpstreamId.make("up-1")),
  attempts: FastCheck.array(arbAttempt, { maxLength: 2 }),
  dueAt: FastCheck.option(FastCheck.integer({ min: 0, max: 2 * DEADLINE }), { nil: null }),
  leaseUntil: FastCheck.option(FastCheck.integer({ min: 0, max: 2 * DEADLINE }), { nil: null }),
  callBackUrl: FastCheck.constantFrom(null, "https://hooks.example/cb"),
  started: FastCheck.boolean()
}).map(({ started, sync, attempts, ...fields }) =>
  record(fields.status, {
    ...fields,
    job: job(sync),
    attempts: attempts.map((a, i) => ({ ...a, number: i + 1, outcome: i < attempts.length - 1 ? "failed" : a.outcome })),
    callbackEvents: started ? { events: ["started"], lastProgress: null } : null
  })
)

const arbError = FastCheck.record({
  retryable: FastCheck.boolean(),
  reason: FastCheck.constantFrom(null, "CONTENT_MODERATION" as const, "INVALID_PARAMETERS" as const),
  partial: FastCheck.boolean(),
  circuitOpen: FastCheck.boolean()
}).map(({ circuitOpen, partial, reason, retryable }) =>
  new UpstreamError({ message: "upstream said no", reason, retryable, circuitOpen, ...(partial ? { partialResult: result } : {}) })
)

const arbRetry = FastCheck.record({ jitter: FastCheck.double({ min: 0, max: 0.999, noNaN: true }), falls: FastCheck.boolean() }).map(({ falls, jitter }) =>
  retry({ jitter, fallback: (j) => (falls ? { ...j, model: "other" } : undefined), failover: (j) => (falls ? { ...j, target: 1 } : undefined), route: () => "fal" })
)

const arbEvent: FastCheck.Arbitrary<Lifecycle.Event> = FastCheck.oneof(
  FastCheck.option(FastCheck.constant("too many images"), { nil: undefined }).map((rejection) => ({
    _tag: "Submitted" as const,
    ...(rejection === undefined ? {} : { rejection })
  })),
  FastCheck.constant({ _tag: "CreditsRefused" as const, message: "not enough credits" }),
  FastCheck.record({ hostsCopies: FastCheck.boolean() }).map(({ hostsCopies }) => ({ _tag: "Claimed" as const, hostsCopies, lease, provider: "fal" })),
  FastCheck.integer({ min: 0, max: NOW }).map((startedAt) => ({ _tag: "Accepted" as const, upstreamId: Ids.UpstreamId.make("up-2"), startedAt, pollAt: NOW + 1_000 })),
  FastCheck.option(FastCheck.integer({ min: 0, max: 100 }), { nil: undefined }).map((percent) => ({
    _tag: "Progressed" as const,
    progress: percent === undefined ? undefined : { percent },
    startedAt: 1_000,
    pollAt: NOW + 2_000
  })),
  FastCheck.boolean().map((hosted) => ({ _tag: "Succeeded" as const, result, startedAt: 1_000, hosted })),
  FastCheck.tuple(arbError, arbRetry).map(([error, r]) => ({ _tag: "Failed" as const, error, startedAt: 1_000, retry: r })),
  arbRetry.map((r) => ({ _tag: "RanOut" as const, limit: 30_000, startedAt: 1_000, retry: r })),
  FastCheck.constant({ _tag: "Webhook" as const }),
  FastCheck.constant({ _tag: "ResultCopied" as const, result, startedAt: 1_000 }),
  FastCheck.record({ retryable: FastCheck.boolean(), jitter: FastCheck.double({ min: 0, max: 0.999, noNaN: true }) }).map(({ jitter, retryable }) => ({
    _tag: "CopyFailed" as const,
    error: { message: "copy failed", retryable },
    startedAt: 1_000,
    policy,
    jitter
  })),
  FastCheck.constant({ _tag: "CancelRequested" as const }),
  FastCheck.constant({ _tag: "DeadlinePassed" as const }),
  FastCheck.constant({ _tag: "LeaseLost" as const })
)

const arbNow = FastCheck.integer({ min: 1_000, max: 2 * DEADLINE })

/** The record the answer's write makes, through the state machine (none: the record as it is). */
const written = (before: Task.TaskRecord, answer: Lifecycle.Answer, now: number) => {
  const write = answer.write
  switch (write._tag) {
    case "None":
      return Either.right(before)
    case "Create":
      return write.change === null ? Either.right(before) : Transition.apply(before, write.change, now)
    case "Apply":
      return Transition.apply(before, write.change, now)
    case "Reschedule":
      return Transition.reschedule(before, write.dueAt, write.patch)
  }
}

describe("Lifecycle properties", () => {
  it("every event in every state: an answer whose write the state machine allows, with the due time it writes", () => {
    FastCheck.assert(
      FastCheck.property(arbRecord, arbEvent, arbNow, (before, event, now) => {
        const answer = Lifecycle.decide(before, event, now)
        const after = written(before, answer, now)
        expect(Either.isRight(after)).toBe(true)
        if (Either.isRight(after)) expect(answer.dueAt).toBe(after.right.dueAt)
      }),
      { numRuns: 3_000 }
    )
  })

  it("never leaves a terminal state: no write, nothing owed, nothing follows (a cancel is refused)", () => {
    const ended = arbRecord.filter((r) => Task.isTerminal(r.status))
    FastCheck.assert(
      FastCheck.property(ended, arbEvent, arbNow, (before, event, now) => {
        const answer = Lifecycle.decide(before, event, now)
        expect(answer.write).toEqual({ _tag: "None" })
        expect(answer.then._tag).toBe(event._tag === "CancelRequested" ? "NotCancellable" : "Done")
        expect([answer.callback, answer.settles, answer.count, answer.alarm]).toEqual([null, false, undefined, undefined])
      }),
      { numRuns: 1_000 }
    )
  })

  it("never owes a second upstream submit once the running attempt's job was accepted, nor after an Accepted event", () => {
    FastCheck.assert(
      FastCheck.property(arbRecord, arbEvent, arbNow, arbNow, (before, event, now, later) => {
        const answer = Lifecycle.decide(before, event, now)
        if (Attempt.submitted(before) !== undefined || before.upstreamId !== null) {
          expect(answer.then._tag).not.toBe("Submit")
          // The claim is the event that submits: asked of every such record, not only when drawn.
          expect(Lifecycle.decide(before, { _tag: "Claimed", hostsCopies: now % 2 === 0, lease }, now).then._tag).not.toBe("Submit")
        }
        if (event._tag !== "Accepted") return
        const after = written(before, answer, now)
        if (Either.isLeft(after) || Task.isTerminal(after.right.status)) return
        const claimed = { _tag: "Claimed", hostsCopies: true, lease } as const
        // The write carries the attempts the answer owes (TaskWrites folds them in).
        const options = answer.write._tag === "Apply" ? answer.write.options : answer.write._tag === "Reschedule" ? answer.write.patch : {}
        const next = new Task.TaskRecord({ ...after.right, ...(options.attempts === undefined ? {} : { attempts: options.attempts }) }, true)
        expect(Lifecycle.decide(next, claimed, Math.max(now, later)).then._tag).not.toBe("Submit")
      }),
      { numRuns: 3_000 }
    )
  })

  it("the callback and settlement an answer names are the ones TaskWrites owes for its write", () => {
    FastCheck.assert(
      FastCheck.property(arbRecord, arbEvent, arbNow, (before, event, now) => {
        const answer = Lifecycle.decide(before, event, now)
        const after = written(before, answer, now)
        if (Either.isLeft(after)) return
        // A new task is written from nothing, and holds nothing to settle when it ends at once.
        const created = answer.write._tag === "Create"
        expect(answer.callback === "terminal").toBe(TaskWrites.owesCallback(created ? null : before.status, after.right))
        expect(answer.callback === "started").toBe(TaskWrites.eventsOwed(created ? null : before, after.right).some((owed) => owed.event === "started"))
        expect(answer.settles).toBe(!created && Task.isTerminal(after.right.status) && !Task.isTerminal(before.status))
      }),
      { numRuns: 2_000 }
    )
  })
})

describe("Lifecycle table", () => {
  const decide = (before: Task.TaskRecord, event: Lifecycle.Event, now = NOW) => Lifecycle.decide(before, event, now)
  const claimed = (hostsCopies = true): Lifecycle.Event => ({ _tag: "Claimed", hostsCopies, lease, provider: "fal" })
  const accepted = attempt({ upstreamId: "up-1" })
  const finished = attempt({ upstreamId: "up-1", upstreamResult: result, copyFailures: 1, error: "disk full" })

  it("submitted: stored with its price held and the engine woken; failed at once by its model's rule or its owner's credits", () => {
    const held = decide(record("PENDING"), { _tag: "Submitted" })
    expect([held.write, held.then, held.dueAt, held.callback, held.settles]).toEqual([{ _tag: "Create", change: null }, { _tag: "Wake" }, 500, null, false])
    const rejected = decide(record("PENDING"), { _tag: "Submitted", rejection: "too many images" })
    expect(rejected.write).toEqual({ _tag: "Create", change: { to: "FAILURE", reason: "INVALID_PARAMETERS", message: "too many images" } })
    expect([rejected.then, rejected.callback, rejected.settles, rejected.dueAt]).toEqual([{ _tag: "Done" }, "terminal", false, null])
    expect(decide(record("PENDING", { callBackUrl: null }), { _tag: "CreditsRefused", message: "short by 5" })).toMatchObject({
      write: { _tag: "Create", change: { to: "FAILURE", reason: "INSUFFICIENT_POINTS", message: "short by 5" } },
      callback: null
    })
    expect(decide(record("SUBMITTED"), { _tag: "Submitted" }).write).toEqual({ _tag: "None" })
  })

  it("claimed, new async task: submitted, nothing written first", () => {
    const answer = decide(record("PENDING"), claimed())
    expect([answer.write, answer.then, answer.count]).toEqual([{ _tag: "None" }, { _tag: "Submit" }, undefined])
  })

  it("claimed, new sync task: PROCESSING under the worker's lease with a new attempt, then the call; a retried attempt is counted", () => {
    const answer = decide(record("PENDING", { job: job(true), dueAt: 20_000 }), claimed())
    expect(answer.write).toEqual({
      _tag: "Apply",
      change: { to: "PROCESSING", dueAt: NOW },
      options: { lease, attempts: [attempt({ startedAt: NOW, provider: "fal" })] }
    })
    expect(answer.then).toEqual({ _tag: "Submit" })
    const again = decide(record("PROCESSING", { job: job(true), attempts: [attempt({ error: "boom" })] }), claimed())
    expect([again.write._tag, again.then._tag, again.count]).toEqual(["Reschedule", "Submit", { resubmit: "retried" }])
  })

  it("claimed, accepted job: polled; an accepted attempt on an unsubmitted-looking task is refused, its job id put back", () => {
    expect(decide(record("SUBMITTED", { upstreamId: Ids.UpstreamId.make("up-1") }), claimed()).then).toEqual({ _tag: "Poll", upstreamId: "up-1" })
    const answer = decide(record("SUBMITTED", { attempts: [accepted] }), claimed())
    expect(answer.write).toEqual({ _tag: "Reschedule", dueAt: NOW, patch: { upstreamId: "up-1" } })
    expect([answer.then._tag, answer.count, answer.alarm]).toEqual(["Done", { resubmit: "refused" }, expect.stringMatching(/about to submit attempt 1 again/)])
  })

  it("claimed, results waiting: copied; as given without a host; failed naming the job past the deadline", () => {
    const waiting = record("PROCESSING", { attempts: [finished] })
    expect(decide(waiting, claimed()).then).toEqual({ _tag: "Copy", attempt: finished })
    expect(decide(waiting, claimed(false)).write).toMatchObject({ _tag: "Apply", change: { to: "SUCCESS", result } })
    const late = decide(waiting, claimed(), DEADLINE)
    expect(late.write).toMatchObject({
      _tag: "Apply",
      change: { to: "FAILURE", message: "the result of upstream job up-1 could not be copied before the deadline (1 tries); the last failure: disk full" }
    })
    expect([late.count, late.settles, late.callback]).toEqual([{ copy: "failed" }, true, "terminal"])
  })

  it("claimed or deadline passed, past the deadline: TIMEOUT, then the upstream's job is cancelled", () => {
    for (const answer of [decide(record("SUBMITTED"), claimed(), DEADLINE), decide(record("SUBMITTED"), { _tag: "DeadlinePassed" })]) {
      expect(answer.write).toEqual({ _tag: "Apply", change: { to: "TIMEOUT", message: "the model's deadline passed" }, options: {} })
      expect([answer.then, answer.settles, answer.dueAt]).toEqual([{ _tag: "CancelUpstream" }, true, null])
    }
  })

  it("upstream accepted: SUBMITTED, due at the poll, the attempt holding the job's id; `started` owed when asked", () => {
    const asked = record("PENDING", { callbackEvents: { events: ["started"], lastProgress: null } })
    const answer = decide(asked, { _tag: "Accepted", upstreamId: Ids.UpstreamId.make("up-2"), startedAt: 2_000, pollAt: 12_000 })
    expect(answer.write).toEqual({
      _tag: "Apply",
      change: { to: "SUBMITTED", upstreamId: "up-2", dueAt: 12_000 },
      options: { attempts: [attempt({ upstreamId: "up-2", startedAt: 2_000 })] }
    })
    expect([answer.callback, answer.dueAt]).toEqual(["started", 12_000])
    // After a fallback the status stays.
    expect(decide(record("PROCESSING"), { _tag: "Accepted", upstreamId: Ids.UpstreamId.make("up-2"), startedAt: 2_000, pollAt: 12_000 }).write._tag).toBe(
      "Reschedule"
    )
  })

  it("upstream accepted a job it says is done already: SUBMITTED under the claim's lease, kept, and polled in the same step", () => {
    const accepted = { _tag: "Accepted", upstreamId: Ids.UpstreamId.make("up-2"), startedAt: NOW, pollAt: NOW } as const
    const leased = record("PENDING", { leaseOwner: lease.owner, leaseUntil: lease.until })
    const answer = decide(leased, accepted)
    expect(answer.write).toEqual({
      _tag: "Apply",
      change: { to: "SUBMITTED", upstreamId: "up-2", dueAt: NOW },
      options: { attempts: [attempt({ upstreamId: "up-2", startedAt: NOW })], lease }
    })
    expect(answer.then).toEqual({ _tag: "Poll", upstreamId: "up-2" })
    // Not ready yet, or no live lease to keep: written without one, polled by a later claim.
    for (const [before, event] of [[leased, { ...accepted, pollAt: NOW + 1 }], [record("PENDING"), accepted], [record("PENDING", { leaseOwner: lease.owner, leaseUntil: NOW }), accepted]] as const) {
      const later = decide(before, event)
      expect([later.then, later.write._tag === "Apply" && later.write.options.lease]).toEqual([{ _tag: "Done" }, undefined])
    }
  })

  it("upstream progressed: PROCESSING with its progress, ending a run of transient failures", () => {
    const before = record("SUBMITTED", { upstreamId: Ids.UpstreamId.make("up-1"), attempts: [attempt({ upstreamId: "up-1", transientFailures: 2 })] })
    const answer = decide(before, { _tag: "Progressed", progress: { percent: 40 }, startedAt: 3_000, pollAt: 15_000 })
    expect(answer.write).toMatchObject({
      _tag: "Apply",
      change: { to: "PROCESSING", dueAt: 15_000 },
      options: { attempts: [{ transientFailures: 0 }], progress: { stage: "running", percent: 40, updatedAt: NOW } }
    })
  })

  it("upstream succeeded: SUCCESS with the result; a hosted result is kept on the attempt for the copy, the task finishing", () => {
    const before = record("SUBMITTED", { upstreamId: Ids.UpstreamId.make("up-1"), attempts: [accepted] })
    expect(decide(before, { _tag: "Succeeded", result, startedAt: 3_000, hosted: false }).write).toMatchObject({
      _tag: "Apply",
      change: { to: "SUCCESS", result }
    })
    const hosted = decide(before, { _tag: "Succeeded", result, startedAt: 3_000, hosted: true })
    expect(hosted.write).toMatchObject({
      _tag: "Apply",
      change: { to: "PROCESSING", dueAt: NOW },
      options: { attempts: [{ upstreamResult: result, copyFailures: 0 }], progress: { stage: "finishing" } }
    })
    expect(hosted.settles).toBe(false)
  })

  it("upstream failed, retryable: tried again after the backoff, keeping what a split call drew", () => {
    const error = new UpstreamError({ message: "503", reason: null, retryable: true, partialResult: result })
    const answer = decide(record("PENDING"), { _tag: "Failed", error, startedAt: 2_000, retry: retry() })
    expect(answer.write).toEqual({
      _tag: "Reschedule",
      dueAt: NOW + 1_000,
      patch: { attempts: [attempt({ startedAt: 2_000, partialResult: result, transientFailures: 1, error: "503" })] }
    })
    expect(answer.failure).toBe(error)
  })

  it("upstream failed, permanent: FAILURE with its class; a fallback model's job is the next attempt, on its provider", () => {
    const error = new UpstreamError({ message: "refused", reason: "INVALID_PARAMETERS", retryable: false })
    const failed = decide(record("SUBMITTED"), { _tag: "Failed", error, startedAt: 2_000, retry: retry() })
    expect(failed.write).toMatchObject({ _tag: "Apply", change: { to: "FAILURE", reason: "INVALID_PARAMETERS", message: "refused" } })
    const fallback = { ...job(false), model: "other" }
    const fell = decide(record("SUBMITTED"), { _tag: "Failed", error, startedAt: 2_000, retry: retry({ fallback: () => fallback, route: () => "fal" }) })
    expect(fell.write).toMatchObject({ _tag: "Reschedule", dueAt: NOW, patch: { job: fallback, upstreamId: null, provider: "fal" } })
    // A class no other model cures fails at once.
    const moderated = new UpstreamError({ message: "no", reason: "CONTENT_MODERATION", retryable: false })
    expect(decide(record("SUBMITTED"), { _tag: "Failed", error: moderated, startedAt: 2_000, retry: retry({ fallback: () => fallback }) }).write)
      .toMatchObject({ change: { to: "FAILURE", reason: "CONTENT_MODERATION" } })
  })

  it("a call ran out: a transient failure before the deadline, TIMEOUT past it", () => {
    const before = decide(record("SUBMITTED"), { _tag: "RanOut", limit: 30_000, startedAt: 2_000, retry: retry() })
    expect(before.write).toMatchObject({ _tag: "Reschedule", patch: { attempts: [{ error: "the upstream did not answer within 30000 ms" }] } })
    expect(decide(record("SUBMITTED"), { _tag: "RanOut", limit: 30_000, startedAt: 2_000, retry: retry() }, DEADLINE).write)
      .toMatchObject({ change: { to: "TIMEOUT" } })
  })

  it("webhook: an accepted job due later is due now, the engine woken; a held task waits for its step; others are left alone", () => {
    const waiting = record("SUBMITTED", { upstreamId: Ids.UpstreamId.make("up-1"), dueAt: 40_000 })
    expect(decide(waiting, { _tag: "Webhook" })).toMatchObject({ write: { _tag: "Reschedule", dueAt: NOW, patch: {} }, then: { _tag: "Wake" } })
    expect(decide(new Task.TaskRecord({ ...waiting, leaseUntil: NOW + 1 }, true), { _tag: "Webhook" }).then).toEqual({ _tag: "AwaitStep" })
    // A lease that ended holds nothing.
    expect(decide(new Task.TaskRecord({ ...waiting, leaseUntil: NOW }, true), { _tag: "Webhook" }).then).toEqual({ _tag: "Wake" })
    expect(decide(new Task.TaskRecord({ ...waiting, dueAt: NOW }, true), { _tag: "Webhook" })).toMatchObject({ write: { _tag: "None" }, then: { _tag: "Wake" } })
    expect(decide(record("PENDING"), { _tag: "Webhook" })).toMatchObject({ write: { _tag: "None" }, then: { _tag: "Done" } })
    expect(decide(record("SUCCESS", { upstreamId: Ids.UpstreamId.make("up-1") }), { _tag: "Webhook" }).then).toEqual({ _tag: "Done" })
  })

  it("result copied: SUCCESS with the copies, counted", () => {
    const copied: Task.TaskResult = { type: "image", urls: ["https://cdn.example/1.png"] }
    const answer = decide(record("PROCESSING", { attempts: [finished] }), { _tag: "ResultCopied", result: copied, startedAt: 3_000 })
    expect(answer.write).toMatchObject({ _tag: "Apply", change: { to: "SUCCESS", result: copied } })
    expect(answer.count).toEqual({ copy: "ok" })
  })

  it("copy failed: tried again with backoff, counted on the attempt; failed when it cannot succeed or the next try is past the deadline", () => {
    const waiting = record("PROCESSING", { attempts: [finished] })
    const again = decide(waiting, { _tag: "CopyFailed", error: { message: "503", retryable: true }, startedAt: 3_000, policy, jitter: 0.5 })
    expect(again.write).toEqual({ _tag: "Reschedule", dueAt: NOW + 2_000, patch: { attempts: [{ ...finished, copyFailures: 2, error: "503" }] } })
    expect(again.count).toEqual({ copy: "retry" })
    const never = decide(waiting, { _tag: "CopyFailed", error: { message: "not ours", retryable: false }, startedAt: 3_000, policy, jitter: 0.5 })
    expect(never.write).toMatchObject({ change: { to: "FAILURE", message: "the result of upstream job up-1 cannot be copied: not ours" } })
    const late = decide(waiting, { _tag: "CopyFailed", error: { message: "503", retryable: true }, startedAt: 3_000, policy, jitter: 0.5 }, DEADLINE - 1)
    expect(late.write).toMatchObject({ change: { to: "FAILURE", message: expect.stringMatching(/before the deadline \(2 tries\)/) } })
  })

  it("cancel requested: CANCELLED, then the upstream's job is cancelled; refused once the task ended", () => {
    const answer = decide(record("SUBMITTED"), { _tag: "CancelRequested" })
    expect(answer.write).toEqual({ _tag: "Apply", change: { to: "CANCELLED", message: "cancelled by the client" }, options: {} })
    expect([answer.then, answer.settles, answer.callback]).toEqual([{ _tag: "CancelUpstream" }, true, "terminal"])
    expect(decide(record("SUCCESS"), { _tag: "CancelRequested" }).then).toEqual({ _tag: "NotCancellable" })
  })

  it("lease lost: nothing written, the task read again", () => {
    expect(decide(record("PROCESSING"), { _tag: "LeaseLost" })).toMatchObject({ write: { _tag: "None" }, then: { _tag: "Reread" } })
  })
})
