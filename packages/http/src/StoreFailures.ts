/**
 * Which store failures are the database being out of reach for a while, answered 503 with
 * Retry-After (a client or a load balancer tries again), rather than 500 (a failure of ours
 * the client can do nothing about). The stores wrap the driver's error as a StoreError's
 * cause (`StoreError.refail`): this reads that chain of causes, whatever the backend.
 */

/** Node's socket errors of a connection refused, cut, timed out or with no route. */
const socketCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
  // SQLite's file is locked by another writer past its busy timeout: the same statement succeeds later.
  "SQLITE_BUSY"
])

/**
 * PostgreSQL's SQLSTATEs of a connection lost or refused: class 08 (connection exception),
 * 57P01-57P03 (the server shut down, crashed, or does not take connections yet, as
 * `pg_terminate_backend` and a restart give), 53300 (too many connections).
 */
const sqlStates = /^(?:08[0-9A-Z]{3}|57P0[123]|53300)$/

/**
 * The messages of the same failures where there is no code: node-postgres's lost or closed
 * client and its pool's connection timeout, and @effect/sql's failure to get a connection.
 */
const messages =
  /Connection terminated|timeout exceeded when trying to connect|encountered a connection error|is not queryable|Failed to acquire connection|^Connection error$|Connection timed out/

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null

const unreachableHere = (value: Record<string, unknown>): boolean => {
  const code = typeof value["code"] === "string" ? value["code"] : ""
  const message = typeof value["message"] === "string" ? value["message"] : ""
  return socketCodes.has(code) || sqlStates.test(code) || messages.test(message)
}

/**
 * Whether `error` (a StoreError, a driver's error) or one of its causes says the database
 * could not be reached: refused, cut or timed-out connections, a server shutting down.
 * A statement the database refused (a syntax error, a broken constraint) is not.
 */
export const unreachable = (error: unknown): boolean => {
  const seen = new Set<unknown>()
  const visit = (value: unknown, depth: number): boolean => {
    if (!isObject(value) || seen.has(value) || depth > 10) return false
    seen.add(value)
    if (unreachableHere(value)) return true
    // An AggregateError (a host name with several addresses, each refused) keeps each in `errors`.
    const errors = Array.isArray(value["errors"]) ? value["errors"] as ReadonlyArray<unknown> : []
    return visit(value["cause"], depth + 1) || errors.some((each) => visit(each, depth + 1))
  }
  return visit(error, 0)
}
