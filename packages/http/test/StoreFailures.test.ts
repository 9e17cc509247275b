/**
 * Which store failures are the database out of reach (503) and which are not (500): the
 * StoreError's chain of causes as the SQL stores build it (StoreError, then @effect/sql's
 * SqlError, then the driver's error), with node-postgres's and Node's own errors.
 */
import { StoreError } from "@mediagate/core"
import { describe, expect, it } from "vitest"
import { unreachable } from "../src/StoreFailures.js"

/** A StoreError over a SqlError over `driver`, as `StoreError.refail` makes it. */
const wrapped = (driver: unknown, sqlMessage = "Failed to execute statement") =>
  new StoreError({ message: "get task failed: ...", cause: { _tag: "SqlError", message: sqlMessage, cause: driver } })

const pgError = (message: string, code: string) => Object.assign(new Error(message), { code, severity: "FATAL" })
const socketError = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code })

describe("StoreFailures.unreachable", () => {
  it("a connection refused, cut or timed out, or a server going away, is the database out of reach", () => {
    const cases: ReadonlyArray<readonly [string, unknown]> = [
      ["refused", wrapped(socketError("ECONNREFUSED"), "Failed to acquire connection")],
      ["reset", wrapped(socketError("ECONNRESET"))],
      ["timed out", wrapped(socketError("ETIMEDOUT"))],
      ["no such host", wrapped(socketError("ENOTFOUND"))],
      // localhost resolves to ::1 and 127.0.0.1: Node reports both refusals in one AggregateError.
      ["refused on every address", wrapped(new AggregateError([socketError("ECONNREFUSED"), socketError("ECONNREFUSED")], ""))],
      ["pg_terminate_backend", wrapped(pgError("terminating connection due to administrator command", "57P01"))],
      ["server restarting", wrapped(pgError("the database system is starting up", "57P03"))],
      ["connection failure", wrapped(pgError("connection failure", "08006"))],
      ["too many connections", wrapped(pgError("sorry, too many clients already", "53300"))],
      ["connection lost mid-query", wrapped(new Error("Connection terminated unexpectedly"))],
      ["pool timeout", wrapped(new Error("timeout exceeded when trying to connect"), "Failed to acquire connection")],
      ["client broken", wrapped(new Error("Client has encountered a connection error and is not queryable"))],
      ["sqlite busy", wrapped(Object.assign(new Error("database is locked"), { code: "SQLITE_BUSY" }))]
    ]
    for (const [name, error] of cases) expect({ name, unreachable: unreachable(error) }).toEqual({ name, unreachable: true })
  })

  it("a statement the database refused, or a failure with no cause, is not", () => {
    const cases: ReadonlyArray<readonly [string, unknown]> = [
      ["syntax error", wrapped(pgError("syntax error at or near \"SELEC\"", "42601"))],
      ["unique violation", wrapped(pgError("duplicate key value violates unique constraint", "23505"))],
      ["missing table", wrapped(pgError("relation \"tasks\" does not exist", "42P01"))],
      ["sqlite constraint", wrapped(Object.assign(new Error("UNIQUE constraint failed"), { code: "SQLITE_CONSTRAINT_UNIQUE" }))],
      ["no cause", new StoreError({ message: "table prefix must be letters, digits and _" })],
      ["not an error", "ECONNREFUSED"]
    ]
    for (const [name, error] of cases) expect({ name, unreachable: unreachable(error) }).toEqual({ name, unreachable: false })
  })

  it("a cause that refers to itself ends the walk", () => {
    const loop: { message: string; cause?: unknown } = { message: "x" }
    loop.cause = loop
    expect(unreachable(new StoreError({ message: "x", cause: loop }))).toBe(false)
  })
})
