/**
 * Where tasks live. Backends: @mediagate/store-memory, @mediagate/store-sql.
 */
import type { Effect, Option } from "effect"
import { Context } from "effect"
import type { StoreError, TaskConflict } from "./Errors.js"
import type { TaskRecord } from "./Task.js"

/** Options of a claim for due work. */
export interface ClaimOptions {
  readonly now: number
  readonly limit: number
  readonly worker: string
  /** The lease holds until this time; nobody else claims the task before then. */
  readonly leaseUntil: number
}

/** The task store. */
export class TaskStore extends Context.Tag("@mediagate/core/TaskStore")<TaskStore, {
  /** Stores a new task. */
  readonly create: (task: TaskRecord) => Effect.Effect<void, StoreError>
  /** The task with this id if `ownerId` owns it (or any owner when `ownerId` is omitted). */
  readonly get: (id: string, ownerId?: string) => Effect.Effect<Option.Option<TaskRecord>, StoreError>
  /**
   * Replaces a task with `next` if its stored version is still `expectedVersion`;
   * otherwise fails with TaskConflict and changes nothing.
   */
  readonly update: (next: TaskRecord, expectedVersion: number) => Effect.Effect<void, StoreError | TaskConflict>
  /** Leases up to `limit` non-terminal tasks that are due and not leased by someone else. */
  readonly claimDue: (options: ClaimOptions) => Effect.Effect<ReadonlyArray<TaskRecord>, StoreError>
}>() {}
