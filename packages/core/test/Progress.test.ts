/**
 * Folding an upstream's report into a task's progress: stage, bounds, log merging, throttle.
 */
import { describe, expect, it } from "vitest"
import { Progress } from "../src/index.js"

describe("Progress.fromUpstream", () => {
  it("a queue position means queued (percent not shown); without one, running", () => {
    expect(Progress.fromUpstream(null, { queuePosition: 3, percent: 50 }, 0)).toEqual({
      stage: "queued", queuePosition: 3, percent: null, logsTail: [], updatedAt: 0
    })
    expect(Progress.fromUpstream(null, { percent: 150 }, 0)?.percent).toBe(100)
    expect(Progress.fromUpstream(null, {}, 0)).toMatchObject({ stage: "running", queuePosition: null, percent: null })
    expect(Progress.fromUpstream(null, undefined, 0)).toBeUndefined()
  })

  it("within 500 ms of the last change only a change of stage is taken; nothing new is nothing to write", () => {
    const first = Progress.fromUpstream(null, { queuePosition: 2 }, 1_000)!
    expect(Progress.fromUpstream(first, { queuePosition: 1 }, 1_200)).toBeUndefined()
    expect(Progress.fromUpstream(first, { queuePosition: 1 }, 1_500)?.queuePosition).toBe(1)
    expect(Progress.fromUpstream(first, { percent: 1 }, 1_100)?.stage).toBe("running")
    expect(Progress.fromUpstream(first, { queuePosition: 2 }, 9_000)).toBeUndefined()
  })

  it("logs: a whole log so far gives its tail; new lines only are appended; bounded to 20 lines, 500 characters each, 4 KB", () => {
    const a = Progress.fromUpstream(null, { logs: ["a", "b"] }, 0)!
    expect(Progress.fromUpstream(a, { logs: ["a", "b", "c"] }, 600)?.logsTail).toEqual(["a", "b", "c"])
    expect(Progress.fromUpstream(a, { logs: ["c"] }, 600)?.logsTail).toEqual(["a", "b", "c"])
    const many = Array.from({ length: 50 }, (_, i) => `${i}`)
    expect(Progress.boundTail(many)).toEqual(many.slice(30))
    const long = Progress.boundTail(Array.from({ length: 20 }, () => "y".repeat(900)))
    expect(long.every((line) => line.length === 500)).toBe(true)
    expect(long.join("").length).toBeLessThanOrEqual(4096)
    expect(long.length).toBe(8)
  })

  it("finishing keeps the logs and drops the numbers", () => {
    expect(Progress.finishing({ stage: "running", queuePosition: null, percent: 90, logsTail: ["x"], updatedAt: 0 }, 5)).toEqual({
      stage: "finishing", queuePosition: null, percent: null, logsTail: ["x"], updatedAt: 5
    })
  })
})
