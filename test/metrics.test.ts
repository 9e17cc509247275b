/**
 * `GET /metrics` on the standalone composition with metrics on (off, it is the envelope's
 * 404: test/health.test.ts): the Prometheus text format, the counters moving between two scrapes as tasks are
 * submitted, end and owe callbacks. The registry is the process's, so the test compares
 * scrapes rather than absolute values.
 */
import { describe, expect, it } from "@effect/vitest"
import { Prometheus } from "@mediagate/http"
import { Effect, TestClock } from "effect"
import { client, testServer } from "./support.js"

const api = client()
const dream = (prompt: string) => ({ model: "dream-4", input: { prompt } })

const settle = Effect.gen(function*() {
  for (let i = 0; i < 30; i++) yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
})

/** Moves virtual time until every task has ended. */
const untilEnded = (ids: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 600; turn++) {
      const statuses = yield* Effect.forEach(ids, (id) =>
        Effect.map(api.query(id), (answer) => answer.body.data.status))
      if (statuses.every((status) => ["SUCCESS", "FAILURE", "CANCELLED", "TIMEOUT"].includes(status))) return statuses
      yield* TestClock.adjust("100 millis")
      yield* settle
    }
    return yield* Effect.dieMessage("tasks did not end")
  })

/** The value of the sample `line` (name and labels exactly) in a scrape; 0 when absent. */
const sample = (text: string, line: string) => {
  const found = text.split("\n").find((candidate) => candidate.startsWith(`${line} `))
  return found === undefined ? 0 : Number(found.slice(line.length + 1))
}

describe("GET /metrics", () => {
  it.layer(testServer({ metrics: true }))((it) => {
    it.effect("serves the Prometheus text format without a key; counters move between two scrapes", () =>
      Effect.gen(function*() {
        const first = yield* api.call("GET", "/metrics", { key: null, text: true })
        expect(first.status).toBe(200)
        expect(first.headers["content-type"]).toBe(Prometheus.contentType)

        const ids = [yield* api.submitId(dream("a lighthouse")), yield* api.submitId(dream("a harbour")), yield* api.submitId(dream("a storm [sim:fail]"))]
        const statuses = yield* untilEnded(ids)
        expect(statuses.filter((status) => status === "SUCCESS")).toHaveLength(2)
        expect(statuses.filter((status) => status === "FAILURE")).toHaveLength(1)

        const second = (yield* api.call("GET", "/metrics", { text: true })).text
        const moved = (line: string) => sample(second, line) - sample(first.text, line)
        expect(moved(`mediagate_tasks_submitted_total{model="dream-4"}`)).toBe(3)
        expect(moved(`mediagate_tasks_ended_total{failure_reason="none",status="SUCCESS"}`)).toBe(2)
        const failures = second.split("\n").filter((line) => line.startsWith("mediagate_tasks_ended_total{") && line.includes(`status="FAILURE"`))
        expect(failures.length).toBeGreaterThanOrEqual(1)
        expect(moved(`mediagate_upstream_call_seconds_count{outcome="ok",provider="simulator"}`)).toBeGreaterThanOrEqual(2)
        expect(second).toContain("# TYPE mediagate_upstream_call_seconds histogram")
        expect(second).toContain(`mediagate_upstream_call_seconds_bucket{outcome="ok",provider="simulator",le="+Inf"}`)
        expect(second).toContain("# TYPE mediagate_tasks_pending gauge")
        expect(sample(second, "mediagate_tasks_pending")).toBe(0)
      }))
  })
})
