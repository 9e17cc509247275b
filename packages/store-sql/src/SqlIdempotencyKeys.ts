/**
 * Submit's Idempotency-Keys on @effect/sql (SQLite and PostgreSQL), in the task store's
 * database (migration 0014). Each method is one or two single statements, each atomic on its
 * own: a key is reserved by an INSERT that does nothing when the key exists, and moved
 * (expired, taken over, completed, released) by UPDATEs and DELETEs that check the task id it
 * is held for, so two requests never both think they hold it. On SQLite give it a client
 * other than the task store's (which keeps its connection to itself).
 */
import type { SqlClient, SqlError } from "@effect/sql"
import { IdempotencyKeys, Ids } from "@mediagate/core"
import type { StoreError } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer } from "effect"
import * as Database from "./Database.js"
import { refail as refailAs } from "./internal/refail.js"
import type { Row } from "./internal/Rows.js"

/** Settings of the SQL keys: the task store's table prefix. */
export type Options = Database.Options

/** Driver failures while serving: StoreError, logged as the keys'. */
const refail = (operation: string) => refailAs("idempotency keys", operation)

/** The SQL keys. Runs the migrations first. */
export const make = (options: Options = {}): Effect.Effect<
  Context.Tag.Service<IdempotencyKeys.IdempotencyKeys>,
  StoreError,
  SqlClient.SqlClient
> =>
  Effect.gen(function*() {
    const { compile, sql, tables } = yield* Database.prepare("the idempotency keys", options)
    const run = (text: string, params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<Row>, SqlError.SqlError> =>
      sql.unsafe<Row>(text, params)
    const table = `"${tables.idempotencyKeys}"`
    const insert = compile(
      `INSERT INTO ${table} (owner_id, idempotency_key, fingerprint, task_id, completed, created_at, lease_until)
       VALUES (?, ?, ?, ?, 0, ?, ?) ON CONFLICT (owner_id, idempotency_key) DO NOTHING RETURNING task_id`
    )
    const select = compile(`SELECT * FROM ${table} WHERE owner_id = ? AND idempotency_key = ?`)
    /** Reserves the key for a new task if it still holds `previous` as read (expired or stale). */
    const replace = (condition: string) =>
      compile(
        `UPDATE ${table} SET fingerprint = ?, task_id = ?, completed = 0, created_at = ?, lease_until = ?
         WHERE owner_id = ? AND idempotency_key = ? AND task_id = ? AND ${condition} RETURNING task_id`
      )
    const replaceExpired = replace("created_at < ?")
    const replaceStale = replace("completed = 0")
    const complete = compile(`UPDATE ${table} SET completed = 1 WHERE owner_id = ? AND idempotency_key = ? AND task_id = ?`)
    const release = compile(`DELETE FROM ${table} WHERE owner_id = ? AND idempotency_key = ? AND task_id = ? AND completed = 0`)
    const prune = compile(`DELETE FROM ${table} WHERE created_at < ? RETURNING owner_id`)

    const reserveParams = (reservation: IdempotencyKeys.Reservation) =>
      [reservation.fingerprint, reservation.taskId, reservation.now, reservation.leaseUntil, reservation.owner, reservation.key]

    const begin = (reservation: IdempotencyKeys.Reservation): Effect.Effect<IdempotencyKeys.Begin, SqlError.SqlError> =>
      Effect.gen(function*() {
        // A key deleted or replaced between two statements is looked at again; each round
        // means another request moved it, so a few rounds always settle.
        for (let round = 0; ; round++) {
          const inserted = yield* run(insert, [
            reservation.owner,
            reservation.key,
            reservation.fingerprint,
            reservation.taskId,
            reservation.now,
            reservation.leaseUntil
          ])
          if (inserted.length > 0) return { _tag: "Reserved" } as const
          const [found] = yield* run(select, [reservation.owner, reservation.key])
          if (found === undefined) continue
          const taskId = Ids.TaskId.make(String(found["task_id"]))
          if (Number(found["created_at"]) < reservation.expiredBefore) {
            const replaced = yield* run(replaceExpired, [...reserveParams(reservation), taskId, reservation.expiredBefore])
            if (replaced.length > 0) return { _tag: "Reserved" } as const
            if (round < 5) continue
          }
          const sameBody = String(found["fingerprint"]) === reservation.fingerprint
          if (Number(found["completed"]) === 1) return { _tag: "Completed", taskId, sameBody } as const
          return Number(found["lease_until"]) > reservation.now
            ? { _tag: "InProgress", sameBody } as const
            : { _tag: "Stale", taskId, sameBody } as const
        }
      })

    return {
      begin: (reservation) => begin(reservation).pipe(refail("begin")),
      takeOver: (reservation, previous) =>
        run(replaceStale, [...reserveParams(reservation), previous]).pipe(Effect.map((rows) => rows.length > 0), refail("takeOver")),
      complete: (owner, key, taskId) => run(complete, [owner, key, taskId]).pipe(Effect.asVoid, refail("complete")),
      release: (owner, key, taskId) => run(release, [owner, key, taskId]).pipe(Effect.asVoid, refail("release")),
      prune: (before) => run(prune, [before]).pipe(Effect.map((rows) => rows.length), refail("prune"))
    }
  })

/** The SQL keys layer (on the SqlClient in context). */
export const layer: Layer.Layer<IdempotencyKeys.IdempotencyKeys, StoreError, SqlClient.SqlClient> = Layer.effect(
  IdempotencyKeys.IdempotencyKeys,
  make()
)

/** The SQL keys layer with options (table prefix). */
export const layerWith = (options: Options): Layer.Layer<IdempotencyKeys.IdempotencyKeys, StoreError, SqlClient.SqlClient> =>
  Layer.effect(IdempotencyKeys.IdempotencyKeys, make(options))
