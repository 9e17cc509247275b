/**
 * Credits over HTTP, timed by the TestClock: a task's price is held when it is accepted,
 * charged only on SUCCESS and given back on FAILURE, TIMEOUT and CANCELLED; an account that
 * cannot pay gets a task that fails with INSUFFICIENT_POINTS and is charged nothing; the
 * account endpoint shows the sums and the movements, to the calling account only.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { client, otherApiKey, testCredits, testServer } from "./support.js"

const api = client()
const alpha = (input: Record<string, unknown>) => ({ model: "alpha-image-2/text-to-image", input })
const query = (taskId: string) => Effect.map(api.query(taskId), (answer) => answer.body.data)
const account = (key?: string | null) => api.call("GET", "/api/v1/account", { key })
const sums = Effect.map(account(), ({ body }) => ({
  balance: body.data.balance_micro_usd as number,
  reserved: body.data.reserved_micro_usd as number,
  available: body.data.available_micro_usd as number
}))
const entriesOf = (taskId: string) =>
  Effect.map(account(), ({ body }) =>
    (body.data.entries as Array<any>).filter((entry) => entry.task_id === taskId).map((entry) => [entry.kind, entry.amount_micro_usd, entry.held_micro_usd]).reverse())

const terminal = ["SUCCESS", "FAILURE", "TIMEOUT", "CANCELLED"]

/** Advances virtual time a second at a time (a minute at a time after the first two minutes) until every task has ended. */
const untilEnded = (taskIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    for (let step = 0; step < 400; step++) {
      const tasks = yield* Effect.forEach(taskIds, query)
      if (tasks.every((task) => terminal.includes(task.status))) return tasks
      yield* TestClock.adjust(step < 120 ? "1 second" : "1 minute")
    }
    return yield* Effect.dieMessage("the tasks did not end")
  })

describe("credits", () => {
  it.effect("a task's price is held when it is accepted and charged on SUCCESS, once", () =>
    Effect.gen(function*() {
      expect(yield* sums).toEqual({ balance: 1_000_000, reserved: 0, available: 1_000_000 })
      // alpha-image-2 at 2k: $0.04 an image (spec section 8), two images.
      const taskId = yield* api.submitId(alpha({ prompt: "two lighthouses", resolution: "2k", n: 2 }))
      expect((yield* query(taskId)).price_micro_usd).toBe(80_000)
      expect(yield* sums).toEqual({ balance: 1_000_000, reserved: 80_000, available: 920_000 })
      const [task] = yield* untilEnded([taskId])
      expect(task!.status).toBe("SUCCESS")
      expect(yield* sums).toEqual({ balance: 920_000, reserved: 0, available: 920_000 })
      expect(yield* entriesOf(taskId)).toEqual([["reserve", 0, 80_000], ["charge", -80_000, -80_000]])
      // Time passing after the end moves nothing more: two settlement sweeps (every 5 minutes)
      // find nothing open. (Each virtual second wakes the engine's and the deliverer's scans,
      // some milliseconds of real time each: an hour took over 30 s on a loaded machine.)
      yield* TestClock.adjust("11 minutes")
      expect(yield* sums).toEqual({ balance: 920_000, reserved: 0, available: 920_000 })
    }).pipe(Effect.provide(testServer({ profile: "demo", credits: 1_000_000 }))), 60_000)

  it.effect("FAILURE, TIMEOUT and CANCELLED give the hold back: failed tasks are not charged", () =>
    Effect.gen(function*() {
      const failed = yield* api.submitId(alpha({ prompt: "breaks [sim:fail]" }))
      const timedOut = yield* api.submitId(alpha({ prompt: "never ends [sim:timeout]" }))
      const cancelled = yield* api.submitId(alpha({ prompt: "changed my mind" }))
      const video = yield* api.submitId({ model: "beta-imagine/text-to-video", input: { prompt: "a fox, 12 seconds [sim:fail]", duration: 12 } })
      expect((yield* query(video)).price_micro_usd).toBe(84_000)
      expect(yield* sums).toEqual({ balance: 1_000_000, reserved: 3 * 20_000 + 84_000, available: 1_000_000 - 3 * 20_000 - 84_000 })
      expect((yield* api.call("POST", `/api/v1/task/${cancelled}/cancel`)).status).toBe(200)
      const tasks = yield* untilEnded([failed, timedOut, cancelled, video])
      expect(tasks.map((task) => task.status)).toEqual(["FAILURE", "TIMEOUT", "CANCELLED", "FAILURE"])
      expect(yield* sums).toEqual({ balance: 1_000_000, reserved: 0, available: 1_000_000 })
      for (const [taskId, price] of [[failed, 20_000], [timedOut, 20_000], [cancelled, 20_000], [video, 84_000]] as const) {
        expect(yield* entriesOf(taskId)).toEqual([["reserve", 0, price], ["release", 0, -price]])
      }
    }).pipe(Effect.provide(testServer({ profile: "demo", credits: 1_000_000 }))))

  it.effect("an account that cannot pay gets a task that fails with INSUFFICIENT_POINTS, charged nothing", () =>
    Effect.gen(function*() {
      // $0.03: room for one $0.02 image, not for two.
      const first = yield* api.submitId(alpha({ prompt: "the first" }))
      const second = yield* api.submitId(alpha({ prompt: "the second" }))
      const refused = yield* query(second)
      expect(refused).toMatchObject({
        status: "FAILURE",
        failure_reason: "INSUFFICIENT_POINTS",
        result: null,
        price_micro_usd: 20_000,
        error: "insufficient credits: the task costs $0.02 and the account has $0.01 available"
      })
      expect(yield* entriesOf(second)).toEqual([])
      expect(yield* sums).toEqual({ balance: 30_000, reserved: 20_000, available: 10_000 })
      const [done] = yield* untilEnded([first])
      expect(done!.status).toBe("SUCCESS")
      expect(yield* sums).toEqual({ balance: 10_000, reserved: 0, available: 10_000 })
      // Still too little for another; the refused task never runs and nothing moves.
      const third = yield* api.submitId(alpha({ prompt: "the third" }))
      expect((yield* query(third)).failure_reason).toBe("INSUFFICIENT_POINTS")
      yield* TestClock.adjust("1 minute")
      expect((yield* query(third)).attempts).toEqual([])
      expect(yield* sums).toEqual({ balance: 10_000, reserved: 0, available: 10_000 })
      // A task the account can pay for still runs: $0.001, a beta-imagine lite image.
      const cheap = yield* api.submitId({ model: "beta-imagine/text-to-image-lite", input: { prompt: "a small one" } })
      expect((yield* untilEnded([cheap]))[0]!.status).toBe("SUCCESS")
      expect(yield* sums).toEqual({ balance: 9_000, reserved: 0, available: 9_000 })
    }).pipe(Effect.provide(testServer({ profile: "demo", credits: 30_000 }))))

  it.effect("the account endpoint answers the calling account only, and needs a key", () =>
    Effect.gen(function*() {
      const taskId = yield* api.submitId(alpha({ prompt: "mine" }))
      const mine = yield* account()
      expect(mine.status).toBe(200)
      expect(mine.body).toMatchObject({ code: 0, msg: "ok", data: { account_id: "acct_test", name: "test", balance_micro_usd: testCredits } })
      expect(mine.body.data.entries[0]).toMatchObject({ kind: "reserve", task_id: taskId, amount_micro_usd: 0, held_micro_usd: 20_000, note: null })
      expect(mine.body.data.entries[0].created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      expect(mine.body.data.entries[1]).toMatchObject({ kind: "credit", task_id: null, amount_micro_usd: testCredits, note: "starting credits" })
      const theirs = yield* account(otherApiKey)
      expect(theirs.body.data).toMatchObject({ account_id: "acct_other", balance_micro_usd: testCredits, reserved_micro_usd: 0 })
      expect(theirs.body.data.entries.map((entry: any) => entry.kind)).toEqual(["credit"])
      expect(yield* account(null)).toEqual({ status: 401, body: { code: 401, msg: "unauthorized" } })
      expect(yield* account("mg_wrong_key")).toEqual({ status: 401, body: { code: 401, msg: "unauthorized" } })
    }).pipe(Effect.provide(testServer({ profile: "demo" }))))
})
