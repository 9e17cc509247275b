/**
 * Upstream attempts and the engine's choice after a failed call, as tables: retry with
 * backoff, fall back or fail; which attempt a call belongs to and its idempotency key.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Task } from "@mediagate/core"
import { Attempt, Transition, UpstreamError } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { Either } from "effect"

const motion = Testing.record({
  id: "t1",
  upstreamId: "up-1",
  input: { model: "motion-2.0", prompt: "a heron" },
  job: Testing.job({ model: "motion-2.0", output: "video", sync: false, duration: 8, fallbackModel: "motion-1.5-pro" })
})
const fallenBack = (job: Task.UpstreamJob): Task.UpstreamJob => ({ ...job, model: "motion-1.5-pro", fallbackModel: null })
const noFallback = (): Task.UpstreamJob | undefined => undefined
const policy: Attempt.RetryPolicy = { baseDelay: 1_000, maxDelay: 8_000, maxTransientFailures: 5 }

const decide = (
  reason: Task.FailureReason | null,
  retryable: boolean,
  options: {
    readonly fallback?: (job: Task.UpstreamJob) => Task.UpstreamJob | undefined
    readonly record?: Task.TaskRecord
    readonly jitter?: number
    readonly retryAfterMs?: number
    readonly circuitOpen?: boolean
    readonly failover?: (job: Task.UpstreamJob) => Task.UpstreamJob | undefined
  } = {}
) =>
  Attempt.decide({
    record: options.record ?? motion,
    error: new UpstreamError({
      message: "failed",
      reason,
      retryable,
      ...(options.retryAfterMs === undefined ? {} : { retryAfterMs: options.retryAfterMs }),
      ...(options.circuitOpen === undefined ? {} : { circuitOpen: options.circuitOpen })
    }),
    now: 100_000,
    startedAt: 99_000,
    policy,
    jitter: options.jitter ?? 0.5,
    fallback: options.fallback ?? fallenBack,
    provider: `p${motion.job.target ?? 0}`,
    ...(options.failover === undefined ? {} : { failover: options.failover })
  })

/** Two provider targets: the first fails over to the second, the second to none. */
const twoTargets = (job: Task.UpstreamJob): Task.UpstreamJob | undefined =>
  (job.target ?? 0) === 0 ? { ...job, target: 1 } : undefined

/** `motion` after `failures` transient failures in its running attempt. */
const afterFailures = (failures: number) =>
  new (motion.constructor as typeof Task.TaskRecord)({
    ...motion,
    attempts: [{ number: 1, model: "motion-2.0", upstreamId: "up-1", startedAt: 0, endedAt: null, outcome: "running", error: "x", transientFailures: failures }]
  })

describe("Attempt.decide", () => {
  it("a transient failure retries the same model, even when a fallback exists, whatever its class", () => {
    for (const reason of [null, "INVALID_PARAMETERS", "CONTENT_MODERATION", "INSUFFICIENT_POINTS"] as const) {
      const decision = decide(reason, true)
      expect(decision._tag).toBe("Retry")
      expect(decision.attempts).toEqual([
        { number: 1, model: "motion-2.0", upstreamId: null, startedAt: 99_000, endedAt: null, outcome: "running", error: "failed", transientFailures: 1, provider: "p0" }
      ])
    }
  })

  it("backs off exponentially to the cap, ±20% by the jitter", () => {
    // failures before this one -> delay with jitter 0.5 (no spread), 0 (-20%), 1 (+20%)
    const table: ReadonlyArray<readonly [number, number, number, number]> = [
      [0, 1_000, 800, 1_200],
      [1, 2_000, 1_600, 2_400],
      [2, 4_000, 3_200, 4_800],
      [3, 8_000, 6_400, 9_600],
      [4, 8_000, 6_400, 9_600]
    ]
    for (const [before, middle, low, high] of table) {
      const at = (jitter: number) => {
        const decision = decide(null, true, { record: afterFailures(before), jitter })
        return decision._tag === "Retry" ? decision.at - 100_000 : Number.NaN
      }
      expect([at(0.5), at(0), at(0.999999)].map(Math.round)).toEqual([middle, low, high])
    }
  })

  it("never retries sooner than the upstream's Retry-After", () => {
    const decision = decide(null, true, { retryAfterMs: 30_000 })
    expect(decision._tag === "Retry" && decision.at).toBe(130_000)
    const shorter = decide(null, true, { retryAfterMs: 10 })
    expect(shorter._tag === "Retry" && shorter.at).toBe(101_000)
  })

  it("after the last transient failure the attempt fails, and moves to the fallback if there is one", () => {
    const decision = decide(null, true, { record: afterFailures(5) })
    expect(decision._tag).toBe("FallBack")
    expect(decision.attempts[0]).toMatchObject({ outcome: "failed", endedAt: 100_000, transientFailures: 6 })
    expect(decision.attempts[0]!.error).toMatch(/failed 6 times in a row; the last failure: failed/)
    const alone = decide(null, true, { record: afterFailures(5), fallback: noFallback })
    expect(alone._tag).toBe("Fail")
    expect(alone._tag === "Fail" && alone.error.retryable).toBe(false)
  })

  it("CONTENT_MODERATION and INSUFFICIENT_POINTS fail with their class, never fall back", () => {
    for (const reason of ["CONTENT_MODERATION", "INSUFFICIENT_POINTS"] as const) {
      const decision = decide(reason, false)
      expect(decision._tag).toBe("Fail")
      expect(decision._tag === "Fail" && decision.error.reason).toBe(reason)
      expect(decision.attempts.map((a) => a.outcome)).toEqual(["failed"])
    }
  })

  it("a null or INVALID_PARAMETERS failure falls back when the model offers one, ending the failed attempt", () => {
    for (const reason of [null, "INVALID_PARAMETERS"] as const) {
      const decision = decide(reason, false)
      expect(decision._tag).toBe("FallBack")
      if (decision._tag !== "FallBack") continue
      expect(decision.job.model).toBe("motion-1.5-pro")
      expect(decision.attempts).toEqual([
        { number: 1, model: "motion-2.0", upstreamId: null, startedAt: 99_000, endedAt: 100_000, outcome: "failed", error: "failed", transientFailures: 0, provider: "p0" }
      ])
    }
  })

  it("without a fallback the failure ends the task with its class", () => {
    expect(decide(null, false, { fallback: noFallback })).toMatchObject({ _tag: "Fail", error: { reason: null } })
    expect(decide("INVALID_PARAMETERS", false, { fallback: noFallback })).toMatchObject({ _tag: "Fail", error: { reason: "INVALID_PARAMETERS" } })
  })
})

describe("Attempt numbers and idempotency keys", () => {
  it("a call belongs to the running attempt, or the next one once the last has ended", () => {
    expect(Attempt.idempotencyKey(motion)).toBe("t1.1")
    const running = afterFailures(2)
    expect(Attempt.idempotencyKey(running)).toBe("t1.1")
    const failed = new (motion.constructor as typeof Task.TaskRecord)({
      ...motion,
      attempts: Attempt.close(running.attempts, 5, "failed", "gone")
    })
    expect(Attempt.idempotencyKey(failed)).toBe("t1.2")
    expect(Attempt.touch(failed, 7)).toMatchObject([{ number: 1, outcome: "failed" }, { number: 2, startedAt: 7, outcome: "running" }])
  })

  it("a terminal transition ends the running attempt with the task's outcome", () => {
    const running = afterFailures(0)
    const outcomes = [
      [{ to: "SUCCESS", result: { type: "video", urls: ["u"] } }, "succeeded", "x"],
      [{ to: "FAILURE", reason: null, message: "broken" }, "failed", "broken"],
      [{ to: "TIMEOUT", message: "late" }, "timed_out", "late"],
      [{ to: "CANCELLED" }, "cancelled", "x"]
    ] as const
    for (const [change, outcome, error] of outcomes) {
      const ended = Either.getOrThrow(Transition.apply(running, change, 9))
      expect(ended.attempts).toEqual([{ ...running.attempts[0], endedAt: 9, outcome, error }])
    }
  })

  it("transient failures that run out move the same job to the next provider target as a new attempt, before any model fallback", () => {
    const decision = decide(null, true, { record: afterFailures(5), failover: twoTargets })
    expect(decision._tag).toBe("FallBack")
    if (decision._tag !== "FallBack") return
    expect(decision.job).toEqual({ ...motion.job, target: 1 })
    expect(decision.attempts).toMatchObject([{ number: 1, outcome: "failed", transientFailures: 6, endedAt: 100_000 }])
    // With failures to spare the same target is retried.
    expect(decide(null, true, { record: afterFailures(2), failover: twoTargets })._tag).toBe("Retry")
  })

  it("an open circuit fails over at once; with no target left it is retried like any transient failure", () => {
    const decision = decide(null, true, { circuitOpen: true, failover: twoTargets })
    expect(decision).toMatchObject({ _tag: "FallBack", job: { target: 1 }, attempts: [{ outcome: "failed", provider: "p0" }] })
    expect(decide(null, true, { circuitOpen: true, failover: () => undefined })._tag).toBe("Retry")
  })

  it("permanent failures never fail over; the model's fallback starts again at its first target", () => {
    for (const reason of [null, "INVALID_PARAMETERS", "CONTENT_MODERATION"] as const) {
      const decision = decide(reason, false, { failover: twoTargets, fallback: (job) => ({ ...fallenBack(job), target: 1 }) })
      if (decision._tag === "FallBack") {
        expect(decision.job.model).toBe("motion-1.5-pro")
        expect(decision.job.target).toBeUndefined()
      } else {
        expect(reason).toBe("CONTENT_MODERATION")
      }
    }
    // The last target spent: the model's fallback.
    const last = new (motion.constructor as typeof Task.TaskRecord)({ ...afterFailures(5), job: { ...motion.job, target: 1 } })
    expect(decide(null, true, { record: last, failover: twoTargets })).toMatchObject({ _tag: "FallBack", job: { model: "motion-1.5-pro" } })
  })
})
