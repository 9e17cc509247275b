import { describe, expect, it } from "@effect/vitest"
import { Api, Insights, Usage, UsageRecords } from "@mediagate/core"
import type { Task, UsageStore } from "@mediagate/core"
import { Either } from "effect"

const at = (iso: string) => Date.parse(iso)
const window = (from?: string, to?: string, now = at("2026-11-29T12:00:00Z")) =>
  Usage.window({ from, to }, now, Api.parseTimestamp)

describe("Usage.window", () => {
  it("defaults to the current UTC month; from defaults to the first of to's month, to to the end of the current month", () => {
    expect(window()).toEqual(Either.right({ from: at("2026-11-01T00:00:00Z"), to: at("2026-12-01T00:00:00Z") }))
    expect(window(undefined, undefined, at("2026-12-31T23:59:59.999Z"))).toEqual(Either.right({ from: at("2026-12-01T00:00:00Z"), to: at("2027-01-01T00:00:00Z") }))
    expect(window(undefined, "2026-10-15T06:00:00Z")).toEqual(Either.right({ from: at("2026-10-01T00:00:00Z"), to: at("2026-10-15T06:00:00Z") }))
    // A `to` exactly at a month's start: from the first of the month before.
    expect(window(undefined, "2026-10-01T00:00:00Z")).toEqual(Either.right({ from: at("2026-09-01T00:00:00Z"), to: at("2026-10-01T00:00:00Z") }))
    expect(window("2026-11-20")).toEqual(Either.right({ from: at("2026-11-20T00:00:00Z"), to: at("2026-12-01T00:00:00Z") }))
  })

  it("a date as to includes that day; a time excludes itself; offsets are read", () => {
    expect(window("2026-11-01", "2026-11-01")).toEqual(Either.right({ from: at("2026-11-01T00:00:00Z"), to: at("2026-11-02T00:00:00Z") }))
    expect(window("2026-11-01T10:00:00+02:00", "2026-11-01T12:00:00Z")).toEqual(Either.right({ from: at("2026-11-01T08:00:00Z"), to: at("2026-11-01T12:00:00Z") }))
  })

  it("refuses what is not a date or a time with a zone, an empty or reversed window, and more than 366 days", () => {
    expect(window("2026-11-31")).toEqual(Either.left("from must be an ISO 8601 date (2026-11-01) or time with a time zone (2026-11-01T12:00:00Z)"))
    expect(window(undefined, "soon")).toEqual(Either.left("to must be an ISO 8601 date (2026-11-01) or time with a time zone (2026-11-01T12:00:00Z)"))
    expect(window("2026-11-02T00:00:00Z", "2026-11-02T00:00:00Z")).toEqual(Either.left("from must be before to"))
    expect(window("2026-12-05")).toEqual(Either.left("from must be before to"))
    expect(window("2024-01-01", "2024-12-31")).toEqual(Either.right({ from: at("2024-01-01T00:00:00Z"), to: at("2025-01-01T00:00:00Z") }))
    expect(window("2025-01-01", "2026-01-01")).toEqual(Either.right({ from: at("2025-01-01T00:00:00Z"), to: at("2026-01-02T00:00:00Z") }))
    expect(window("2025-01-01", "2026-01-02")).toEqual(Either.left("from and to must be at most 366 days apart"))
  })
})

const rows: UsageStore.UsageRows = {
  tasks: [
    { group: "20786", status: "SUCCESS", count: 2 },
    { group: "20786", status: "FAILURE", count: 1 },
    { group: "20787", status: "CANCELLED", count: 1 }
  ],
  ledger: [
    { group: "20786", kind: "credit", count: 1, amount: 5_000_000, held: 0 },
    { group: "20786", kind: "reserve", count: 3, amount: 0, held: 150_000 },
    { group: "20786", kind: "charge", count: 2, amount: -100_000, held: -100_000 },
    { group: "20787", kind: "release", count: 2, amount: 0, held: -80_000 }
  ],
  uploads: [{ group: "20787", count: 3, bytes: 4_096 }]
}

describe("Usage.report and csv", () => {
  const report = Usage.report({ from: 0, to: 1, groupBy: "day" }, rows)

  it("spend is what charges took, refunds what releases gave back, credits in the totals only; groups by day in order", () => {
    expect(report.groups.map((group) => [group.group, group.tasks.total, group.spendMicroUsd, group.refundsMicroUsd])).toEqual([
      ["2026-11-29", 3, 100_000, 0],
      ["2026-11-30", 1, 0, 80_000]
    ])
    expect(report.totals).toMatchObject({ spendMicroUsd: 100_000, charges: 2, refundsMicroUsd: 80_000, releases: 2, creditsMicroUsd: 5_000_000 })
    expect(report.totals.tasks).toMatchObject({ total: 4, SUCCESS: 2, FAILURE: 1, CANCELLED: 1, PENDING: 0 })
  })

  it("uploads count in their group and the totals, and a group of uploads alone has no tasks", () => {
    expect(report.groups.map((group) => [group.group, group.uploads, group.uploadBytes])).toEqual([["2026-11-29", 0, 0], ["2026-11-30", 3, 4_096]])
    expect(report.totals).toMatchObject({ uploads: 3, uploadBytes: 4_096 })
    const alone = Usage.report({ from: 0, to: 1, groupBy: "model" }, { tasks: [], ledger: [], uploads: [{ group: null, count: 1, bytes: 10 }] })
    const { creditsMicroUsd: _, ...figures } = alone.totals
    expect(alone.groups).toEqual([{ group: null, ...figures }])
    expect(figures).toMatchObject({ uploads: 1, uploadBytes: 10, charges: 0, tasks: { total: 0 } })
  })

  it("CSV: a header, a row per group, a total row; fields that a spreadsheet would run are neutralised and quoted", () => {
    const lines = Usage.csv(report).split("\r\n")
    expect(lines[0]).toBe(Usage.csvColumns.join(","))
    expect(lines[1]).toBe("2026-11-29,3,0,0,0,2,1,0,0,100000,2,0,0,0,0,")
    expect(lines[2]).toBe("2026-11-30,1,0,0,0,0,0,0,1,0,0,80000,2,3,4096,")
    expect(lines[3]).toBe("total,4,0,0,0,2,1,0,1,100000,2,80000,2,3,4096,5000000")
    expect(lines[4]).toBe("")
    const odd = Usage.report({ from: 0, to: 1, groupBy: "model" }, { tasks: [{ group: "=HYPERLINK(\"x\",1)", status: "SUCCESS", count: 1 }, { group: null, status: "SUCCESS", count: 1 }], ledger: [], uploads: [] })
    const [, first, second] = Usage.csv(odd).split("\r\n")
    expect(first!.split(",")[0]).toBe("\"'=HYPERLINK(\"\"x\"\"")
    expect(second!.startsWith(",1,")).toBe(true)
  })
})

const attempt = (provider: string | undefined, startedAt: number, endedAt: number | null, outcome: Task.UpstreamAttempt["outcome"]): Task.UpstreamAttempt => ({
  number: 1,
  model: "dream-4",
  upstreamId: null,
  startedAt,
  endedAt,
  outcome,
  error: null,
  transientFailures: outcome === "failed" ? 3 : 0,
  ...(provider === undefined ? {} : { provider })
})

describe("Insights.providers", () => {
  const since = 1_000_000
  const targets = [
    { name: "fal:m", provider: "fal", maxRunning: null, circuit: { state: "open" as const, until: 2_000_000 } },
    { name: "simulator", provider: null, maxRunning: null, circuit: { state: "closed" as const, until: null } }
  ]
  const limits = { maxRunning: 50, perProvider: { "*": 100, fal: 7 } }

  it("counts the attempts that ended in the window on their target: error rate, nearest-rank latency; running against its limit", () => {
    const views = Insights.providers(since, targets, {
      attempts: [
        attempt("fal:m", since - 5_000, since - 1, "failed"), // ended before the window
        attempt("fal:m", since, since + 100, "succeeded"),
        attempt("fal:m", since, since + 300, "failed"),
        attempt("fal:m", since, since + 200, "timed_out"),
        attempt("fal:m", since, since + 400, "succeeded"),
        attempt("fal:m", since, null, "running"),
        attempt("other:x", since, since + 1, "failed"), // a target no longer routed
        attempt(undefined, since, since + 1, "failed") // an upstream that names none
      ],
      running: [{ provider: "fal", target: "fal:m", count: 2 }, { provider: null, target: "simulator", count: 1 }]
    }, limits)
    expect(views).toEqual([
      { ...targets[0], attempts: 4, failed: 2, errorRate: 0.5, transientFailures: 3, latencyP50Ms: 200, latencyP95Ms: 400, running: 2, limit: 7 },
      { ...targets[1], attempts: 0, failed: 0, errorRate: null, transientFailures: 0, latencyP50Ms: null, latencyP95Ms: null, running: 1, limit: 50 }
    ])
  })

  it("an upstream without targets is one, taking what names no target", () => {
    const [only, ...rest] = Insights.providers(since, undefined, {
      attempts: [attempt(undefined, since, since + 10, "succeeded")],
      running: [{ provider: null, target: null, count: 3 }]
    }, { maxRunning: null, perProvider: {} })
    expect(rest).toEqual([])
    expect(only).toMatchObject({ name: Insights.unnamedTarget, circuit: { state: "closed" }, attempts: 1, running: 3, limit: null })
  })
})

describe("UsageRecords.nearestRank", () => {
  it("is the value at rank ceil(p n / 100)", () => {
    expect(UsageRecords.nearestRank([1], 50)).toBe(1)
    expect(UsageRecords.nearestRank([1, 2], 50)).toBe(1)
    expect(UsageRecords.nearestRank([1, 2], 95)).toBe(2)
    const hundred = Array.from({ length: 100 }, (_, i) => i + 1)
    expect([UsageRecords.nearestRank(hundred, 50), UsageRecords.nearestRank(hundred, 95)]).toEqual([50, 95])
  })
})
