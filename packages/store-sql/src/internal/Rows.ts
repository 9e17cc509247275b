/**
 * Reading the columns of raw rows (`Executor.Run` answers them untyped): numbers arrive as
 * strings from PostgreSQL's BIGINT, and a task row decodes through its one Schema.
 */
import type { Task } from "@mediagate/core"
import { Effect } from "effect"
import * as TaskRow from "../TaskRow.js"

/** A row as the driver answers it. */
export type Row = Record<string, unknown>

export const num = (value: unknown): number => Number(value)
export const numOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : Number(value))
export const strOrNull = (value: unknown): string | null => (value === null || value === undefined ? null : String(value))

/** Rows of the tasks table as records; a row that does not decode is a defect (see `TaskRow.fromRow`). */
export const records = (rows: ReadonlyArray<Row>): Effect.Effect<Array<Task.TaskRecord>> => Effect.sync(() => rows.map(TaskRow.fromRow))
