/**
 * The claim of due work as the SQLite worker runs it (`SqliteWorkerProgram`'s procedures):
 * the whole transaction, from `BEGIN IMMEDIATE` to `COMMIT`, in one synchronous call where
 * the connection is, the plan (`ClaimPlan.make`) made between the statements. One message
 * each way, and no transaction left open across a round trip: the claim took three,
 * holding the connection for all of them, and under load every other write waited for each
 * of those answers to be read by the busy main thread (docs/decisions.md, "Issue 37, part
 * whole transactions").
 *
 * `claim` uses no name from outside itself: the worker runs it from its text.
 */
import type { TaskStore } from "@mediagate/core"
import type * as Plan from "./ClaimPlan.js"
import type { Row } from "./Rows.js"

/** The claim's statements, compiled by `ClaimDue`; a JSON array stands for a list of values. */
export interface Statements {
  /** Any due work (`now`, `now`). */
  readonly anyDue: string
  /** Any due work in flight (`now`, `now`). */
  readonly anyInFlight: string
  /** The owners with due waiting work (`now`, `now`). */
  readonly waitingOwners: string
  /** What runs, by owner and provider (`now`). */
  readonly runningByOwner: string
  /** Leases the due work in flight (`worker`, `leaseUntil`, `now`, `now`, `limit`). */
  readonly claimInFlight: string
  /** An owner's line (`owner`, `now`, `now`, the full providers as a JSON array, how many). */
  readonly line: string
  /** Leases the chosen (`worker`, `leaseUntil`, `now`, their ids as a JSON array). */
  readonly lease: string
}

/** What the claim is given: its statements and `TaskStore.ClaimOptions`. */
export interface Input extends TaskStore.ClaimOptions {
  readonly statements: Statements
}

/** The rows claimed: the work in flight, and the waiting work leased. */
export interface Output {
  readonly inFlight: ReadonlyArray<Row>
  readonly leased: ReadonlyArray<Row>
}

/**
 * Runs the claim on the worker's connection (`execute`, which throws a statement's failure);
 * the worker rolls back a transaction that a failure leaves open.
 */
export const claim = (
  execute: (sql: string, params: ReadonlyArray<unknown>) => ReadonlyArray<Row>,
  { leaseUntil, limit, limits, now, statements, worker }: Input,
  makePlan: typeof Plan.make
): Output => {
  execute("BEGIN IMMEDIATE", [])
  if (execute(statements.anyDue, [now, now]).length === 0) {
    execute("ROLLBACK", [])
    return { inFlight: [], leased: [] }
  }
  const flying = execute(statements.anyInFlight, [now, now]).length > 0
  const owners = execute(statements.waitingOwners, [now, now]).map((row) => String(row["owner_id"]))
  const plan = makePlan(execute(statements.runningByOwner, [now]), limits, limit)
  const full = JSON.stringify(plan.full)
  // The lines are read for the room before the work in flight is counted: what is too much is not chosen.
  const asked = owners.flatMap((owner) => {
    const take = plan.take(owner)
    return take > 0 ? [{ owner, take }] : []
  })
  const inFlight = flying ? execute(statements.claimInFlight, [worker, leaseUntil, now, now, limit]) : []
  const places = asked.flatMap(({ owner, take }) => plan.places(owner, execute(statements.line, [owner, now, now, full, take])))
  const room = asked.length === 0 ? 0 : plan.narrow(limit - inFlight.length)
  const chosen = room <= 0 ? [] : plan.choose(places)
  const leased = chosen.length === 0 ? [] : execute(statements.lease, [worker, leaseUntil, now, JSON.stringify(chosen)])
  execute("COMMIT", [])
  return { inFlight, leased }
}
