/**
 * When an accepted job is polled (`Lifecycle.nextPollAt`): the usual rhythm, and the
 * upstream's hint of when the job will be done (`SubmitOutcome.readyAt`), which only ever
 * brings the first poll forward.
 */
import { describe, expect, it } from "@effect/vitest"
import { Lifecycle } from "../src/index.js"
import * as Testing from "@mediagate/core/testing"

// A 10-minute deadline: the cap is 600 s / 36, about 17 s.
const task = Testing.record({ id: "t1", createdAt: 0, job: Testing.job({ sync: false }) })
const timing = { notifies: false, pollInterval: undefined, firstPollDelay: 20 }
const webhooks = { ...timing, notifies: true }

describe("Lifecycle.nextPollAt", () => {
  it("without a hint: 20 ms after acceptance, then as long again as the job has run, then half of it, capped", () => {
    expect(Lifecycle.nextPollAt(task, 1_000, 1_000, timing, 1)).toBe(1_020)
    expect(Lifecycle.nextPollAt(task, 1_300, 1_000, timing, 1)).toBe(1_600)
    expect(Lifecycle.nextPollAt(task, 5_000, 1_000, timing, 1)).toBe(7_000)
    expect(Lifecycle.nextPollAt(task, 100_000, 1_000, timing, 1)).toBe(100_000 + Math.round(600_000 / 36))
    // Jitter spreads the delay, not the time.
    expect(Lifecycle.nextPollAt(task, 1_000, 1_000, timing, 1.1)).toBe(1_022)
  })

  it("a job the upstream says is done already (an instant job) is polled at once", () => {
    expect(Lifecycle.nextPollAt(task, 1_003, 1_000, { ...timing, readyAt: 1_000 }, 1)).toBe(1_003)
    expect(Lifecycle.nextPollAt(task, 1_003, 1_000, { ...timing, readyAt: 1_003 }, 1.1)).toBe(1_003)
  })

  it("a job ready sooner than the usual first poll is polled when it is ready, never before (whole milliseconds, rounded up)", () => {
    expect(Lifecycle.nextPollAt(task, 1_000, 1_000, { ...timing, readyAt: 1_007 }, 1)).toBe(1_007)
    expect(Lifecycle.nextPollAt(task, 1_000, 1_000, { ...timing, readyAt: 1_007.2 }, 1)).toBe(1_008)
  })

  it("a hint later than the usual rhythm changes nothing: the job is polled as without it", () => {
    expect(Lifecycle.nextPollAt(task, 1_000, 1_000, { ...timing, readyAt: 13_000 }, 0.9)).toBe(Lifecycle.nextPollAt(task, 1_000, 1_000, timing, 0.9))
    expect(Lifecycle.nextPollAt(task, 1_000, 1_000, { ...webhooks, readyAt: 500_000 }, 1)).toBe(31_000)
  })

  it("a provider that sends webhooks is polled at its hint too, rather than 30 s later", () => {
    expect(Lifecycle.nextPollAt(task, 1_000, 1_000, webhooks, 1)).toBe(31_000)
    expect(Lifecycle.nextPollAt(task, 1_000, 1_000, { ...webhooks, readyAt: 4_000 }, 1)).toBe(4_000)
  })
})
