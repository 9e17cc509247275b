import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, FastCheck, Schema } from "effect"
import { Api, Task } from "../src/index.js"
import * as Testing from "../src/Testing.js"

/** What HttpApi sends for a query's task: the Schema's encoding, stringified. */
const bySchema = (task: Task.Task) => JSON.stringify(Schema.encodeSync(Api.TaskResponse)(Api.ok(task)))

describe("WireJson", () => {
  it("the query's answer is the TaskResponse Schema's, byte for byte, for any task in its wire shape", () => {
    FastCheck.assert(
      FastCheck.property(Arbitrary.make(Task.Task), (task) => {
        expect(Api.WireJson.taskResponse(task)).toBe(bySchema(task))
      }),
      { numRuns: 2_000 }
    )
  })

  it("and for the wire shape of any stored task (`Task.toWire`), whatever its status, attempts and progress", () => {
    FastCheck.assert(
      FastCheck.property(Arbitrary.make(Task.TaskRecord), (generated) => {
        // Times a Date can show (a stored one always is: the Clock's milliseconds).
        const time = (millis: number) => (Number.isFinite(millis) ? Math.abs(millis) % 8.64e15 : 0)
        const record = new Task.TaskRecord({
          ...generated,
          createdAt: time(generated.createdAt),
          updatedAt: time(generated.updatedAt),
          attempts: generated.attempts.map((attempt) => ({
            ...attempt,
            startedAt: time(attempt.startedAt),
            endedAt: attempt.endedAt === null ? null : time(attempt.endedAt)
          })),
          progress: generated.progress === null ? null : { ...generated.progress, updatedAt: time(generated.progress.updatedAt) }
        })
        const wire = Task.toWire(record)
        expect(Api.WireJson.taskResponse(wire)).toBe(bySchema(wire))
      }),
      { numRuns: 1_000 }
    )
  })

  it("keeps only the Schema's keys, in its order, where a value carries more or has them in another order", () => {
    const base = Task.toWire(Testing.record({ id: "0190c8a4-0000-7000-8000-000000000001", status: "SUCCESS", result: { type: "image", urls: ["https://x/a.png"] } }))
    const shapes: ReadonlyArray<Task.Task> = [
      base,
      // A result or an adjustment read back from a store with keys in another order, or more of them.
      { ...base, result: { urls: ["https://x/b.png"], type: "image", extra: 1 } as unknown as Task.TaskResult },
      {
        ...base,
        adjustments: [
          { reason: "r", applied: null, requested: { nested: [1, "two", { three: true }] }, field: "ratio", more: "x" } as unknown as Task.Adjustment,
          { field: "n", requested: undefined, applied: 2, reason: "capped" }
        ]
      },
      // The top level in another order, with a key the Schema does not have.
      Object.fromEntries(Object.entries({ ...base, extra: "dropped" }).reverse()) as unknown as Task.Task,
      {
        ...base,
        status: "FAILURE",
        result: null,
        failure_reason: "INVALID_PARAMETERS",
        error: "no \"quotes\" \u2028 or \u0000 control",
        attempts: [{
          outcome: "failed",
          attempt: 1,
          model: "m",
          provider: null,
          upstream_id: "u",
          started_at: "2024-01-01T00:00:00.000Z",
          ended_at: null,
          error: "e",
          extra: true
        } as unknown as Task.Task["attempts"][number]],
        progress: { updated_at: "2024-01-01T00:00:00.000Z", stage: "running", queue_position: null, percent: 12.5, logs_tail: ["a", "b"], x: 1 } as unknown as Task.WireProgress
      },
      // An input with keys JSON orders before the others (integer-like), unicode and nesting.
      { ...base, input: { b: 1, "2": "two", a: { z: [null, false] }, "1": "one", "é": "\ud83d\ude00" } }
    ]
    for (const task of shapes) expect(Api.WireJson.taskResponse(task)).toBe(bySchema(task))
  })

  it("submit's answer is the SubmitResponse Schema's, byte for byte", () => {
    const bySubmitSchema = (taskId: string) => JSON.stringify(Schema.encodeSync(Api.SubmitResponse)(Api.ok({ taskId })))
    FastCheck.assert(
      FastCheck.property(FastCheck.string({ unit: "binary" }), (taskId) => {
        expect(Api.WireJson.submitResponse(taskId)).toBe(bySubmitSchema(taskId))
      }),
      { numRuns: 2_000 }
    )
    expect(Api.WireJson.submitResponse("0190c8a4-0000-7000-8000-000000000001")).toBe(bySubmitSchema("0190c8a4-0000-7000-8000-000000000001"))
  })
})
