/**
 * A driver failure while serving is a defect: nothing a caller can do about it; it is logged
 * here (with `component`, such as `store` or `ledger`) and answered 500 by the HTTP layer
 * (STYLE.md: SqlError never reaches a handler). Other failures pass unchanged.
 */
import type { SqlError } from "@effect/sql"
import { StoreError } from "@mediagate/core"
import { Effect } from "effect"

export const orDie = (component: string, operation: string) => <A, E, R>(effect: Effect.Effect<A, E | SqlError.SqlError, R>) =>
  Effect.catchTag(effect as Effect.Effect<A, SqlError.SqlError, R>, "SqlError", (error) =>
    Effect.logError(`${component}: ${operation} failed`, error).pipe(
      Effect.zipRight(Effect.die(new StoreError({ message: `${operation} failed: ${error.message}`, cause: error.cause })))
    )) as Effect.Effect<A, Exclude<E, SqlError.SqlError>, R>
