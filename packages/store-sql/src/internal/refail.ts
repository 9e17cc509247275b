/**
 * The SQL backends' edge while serving: a driver failure becomes the backend's typed
 * StoreError (`StoreError.refail`), logged here with the backend's name (`store`, `ledger`,
 * ...). Callers handle it by name: the HTTP layer answers 503 with Retry-After when the
 * database could not be reached (`StoreFailures` in @mediagate/http) and 500 otherwise, the
 * engine and the deliverer try again later. Every other failure (a lost optimistic check, too few credits) passes
 * unchanged.
 *
 * A statement the database refuses for breaking a constraint is the exception: the stores
 * never break one on their own (duplicates are looked for first, or skipped with ON
 * CONFLICT), so it is the caller's bug, such as a task id used twice, and stays a defect.
 */
import { SqlError } from "@effect/sql"
import { StoreError } from "@mediagate/core"
import { Effect, Option, Predicate } from "effect"

const isSqlError = (error: unknown): error is SqlError.SqlError => Predicate.hasProperty(error, SqlError.SqlErrorTypeId)

/** SQLite's SQLITE_CONSTRAINT_* codes, PostgreSQL's class 23 (integrity constraint violation). */
const brokeConstraint = (error: SqlError.SqlError): boolean => {
  const code = Predicate.hasProperty(error.cause, "code") ? String(error.cause.code) : ""
  return code.startsWith("SQLITE_CONSTRAINT") || /^23[0-9A-Z]{3}$/.test(code)
}

/** `component`'s `operation` failed in the driver: logged, then a StoreError (a defect for a broken constraint). */
const failed = (component: string, operation: string, error: SqlError.SqlError) =>
  Effect.logError(`${component}: ${operation} failed`, error).pipe(
    Effect.zipRight(
      brokeConstraint(error)
        ? Effect.die(new StoreError({ message: `${operation} failed: ${error.message}`, cause: error }))
        : StoreError.refail(operation)(Effect.fail(error))
    )
  )

/**
 * Pipeable: `component`'s `operation` fails with StoreError where the driver failed, after
 * logging it. @effect/sql's `withTransaction` dies (rather than fails) when its COMMIT or
 * ROLLBACK fails, as it does when the database drops the connection at that moment: that is
 * the driver failing, not a bug of ours, so a SqlError defect is a StoreError too.
 */
export const refail = (component: string, operation: string) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, Exclude<E, SqlError.SqlError> | StoreError, R> =>
  effect.pipe(
    Effect.catchIf(isSqlError as Predicate.Refinement<E, E & SqlError.SqlError>, (error) => failed(component, operation, error)),
    Effect.catchSomeDefect((defect) => (isSqlError(defect) ? Option.some(failed(component, operation, defect)) : Option.none()))
  ) as Effect.Effect<A, Exclude<E, SqlError.SqlError> | StoreError, R>
