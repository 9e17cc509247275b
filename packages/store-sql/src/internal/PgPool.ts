/**
 * The pg pool under the PostgreSQL SqlClient, whose connections leave it when the server
 * ends their session.
 *
 * A session the server ends (pg_terminate_backend, a restart, an idle timeout) answers its
 * statement with a FATAL error, then closes the socket. pg hands the statement its error
 * before it reads the close, and @effect/sql-pg gives the connection back to the pool
 * there and then, without the error (it passes on only the client's 'error' events). The
 * pool kept the dead connection, and the next statement to take it failed with "Connection
 * terminated unexpectedly": a submit refused because another request's connection had
 * been killed. Here the client ends itself on such an error before the statement's callback
 * runs, and pg-pool drops a client that is ending when it comes back.
 */
import { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, Redacted } from "effect"
import type { Scope } from "effect"
import type pg from "pg"

/**
 * Whether a statement's error means the server ended the session. The severity is the
 * localized one (pg reads only that field), so the SQLSTATEs too: 57P* (shut down,
 * terminated, cannot connect now, idle session timeout), 08* (connection exceptions),
 * 25P03 (idle in transaction timeout).
 */
const endsSession = (error: unknown): boolean => {
  if (typeof error !== "object" || error === null) return false
  const { code, severity } = error as { readonly code?: unknown; readonly severity?: unknown }
  return severity === "FATAL" || severity === "PANIC" ||
    (typeof code === "string" && (code.startsWith("57P") || code.startsWith("08") || code === "25P03"))
}

/**
 * pg's Client, ending itself when a statement's error says the server ended its session.
 * Only the callback form: @effect/sql-pg's statements and pg-pool's query use it. A
 * cursor (@effect/sql-pg's streams, which mediagate does not use) is passed through as it is.
 */
const clientClass = (Client: typeof pg.Client): typeof pg.Client =>
  class SessionClient extends Client {
    override query(...args: Array<any>): any {
      const callback = args[args.length - 1]
      if (typeof callback === "function") {
        args[args.length - 1] = (error: unknown, result: unknown) => {
          if (endsSession(error)) this.end().catch(() => undefined)
          return callback(error, result)
        }
      }
      return (super.query as (...args: Array<any>) => any)(...args)
    }
  }

/** Settings of the pool, as @effect/sql-pg's own `PgClient.make` takes them. */
export interface Options {
  readonly url: Redacted.Redacted<string>
  readonly maxConnections: number
  /** How long the first connection may take. Default 5 seconds. */
  readonly connectTimeout?: Duration.DurationInput
}

/**
 * The pool, ended with the scope, its first connection checked (`SELECT 1`) within
 * `connectTimeout`: as @effect/sql-pg's `PgClient.make` opens its own, with these clients.
 */
export const make = (module: typeof pg, options: Options): Effect.Effect<pg.Pool, SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new module.Pool({
          connectionString: Redacted.value(options.url),
          max: options.maxConnections,
          application_name: "@effect/sql-pg",
          Client: clientClass(module.Client)
        })
      ),
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
    )
    // A client's error while it is idle: the pool has dropped it already.
    pool.on("error", () => undefined)
    yield* Effect.tryPromise({
      try: () => pool.query("SELECT 1"),
      catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
    }).pipe(
      Effect.timeoutFail({
        duration: options.connectTimeout ?? Duration.seconds(5),
        onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
      })
    )
    return pool
  })
