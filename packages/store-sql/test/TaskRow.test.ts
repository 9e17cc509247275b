import { SqlClient } from "@effect/sql"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Ids, Task, TaskStore } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { Arbitrary, Cause, Effect, Either, Exit, FastCheck, Layer, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Database, SqlTaskStore, TaskRow } from "../src/index.js"

const dir = mkdtempSync(join(tmpdir(), "mediagate-taskrow-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let counter = 0
const freshFile = () => join(dir, `db${++counter}.sqlite`)

const task = Testing.record({
  id: "0190c8a4-0000-7000-8000-000000000001",
  status: "SUCCESS",
  result: { type: "image", urls: ["https://cdn.example.com/a.png"] },
  dueAt: null,
  upstreamId: "up-1",
  leaseOwner: "w1",
  leaseUntil: 1_700_000_000_123,
  createdAt: 1_700_000_000_000
})

describe("TaskRow", () => {
  it.effect("its columns are exactly the tasks table's columns, as the migrations create them", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const table = yield* Effect.scoped(Effect.as(SqlTaskStore.make({ tablePrefix: "cols_" }), "cols_tasks"))
      const info = yield* sql<{ name: string }>`SELECT name FROM pragma_table_info(${table})`
      expect(info.map((column) => column.name).sort()).toEqual([...TaskRow.columns].sort())
    }).pipe(Effect.provide(Database.layerSqlite(":memory:"))))

  it("a record goes to a row and back unchanged, JSON columns as text", () => {
    const row = TaskRow.toRow(task)
    expect(typeof row.job).toBe("string")
    expect(JSON.parse(row.input)).toEqual(task.input)
    expect(TaskRow.values(row)).toHaveLength(TaskRow.columns.length)
    expect(TaskRow.fromRow(row)).toEqual(task)
  })

  it("decodes PostgreSQL's BIGINT strings and a safe-integer driver's bigints as numbers", () => {
    const row = TaskRow.toRow(task)
    const fromPg = { ...row, created_at: "1700000000000", lease_until: "1700000000123", version: 1 }
    expect(TaskRow.fromRow(fromPg)).toEqual(task)
    const fromBigints = { ...row, created_at: 1_700_000_000_000n, updated_at: 1_700_000_000_000n, deadline_at: 1_700_000_600_000n, version: 1n }
    expect(TaskRow.fromRow(fromBigints)).toEqual(task)
  })

  it("the written-out codec agrees with the TaskRow schema on any record, and on rows as SQLite and PostgreSQL hand them back", () => {
    // JSON columns hold what JSON can: each generated record's are taken through JSON once, so
    // an Infinity inside one becomes null, as it would in the table (and the row is malformed).
    const throughJson = (value: unknown) => JSON.parse(JSON.stringify(value))
    const records = Arbitrary.make(Task.TaskRecord).map((record) =>
      new Task.TaskRecord({
        ...record,
        input: throughJson(record.input),
        job: throughJson(record.job),
        result: throughJson(record.result),
        attempts: throughJson(record.attempts)
      }, true)
    )
    const isValid = Schema.is(Schema.Struct(Task.TaskRecord.fields))
    const encodeWithSchema = Schema.encodeSync(TaskRow.TaskRow)
    const decodeWithSchema = Schema.decodeUnknownEither(TaskRow.TaskRow)
    const jsonColumns = ["input", "job", "result", "attempts"] as const
    const parsed = (row: TaskRow.Row) => ({ ...row, ...Object.fromEntries(jsonColumns.map((c) => [c, row[c] === null ? null : JSON.parse(row[c] as string)])) })
    /** The same record from both, or both refuse the row. */
    const sameAsSchema = (row: unknown) => {
      const expected = decodeWithSchema(row)
      if (Either.isRight(expected)) expect(TaskRow.fromRow(row)).toEqual(expected.right)
      else expect(() => TaskRow.fromRow(row)).toThrow(/malformed row/)
    }
    let valid = 0
    FastCheck.assert(
      FastCheck.property(records, (record) => {
        const row = TaskRow.toRow(record)
        if (isValid(record)) {
          valid++
          expect(parsed(row)).toEqual(parsed(encodeWithSchema(record)))
        }
        sameAsSchema(row)
        // PostgreSQL's BIGINT columns arrive as text, a safe-integer driver's as bigints.
        sameAsSchema({ ...row, created_at: String(row.created_at), version: String(row.version), due_at: row.due_at === null ? null : String(row.due_at) })
        if (Number.isInteger(row.updated_at)) sameAsSchema({ ...row, updated_at: BigInt(row.updated_at as number) })
      }),
      { numRuns: 500 }
    )
    expect(valid).toBeGreaterThan(100)
    // The rows the store writes take the written-out path, not the decoder.
    expect(TaskRow.fastFromRow(TaskRow.toRow(task))).toEqual(task)
    expect(TaskRow.fastFromRow({ ...TaskRow.toRow(task), created_at: "1700000000000" })).toEqual(task)
  })

  it("a malformed row is refused with its id and what is wrong, never turned into a task", () => {
    const row = TaskRow.toRow(task)
    expect(() => TaskRow.fromRow({ ...row, status: "DONE" })).toThrow(/malformed row 0190c8a4-0000-7000-8000-000000000001 in the tasks table[\s\S]*status/)
    expect(() => TaskRow.fromRow({ ...row, job: "{not json" })).toThrow(/malformed row .* in the tasks table[\s\S]*job/)
    expect(() => TaskRow.fromRow({ ...row, version: "one" })).toThrow(/version/)
    const { owner_id: _, ...withoutOwner } = row
    expect(() => TaskRow.fromRow(withoutOwner)).toThrow(/owner_id/)
  })

  it.effect("the store answers a row it cannot decode with a defect naming the row, not a task", () =>
    Effect.gen(function*() {
      const file = freshFile()
      const exit = yield* Effect.gen(function*() {
        const store = yield* TaskStore.TaskStore
        yield* store.create(task)
        // Another client edits the row behind the store's back.
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE rows_tasks SET status = 'DONE' WHERE id = ${task.id}`
        }).pipe(Effect.provide(Database.layerSqlite(file)))
        return yield* Effect.exit(store.get(Ids.TaskId.make(task.id)))
      }).pipe(Effect.provide(SqlTaskStore.layerWith({ tablePrefix: "rows_" }).pipe(Layer.provide(Database.layerSqlite(file)))))
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      expect(Exit.isFailure(exit) && String(Cause.squash(exit.cause))).toMatch(/malformed row 0190c8a4-.* in the tasks table[\s\S]*status/)
    }))
})
