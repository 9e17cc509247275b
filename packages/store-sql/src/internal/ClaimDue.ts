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
import type { Executor } from "./Executor.js"
import { num, records, strOrNull } from "./Rows.js"

/** The claim of due work, its statements compiled once, for the store's `claimDue`. */
export const make = (
  executor: Executor,
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

  return ({ leaseUntil, limit, limits, now, worker }) =>
    Effect.flatMap(isPg ? Effect.succeed([{}]) : executor.run(anyDue, [now, now]), (due) =>
      due.length === 0 ? Effect.succeed([]) : executor.transaction((run) =>
        Effect.gen(function*() {
          const byDue = (a: Task.TaskRecord, b: Task.TaskRecord) => a.dueAt! - b.dueAt!
          const inFlight = !isPg && (yield* run(anyInFlight, [now, now])).length === 0
            ? []
            : (yield* records(yield* run(claimInFlight, [worker, leaseUntil, now, now, limit]))).sort(byDue)
          let room = limit - inFlight.length
          if (room <= 0) return inFlight
          const owners = (yield* run(waitingOwners, [now, now])).map((row) => String(row["owner_id"]))
          if (owners.length === 0) return inFlight
          if (isPg) yield* run(claimLock, [])
          const busy = new Map<string, number>()
          const onProvider = new Map<string, number>()
          for (const row of yield* run(runningByOwner, [now])) {
            busy.set(String(row["owner_id"]), (busy.get(String(row["owner_id"])) ?? 0) + num(row["n"]))
            const provider = strOrNull(row["provider"])
            if (provider !== null) onProvider.set(provider, (onProvider.get(provider) ?? 0) + num(row["n"]))
          }
          if (limits !== undefined) {
            room = Math.min(room, limits.running - [...busy.values()].reduce((a, b) => a + b, 0))
          }
          const cap = limits?.perAccount ?? Number.POSITIVE_INFINITY
          const perProvider = limits?.perProvider
          const within = limits?.within ?? {}
          // A target with a limit of its own counts against its provider's too.
          for (const [target, provider] of Object.entries(within)) {
            const n = onProvider.get(target) ?? 0
            if (n > 0) onProvider.set(provider, (onProvider.get(provider) ?? 0) + n)
          }
          const hasRoom = (provider: string, limit: (provider: string) => number) => (onProvider.get(provider) ?? 0) < limit(provider)
          /** Whether a provider (and the provider a target counts against too) has room for one more task. */
          const roomOn = (provider: string | null) =>
            provider === null || perProvider === undefined ||
            (hasRoom(provider, perProvider) && (within[provider] === undefined || hasRoom(within[provider], perProvider)))
          /** Counts a task started in this claim against its provider (and the one a target counts against too). */
          const countOn = (provider: string) => {
            for (const key of within[provider] === undefined ? [provider] : [provider, within[provider]]) {
              onProvider.set(key, (onProvider.get(key) ?? 0) + 1)
            }
          }
          // Lines leave out the tasks of full providers, so they do not hide others' behind them;
          // the targets under a full provider are full too, whether or not any of theirs runs.
          const full = [...new Set([...onProvider.keys(), ...Object.keys(within)])].filter((provider) => !roomOn(provider))
          let line = lineStatements.get(full.length)
          if (line === undefined) lineStatements.set(full.length, line = ownersLine(full.length))
          // Each owner's line: its waiting tasks behind its running ones; places are served in
          // order across the lines, so owners alternate and the least busy goes first.
          const places: Array<{ readonly id: string; readonly place: number; readonly due: number; readonly provider: string | null }> = []
          for (const owner of owners) {
            const running = busy.get(owner) ?? 0
            const take = Math.min(room, cap - running)
            if (take <= 0) continue
            const rows = yield* run(line, [owner, now, now, ...full, take])
            rows.forEach((row, i) =>
              places.push({ id: String(row["id"]), place: running + i + 1, due: num(row["due_at"]), provider: strOrNull(row["provider"]) })
            )
          }
          const chosen: Array<string> = []
          for (const place of places.sort((a, b) => a.place - b.place || a.due - b.due || (a.id < b.id ? -1 : 1))) {
            if (chosen.length >= room) break
            // A provider may fill up during this claim.
            if (!roomOn(place.provider)) continue
            if (place.provider !== null) countOn(place.provider)
            chosen.push(place.id)
          }
          if (chosen.length === 0) return inFlight
          let statement = leaseStatements.get(chosen.length)
          if (statement === undefined) leaseStatements.set(chosen.length, statement = leaseChosen(chosen.length))
          const waiting = yield* records(yield* run(statement, [worker, leaseUntil, now, ...chosen]))
          return [...inFlight, ...waiting.sort(byDue)]
        })
      ))
}
