/**
 * `TaskStore.claimDue` on SQL: work in flight first, then waiting (PENDING) work within the
 * limits, the owners' lines served a place at a time. A task is running from its claim out of
 * PENDING until it ends. Work in flight and waiting work have partial indexes of their own
 * (migration 0007), so a claim reads only the rows it may take, however long the line of
 * waiting tasks.
 */
import type { SqlError } from "@effect/sql"
import type { Task, TaskStore } from "@mediagate/core"
import { Effect } from "effect"
import type { Prepared } from "../Database.js"
import * as ClaimInWorker from "./ClaimInWorker.js"
import * as Plan from "./ClaimPlan.js"
import type * as Executor from "./Executor.js"
import { records } from "./Rows.js"

/** The claim of due work, its statements compiled once, for the store's `claimDue`. */
export const make = (
  executor: Executor.Executor,
  { compile, isPg, tables }: Pick<Prepared, "compile" | "isPg" | "tables">
): (options: TaskStore.ClaimOptions) => Effect.Effect<ReadonlyArray<Task.TaskRecord>, SqlError.SqlError> => {
  const tasks = `"${tables.tasks}"`
  const free = (alias = "") => `(${alias}lease_until IS NULL OR ${alias}lease_until <= ?)`
  const claimInFlight = compile(
    `UPDATE ${tasks} SET lease_owner = ?, lease_until = ?, version = version + 1
       WHERE id IN (
         SELECT id FROM ${tasks} WHERE due_at IS NOT NULL AND status <> 'PENDING' AND due_at <= ? AND ${free()}
         ORDER BY due_at, id LIMIT ?${isPg ? " FOR UPDATE SKIP LOCKED" : ""}
       )
       RETURNING *`
  )
  // On SQLite an UPDATE that finds nothing still costs about 100 µs against 7 µs for the
  // SELECT (bench:e2e's statement trace), and most wake-ups find nothing to claim: look
  // first. On PostgreSQL each statement is a round trip: the UPDATE alone is cheaper.
  const anyDue = compile(`SELECT 1 AS found FROM ${tasks} WHERE due_at IS NOT NULL AND due_at <= ? AND ${free()} LIMIT 1`)
  const anyInFlight = compile(
    `SELECT 1 AS found FROM ${tasks} WHERE due_at IS NOT NULL AND status <> 'PENDING' AND due_at <= ? AND ${free()} LIMIT 1`
  )
  const waitingOwners = compile(
    `SELECT DISTINCT owner_id FROM ${tasks} WHERE status = 'PENDING' AND due_at <= ? AND ${free()}`
  )
  // Running: in flight, or PENDING under a live lease (claimed, not yet submitted); two
  // SELECTs, so each reads its own index, in one statement, so both read one snapshot. As
  // two statements, a task another node's step moved from claimed to PROCESSING between them
  // was counted by neither (PostgreSQL's READ COMMITTED takes a snapshot per statement, and
  // a step's write does not wait for the claims' lock), and two nodes ran past the limits.
  const runningByOwner = compile(
    `SELECT owner_id, provider, count(*) AS n FROM ${tasks} WHERE due_at IS NOT NULL AND status <> 'PENDING' GROUP BY owner_id, provider
     UNION ALL
     SELECT owner_id, provider, count(*) AS n FROM ${tasks} WHERE status = 'PENDING' AND lease_until > ? GROUP BY owner_id, provider`
  )
  /** An owner's line, leaving out the tasks of providers that are full (`full` placeholders). */
  const ownersLine = (full: number) =>
    compile(
      `SELECT id, owner_id, due_at, provider FROM ${tasks} WHERE status = 'PENDING' AND owner_id = ? AND due_at <= ? AND ${free()}${
        full === 0 ? "" : ` AND (provider IS NULL OR provider NOT IN (${Array.from({ length: full }, () => "?").join(", ")}))`
      }
       ORDER BY due_at, id LIMIT ?`
    )
  const lineStatements = new Map<number, string>()
  /** Leases the chosen waiting tasks (by id; `count` placeholders), if still free. */
  const leaseChosen = (count: number) =>
    compile(
      `UPDATE ${tasks} SET lease_owner = ?, lease_until = ?, version = version + 1
         WHERE status = 'PENDING' AND ${free()} AND id IN (${Array.from({ length: count }, () => "?").join(", ")})
         RETURNING *`
    )
  const leaseStatements = new Map<number, string>()
  // On PostgreSQL claims of new work take turns, so two nodes never both see the same free room.
  const claimLock = `SELECT pg_advisory_xact_lock(hashtext('${tables.tasks}_claims'))`

  const lineOf = (full: number) => {
    let line = lineStatements.get(full)
    if (line === undefined) lineStatements.set(full, line = ownersLine(full))
    return line
  }
  const leaseOf = (count: number) => {
    let statement = leaseStatements.get(count)
    if (statement === undefined) leaseStatements.set(count, statement = leaseChosen(count))
    return statement
  }
  const byDue = (a: Task.TaskRecord, b: Task.TaskRecord) => a.dueAt! - b.dueAt!

  /**
   * One statement at a time: PostgreSQL (each a round trip, and the claims' lock taken only
   * when there is waiting work), and a SQLite client other than the worker's.
   */
  const stepByStep = (run: Executor.Run, { leaseUntil, limit, limits, now, worker }: TaskStore.ClaimOptions) =>
    Effect.gen(function*() {
      const inFlight = !isPg && (yield* run(anyInFlight, [now, now])).length === 0
        ? []
        : (yield* records(yield* run(claimInFlight, [worker, leaseUntil, now, now, limit]))).sort(byDue)
      if (limit - inFlight.length <= 0) return inFlight
      const owners = (yield* run(waitingOwners, [now, now])).map((row) => String(row["owner_id"]))
      if (owners.length === 0) return inFlight
      if (isPg) yield* run(claimLock, [])
      const plan = Plan.make(yield* run(runningByOwner, [now]), limits, limit - inFlight.length)
      const line = lineOf(plan.full.length)
      const places: Array<Plan.Place> = []
      for (const owner of owners) {
        const take = plan.take(owner)
        if (take > 0) places.push(...plan.places(owner, yield* run(line, [owner, now, now, ...plan.full, take])))
      }
      const chosen = plan.choose(places)
      if (chosen.length === 0) return inFlight
      const waiting = yield* records(yield* run(leaseOf(chosen.length), [worker, leaseUntil, now, ...chosen]))
      return [...inFlight, ...waiting.sort(byDue)]
    })

  // The SQLite worker: the whole claim in one call where the connection is (ClaimInWorker).
  const procedure = executor.procedure
  if (procedure !== undefined) {
    const statements: ClaimInWorker.Statements = {
      anyDue,
      anyInFlight,
      waitingOwners,
      runningByOwner,
      claimInFlight,
      line: compile(
        `SELECT id, owner_id, due_at, provider FROM ${tasks} WHERE status = 'PENDING' AND owner_id = ? AND due_at <= ? AND ${free()}
           AND (provider IS NULL OR provider NOT IN (SELECT value FROM json_each(?)))
         ORDER BY due_at, id LIMIT ?`
      ),
      lease: compile(
        `UPDATE ${tasks} SET lease_owner = ?, lease_until = ?, version = version + 1
           WHERE status = 'PENDING' AND ${free()} AND id IN (SELECT value FROM json_each(?))
           RETURNING *`
      )
    }
    return (options) =>
      Effect.gen(function*() {
        const { inFlight, leased } = (yield* procedure("claim", { ...options, statements } satisfies ClaimInWorker.Input)) as ClaimInWorker.Output
        return [...(yield* records(inFlight)).sort(byDue), ...(yield* records(leased)).sort(byDue)]
      })
  }

  return (options) =>
    // On SQLite, look first (see `anyDue`).
    Effect.flatMap(isPg ? Effect.succeed([{}]) : executor.run(anyDue, [options.now, options.now]), (due) =>
      due.length === 0 ? Effect.succeed([]) : executor.transaction((run) => stepByStep(run, options)))
}
