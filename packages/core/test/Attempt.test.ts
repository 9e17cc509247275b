/**
 * The engine's choice after a failed upstream call, as a table: retry, fall back or fail.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Task } from "@mediagate/core"
import { Attempt, Ids, UpstreamError } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"

const motion = Testing.record({
  id: "t1",
  upstreamId: "up-1",
  input: { model: "motion-2.0", prompt: "a heron" },
  job: Testing.job({ model: "motion-2.0", output: "video", sync: false, duration: 8, fallbackModel: "motion-1.5-pro" })
})
const fallenBack = (job: Task.UpstreamJob): Task.UpstreamJob => ({ ...job, model: "motion-1.5-pro", fallbackModel: null })
const noFallback = (): Task.UpstreamJob | undefined => undefined

const decide = (
  reason: Task.FailureReason | null,
  retryable: boolean,
  fallback: (job: Task.UpstreamJob) => Task.UpstreamJob | undefined = fallenBack
) =>
  Attempt.decide({
    record: motion,
    error: new UpstreamError({ message: "failed", reason, retryable }),
    now: 1_000,
    retryDelay: 5_000,
    fallback
  })

describe("Attempt.decide", () => {
  it("a transient failure retries the same model after the delay, even when a fallback exists", () => {
    for (const reason of [null, "INVALID_PARAMETERS", "CONTENT_MODERATION", "INSUFFICIENT_POINTS"] as const) {
      expect(decide(reason, true)).toEqual({ _tag: "Retry", at: 6_000 })
    }
  })

  it("CONTENT_MODERATION and INSUFFICIENT_POINTS fail with their class, never fall back", () => {
    for (const reason of ["CONTENT_MODERATION", "INSUFFICIENT_POINTS"] as const) {
      const decision = decide(reason, false)
      expect(decision._tag).toBe("Fail")
      expect(decision._tag === "Fail" && decision.error.reason).toBe(reason)
    }
  })

  it("a null or INVALID_PARAMETERS failure falls back when the model offers one, keeping the failed attempt", () => {
    for (const reason of [null, "INVALID_PARAMETERS"] as const) {
      const decision = decide(reason, false)
      expect(decision._tag).toBe("FallBack")
      if (decision._tag !== "FallBack") continue
      expect(decision.job.model).toBe("motion-1.5-pro")
      expect(decision.job.previousAttempts).toEqual([
        { model: "motion-2.0", upstreamId: Ids.UpstreamId.make("up-1"), failureReason: reason, error: "failed", failedAt: 1_000 }
      ])
    }
  })

  it("without a fallback the failure ends the task with its class", () => {
    expect(decide(null, false, noFallback)).toMatchObject({ _tag: "Fail", error: { reason: null } })
    expect(decide("INVALID_PARAMETERS", false, noFallback)).toMatchObject({ _tag: "Fail", error: { reason: "INVALID_PARAMETERS" } })
  })
})
