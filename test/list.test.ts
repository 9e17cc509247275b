/**
 * GET /api/v1/tasks (additive): the caller's tasks, newest first, with cursor pagination.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { client, otherApiKey, testServer } from "./support.js"

const api = client()
const dream4 = (prompt: string) => ({ model: "dream-4", input: { prompt } })

describe("GET /api/v1/tasks", () => {
  it.layer(testServer())((it) => {
    it.effect("pages the caller's tasks newest first; others see none of them", () =>
      Effect.gen(function*() {
        const ids: Array<string> = []
        for (let i = 0; i < 7; i++) ids.push(yield* api.submitId(dream4(`list ${i}`)))
        const seen: Array<string> = []
        let cursor: string | null = null
        for (let page = 0; page < 5; page++) {
          const url: string = cursor === null ? "/api/v1/tasks?limit=3" : `/api/v1/tasks?limit=3&cursor=${cursor}`
          const answer = yield* api.call("GET", url)
          expect(answer.status).toBe(200)
          expect(answer.body.code).toBe(0)
          expect(answer.body.data.tasks.length).toBeLessThanOrEqual(3)
          seen.push(...answer.body.data.tasks.map((task: { taskId: string }) => task.taskId))
          cursor = answer.body.data.next_cursor
          if (cursor === null) break
        }
        expect(seen).toEqual([...ids].reverse())
        // A cursor is a task id, which compares case-insensitively.
        const upper = yield* api.call("GET", `/api/v1/tasks?limit=3&cursor=${ids[3]!.toUpperCase()}`)
        expect(upper.body.data.tasks.map((task: { taskId: string }) => task.taskId)).toEqual([ids[2], ids[1], ids[0]])
        const theirs = yield* api.call("GET", "/api/v1/tasks", { key: otherApiKey })
        expect(theirs.body).toEqual({ code: 0, msg: "ok", data: { tasks: [], next_cursor: null } })
      }))

    it.effect("bad parameters are 400 in the envelope", () =>
      Effect.gen(function*() {
        for (const [query, msg] of [
          ["limit=0", "limit must be an integer between 1 and 100"],
          ["limit=101", "limit must be an integer between 1 and 100"],
          ["limit=abc", "limit must be an integer between 1 and 100"],
          ["limit=1.5", "limit must be an integer between 1 and 100"],
          ["limit=1&limit=2", "limit may be given once"],
          ["page=2", "page is not a supported parameter"],
          ["cursor=zzz", "cursor must be a next_cursor from a previous page"],
          ["cursor=", "cursor must be a next_cursor from a previous page"],
          ["cursor=0190c8a4-0000-7000-8000-00000000000", "cursor must be a next_cursor from a previous page"]
        ]) {
          const answer = yield* api.call("GET", `/api/v1/tasks?${query}`)
          expect([answer.status, answer.body]).toEqual([400, { code: 400, msg }])
        }
        const noKey = yield* api.call("GET", "/api/v1/tasks", { key: null })
        expect(noKey.status).toBe(401)
      }))

    it.effect("filters by status, model and creation time, with the cursor; bad filters are 400 naming the parameter", () =>
      Effect.gen(function*() {
        const before = yield* api.call("GET", "/api/v1/tasks?limit=100")
        const dream = yield* api.submitId(dream4("filter dream"))
        const alpha = yield* api.submitId({ model: "alpha-image-2/text-to-image", input: { prompt: "filter alpha" } })
        // A job that never ends, so the cancel finds it running (the instant simulator ends the others at once).
        const cancelled = yield* api.submitId(dream4("filter cancelled [sim:timeout]"))
        yield* api.call("POST", `/api/v1/task/${cancelled}/cancel`)
        const ids = (answer: { body: any }) => answer.body.data.tasks.map((task: { taskId: string }) => task.taskId)
        const list = (query: string) => api.call("GET", `/api/v1/tasks?${query}`)

        expect(ids(yield* list("status=CANCELLED"))).toEqual([cancelled])
        expect(ids(yield* list("status=CANCELLED,FAILURE"))).toEqual([cancelled])
        expect(ids(yield* list("model=alpha-image-2/text-to-image"))).toEqual([alpha])
        expect(ids(yield* list("model=alpha-image-2%2Ftext-to-image&status=CANCELLED"))).toEqual([])
        const first = (yield* api.query(dream)).body.data.created_at
        const at = (shift: number) => encodeURIComponent(new Date(Date.parse(first) + shift).toISOString())
        expect(ids(yield* list(`created_after=${at(-1)}&limit=100`))).toEqual(expect.arrayContaining([dream, alpha, cancelled]))
        expect(ids(yield* list(`created_after=${at(0)}&limit=100`))).not.toContain(dream)
        expect(ids(yield* list(`created_before=${at(0)}&limit=100`))).not.toContain(dream)
        expect(ids(yield* list(`created_before=${at(1)}&limit=100`))).toEqual(expect.arrayContaining([dream, ...ids(before)]))
        // Paged with the same filter.
        const page = yield* list("model=dream-4&limit=1")
        expect(page.body.data.tasks).toHaveLength(1)
        expect(ids(yield* list(`model=dream-4&limit=100&cursor=${page.body.data.next_cursor}`))).not.toContain(ids(page)[0])
        expect(ids(yield* list("status=SUCCESS")).length + ids(yield* list("status=PENDING,SUBMITTED,PROCESSING,FAILURE,TIMEOUT,CANCELLED")).length)
          .toBe(ids(yield* list("limit=100")).length)

        for (const [query, msg] of [
          ["status=DONE", "status must be one or more of PENDING, PROCESSING, SUBMITTED, SUCCESS, FAILURE, TIMEOUT, CANCELLED, separated by commas"],
          ["status=", "status must be one or more of PENDING, PROCESSING, SUBMITTED, SUCCESS, FAILURE, TIMEOUT, CANCELLED, separated by commas"],
          ["status=success", "status must be one or more of PENDING, PROCESSING, SUBMITTED, SUCCESS, FAILURE, TIMEOUT, CANCELLED, separated by commas"],
          ["status=SUCCESS&status=FAILURE", "status may be given once"],
          ["model=", "model must be a model id"],
          ["created_after=yesterday", "created_after must be an ISO 8601 timestamp with a time zone, e.g. 2025-01-31T12:00:00Z"],
          ["created_after=2025-02-30T00:00:00Z", "created_after must be an ISO 8601 timestamp with a time zone, e.g. 2025-01-31T12:00:00Z"],
          ["created_before=2025-01-31T12:00:00", "created_before must be an ISO 8601 timestamp with a time zone, e.g. 2025-01-31T12:00:00Z"]
        ] as const) {
          const answer = yield* list(query)
          expect([query, answer.status, answer.body]).toEqual([query, 400, { code: 400, msg }])
        }
        for (const ok of ["created_after=2025-01-31", "created_after=2025-01-31T12:00:00.123%2B02:00", "created_before=2999-12-31T23:59:59Z"]) {
          expect((yield* list(ok)).status).toBe(200)
        }
      }))
  })
})
