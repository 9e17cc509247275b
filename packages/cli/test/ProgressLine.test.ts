/**
 * `mediagate run`'s display on stderr: on a terminal a progress line redrawn in place with
 * the queue position and percent; piped, only the status lines.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import type { Task } from "@mediagate/client"
import * as Progress from "../src/ProgressLine.js"

const base: Task = {
  taskId: "t-1",
  status: "PENDING",
  input: { model: "dream-4", prompt: "p" },
  result: null,
  failure_reason: null,
  created_at: "2025-01-01T00:00:00.000Z",
  updated_at: "2025-01-01T00:00:00.000Z",
  adjustments: [],
  error: null,
  attempts: [],
  price_micro_usd: 1,
  progress: null
}

const progress = (fields: Partial<NonNullable<Task["progress"]>>): NonNullable<Task["progress"]> => ({
  stage: "running",
  queue_position: null,
  percent: null,
  logs_tail: [],
  updated_at: "2025-01-01T00:00:01.000Z",
  ...fields
})

/** A fake stderr that keeps what was written. */
const fakeStream = () => {
  const chunks: Array<string> = []
  return { chunks, output: { write: (text: string) => chunks.push(text) } }
}

const steps: ReadonlyArray<Task> = [
  base,
  { ...base, status: "PROCESSING", progress: progress({ stage: "queued", queue_position: 3 }) },
  { ...base, status: "PROCESSING", progress: progress({ percent: 45 }) },
  { ...base, status: "PROCESSING", progress: progress({ stage: "finishing" }) },
  { ...base, status: "SUCCESS", progress: progress({ stage: "finishing" }) }
]

describe("Progress", () => {
  it.effect("on a terminal: the line is redrawn with a carriage return, with the queue position, then a bar and the percent", () =>
    Effect.gen(function*() {
      const { chunks, output } = fakeStream()
      const display = yield* Progress.make(true, output)
      const fiber = yield* Effect.fork(display.around(Effect.forEach(steps, (task) =>
        Effect.zipRight(display.onProgress(task), Effect.sleep("1 second")), { discard: true })))
      yield* TestClock.adjust("10 seconds")
      yield* Fiber.join(fiber)
      const text = chunks.join("")
      expect(text).toContain("\r\x1b[K")
      expect(text).toMatch(/PROCESSING queued #3 \d+s/)
      expect(text).toContain("PROCESSING running [#########···········] 45%")
      expect(text).toContain("PROCESSING finishing (copying results)")
      // One line per status, whatever the progress did.
      expect(text.match(/t-1 PROCESSING\n/g)).toHaveLength(1)
      expect(text).toContain("t-1 SUCCESS\n")
      // Cleared at the end.
      expect(text.endsWith("\r\x1b[K")).toBe(true)
    }))

  it.effect("on a terminal: once the task has ended, nothing is drawn after its status line (not its last stage and percent)", () =>
    Effect.gen(function*() {
      const { chunks, output } = fakeStream()
      const display = yield* Progress.make(true, output)
      // The task ends keeping its last progress, as the server shows it; the spinner keeps
      // turning until the run returns (here 3 s later).
      const ended: ReadonlyArray<Task> = [
        { ...base, status: "PROCESSING", progress: progress({ percent: 90 }) },
        { ...base, status: "SUCCESS", progress: progress({ percent: 90 }) },
        { ...base, status: "SUCCESS", progress: progress({ percent: 90 }) }
      ]
      const fiber = yield* Effect.fork(display.around(Effect.forEach(ended, (task) =>
        Effect.zipRight(display.onProgress(task), Effect.sleep("1 second")), { discard: true })))
      yield* TestClock.adjust("10 seconds")
      yield* Fiber.join(fiber)
      const text = chunks.join("")
      expect(text).toMatch(/PROCESSING running \[#{18}·{2}\] 90% \d+s/)
      const after = text.slice(text.indexOf("t-1 SUCCESS\n") + "t-1 SUCCESS\n".length)
      expect(text).toContain("t-1 SUCCESS\n")
      // Only clears after the end: no spinner, no "SUCCESS running [...] 90%".
      expect(after.replaceAll("\r\x1b[K", "")).toBe("")
      expect(text).not.toMatch(/SUCCESS running/)
    }))

  it.effect("piped: the status lines only, no carriage returns, no progress", () =>
    Effect.gen(function*() {
      const { chunks, output } = fakeStream()
      const display = yield* Progress.make(false, output)
      const fiber = yield* Effect.fork(display.around(Effect.forEach(steps, (task) =>
        Effect.zipRight(display.onProgress(task), Effect.sleep("1 second")), { discard: true })))
      yield* TestClock.adjust("10 seconds")
      yield* Fiber.join(fiber)
      expect(chunks.join("")).toBe("t-1 PENDING\nt-1 PROCESSING\nt-1 SUCCESS\n")
    }))

  it("describes what is known, and nothing when nothing is", () => {
    expect(Progress.describe(null)).toBe("")
    expect(Progress.describe(progress({ stage: "queued" }))).toBe("queued")
    expect(Progress.describe(progress({}))).toBe("running")
    expect(Progress.describe(progress({ percent: 100 }))).toBe(`running [${"#".repeat(20)}] 100%`)
  })
})
