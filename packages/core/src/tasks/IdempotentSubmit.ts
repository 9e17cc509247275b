/**
 * Submit under an Idempotency-Key. The key is reserved for the task this request will create,
 * then bound to it; a request that created nothing frees it. A reservation whose request died
 * is taken over once its lease ends, unless its task exists: then the key is bound to that
 * task, so a crash between the two writes never yields a second task.
 */
import { Clock, Duration, Effect, Option } from "effect"
import { StoreError } from "../domain/Errors.js"
import type { TaskId } from "../domain/Ids.js"
import { Ids } from "../domain/Ids.js"
import type { Account } from "../services/Accounts.js"
import * as IdempotencyKeys from "../services/IdempotencyKeys.js"
import { TaskStore } from "../services/TaskStore.js"

/** What a submit under a key answers: the task, and whether an earlier request with the key created it. */
export interface Submitted {
  readonly taskId: TaskId
  readonly replayed: boolean
}

/**
 * Submit under a key, over `create` (which stores a new task with the given id, or fails
 * with a rule's or moderation's refusal): the keys come from the composition's
 * IdempotencyKeys (`IdempotencyKeys.layerMemory` keeps them in this process only).
 */
export const make = <R, E>(create: (account: Account, request: R, taskId: TaskId) => Effect.Effect<TaskId, E>) =>
  Effect.gen(function*() {
    const keys = yield* IdempotencyKeys.IdempotencyKeys
    const store = yield* TaskStore
    const ids = yield* Ids
    /** When expired keys were last deleted: at most once an hour, by a submit that carries one. */
    let nextPrune = Number.NEGATIVE_INFINITY

    return (
      account: Account,
      request: R,
      key: string,
      fingerprint: string
    ): Effect.Effect<Submitted, E | StoreError | IdempotencyKeys.IdempotencyKeyMismatch | IdempotencyKeys.IdempotencyKeyInUse> =>
      Effect.gen(function*() {
        const taskId = yield* ids.taskId
        const now = yield* Clock.currentTimeMillis
        if (now >= nextPrune) {
          nextPrune = now + Duration.toMillis("1 hour")
          yield* keys.prune(now - IdempotencyKeys.keyLifetimeMs + 1).pipe(
            Effect.catchTag("StoreError", (error) => Effect.logWarning("idempotency: expired keys were not pruned", error))
          )
        }
        const reservation: IdempotencyKeys.Reservation = {
          owner: account.id,
          key,
          fingerprint,
          taskId,
          now,
          leaseUntil: now + IdempotencyKeys.reservationLeaseMs,
          // A key has expired once 24 hours have passed since its first use.
          expiredBefore: now - IdempotencyKeys.keyLifetimeMs + 1
        }
        const run = create(account, request, taskId).pipe(
          // A rule or moderation refused it: nothing was created, so the key may be sent again.
          // (Interrupted, died, or the store failed and the task may be stored all the same:
          // the reservation runs out and the next request looks for the task.)
          Effect.tapError((error) => (error instanceof StoreError ? Effect.void : keys.release(account.id, key, taskId))),
          Effect.tap(() => keys.complete(account.id, key, taskId)),
          Effect.map((created): Submitted => ({ taskId: created, replayed: false }))
        )
        const mismatch = new IdempotencyKeys.IdempotencyKeyMismatch({ key })
        for (let round = 0; round < 3; round++) {
          const found = yield* keys.begin(reservation)
          switch (found._tag) {
            case "Reserved":
              return yield* run
            case "Completed":
              return found.sameBody ? { taskId: found.taskId, replayed: true } : yield* mismatch
            case "InProgress":
              return yield* (found.sameBody ? new IdempotencyKeys.IdempotencyKeyInUse({ key }) : mismatch)
            case "Stale": {
              if (Option.isSome(yield* store.getOwned(found.taskId, account.id))) {
                yield* keys.complete(account.id, key, found.taskId)
                return found.sameBody ? { taskId: found.taskId, replayed: true } : yield* mismatch
              }
              if (yield* keys.takeOver(reservation, found.taskId)) return yield* run
            }
          }
        }
        // Other requests kept moving the key: one of them is being processed.
        return yield* new IdempotencyKeys.IdempotencyKeyInUse({ key })
      })
  })
