/**
 * The settlement sweep: the safety net of credits, as the engine's periodic scan is of
 * tasks. A task's price is held with the task (one transaction when the ledger and the task
 * store share a database; otherwise first, given back at once if the task's write fails) and
 * settled after the write that ends it (`Credits`; a failed settlement is tried again at once
 * in the background); a process that dies between two of those writes, or a database away
 * for longer than those tries, leaves a reservation open. The sweep looks at every open
 * reservation: one whose task has ended is settled as its status says, whatever its age;
 * one whose task was never stored is released once it is older than `grace` (its submit may
 * still be running); one whose task still runs is left alone. Every movement is written once
 * whoever asks, so the sweep and a live write racing for the same task do no harm.
 */
import type { StoreError } from "@mediagate/core"
import { Credits, Ids, Ledger, spanned, Task, TaskStore } from "@mediagate/core"
import { Duration, Effect, Layer, Option } from "effect"
import * as Loops from "./Loops.js"

/** Sweep settings. */
export interface Options {
  /** How often the sweep runs (also once at start). Default 5 minutes. */
  readonly interval?: Duration.DurationInput
  /**
   * How old a reservation whose task is not stored must be before the sweep releases it:
   * longer than any submit takes between holding the price and storing the task. A
   * reservation whose task has ended is settled at any age. Default 10 minutes.
   */
  readonly grace?: Duration.DurationInput
}

/** Reservations read at once. */
const pageSize = 200

/** What one sweep did. */
export interface Swept {
  /** Reservations of ended tasks, charged or released. */
  readonly settled: number
  /** Reservations whose task was never stored, released. */
  readonly orphans: number
}

/**
 * One sweep over every open reservation; never-stored ones are released once older than
 * `grace`. Fails with StoreError when the ledger or the task store does: what it settled
 * stays settled, and the next sweep goes on from there.
 */
export const sweep = (grace: Duration.DurationInput = "10 minutes"): Effect.Effect<Swept, StoreError, Ledger.Ledger | TaskStore.TaskStore | Ids.Ids> =>
  Effect.gen(function*() {
    const ledger = yield* Ledger.Ledger
    const store = yield* TaskStore.TaskStore
    const ids = yield* Ids.Ids
    const now = yield* Loops.currentMillis
    const orphanedBefore = now - Duration.toMillis(grace)
    let settled = 0
    let orphans = 0
    let after: { readonly at: number; readonly taskId: string } | undefined
    for (;;) {
      const page = yield* ledger.open({ before: now + 1, limit: pageSize, after })
      for (const reservation of page) {
        const taskId = Ids.TaskId.make(reservation.taskId!)
        const task = yield* store.get(taskId)
        if (Option.isNone(task)) {
          if (reservation.at >= orphanedBefore) continue
          yield* Effect.flatMap(Credits.entryId(ids), (id) => ledger.release({ id, taskId, at: now }))
          yield* Effect.logWarning(`credits: released the reservation of task ${taskId}, which was never stored (a submit that did not finish)`)
          orphans++
        } else if (Task.isTerminal(task.value.status)) {
          yield* Credits.settle(ledger, ids, task.value, now)
          yield* Effect.logWarning(`credits: settled task ${taskId} (${task.value.status}), which its ending write had left open`)
          settled++
        }
      }
      if (page.length < pageSize) break
      const last = page[page.length - 1]!
      after = { at: last.at, taskId: last.taskId! }
    }
    return { settled, orphans }
  }).pipe(
    // A movement for a reservation the sweep just read always finds it.
    Effect.catchTag("NoReservation", (error) => Effect.die(error)),
    spanned("Settlements.sweep")
  )

/**
 * Runs the sweep at start and every `interval` while the layer's scope is open; a failed sweep
 * is logged and tried again next time, and one that died (a bug) is logged and the sweeps start
 * again after a pause (`Loops.supervised`).
 */
export const layer = (options: Options = {}): Layer.Layer<never, never, Ledger.Ledger | TaskStore.TaskStore | Ids.Ids> =>
  Layer.scopedDiscard(
    sweep(options.grace).pipe(
      Effect.catchTag("StoreError", (error) => Effect.logWarning("credits: the settlement sweep failed; it runs again at its next interval", error)),
      Effect.zipRight(Effect.sleep(options.interval ?? "5 minutes")),
      Effect.forever,
      (sweeps) => Loops.supervised("credits: settlement sweep", sweeps),
      Effect.forkScoped
    )
  )
