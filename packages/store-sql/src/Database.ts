/**
 * The database behind the SQL backends, chosen by URL: `sqlite:<path>` or `postgres://...`.
 * A database that cannot be opened fails with one line naming it, not a stack. Every backend
 * starts the same way, on the client in context: `prepare` checks its table prefix and
 * migrates, then the backend builds on what it answers.
 */
import { SqlClient } from "@effect/sql"
import { StoreError } from "@mediagate/core"
import { Cause, Effect, Either, Layer, Redacted } from "effect"
import { existsSync } from "node:fs"
import { dirname } from "node:path"
import * as PgPool from "./internal/PgPool.js"
import { migrate, tables } from "./Schema.js"
import * as SqliteWorker from "./SqliteWorker.js"

/** A parsed database URL. */
export type DatabaseUrl =
  | { readonly _tag: "Sqlite"; readonly filename: string }
  | { readonly _tag: "Postgres"; readonly url: Redacted.Redacted<string> }

/** Parses `sqlite:<path>`, `sqlite::memory:` or `postgres://` / `postgresql://` URLs. */
export const parseUrl = (url: string): Either.Either<DatabaseUrl, string> => {
  if (url.startsWith("sqlite:")) {
    const filename = url.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "")
    return filename === "" ? Either.left("sqlite: URL needs a path, e.g. sqlite:./data/mediagate.db") : Either.right({ _tag: "Sqlite", filename })
  }
  if (/^postgres(ql)?:\/\//.test(url)) return Either.right({ _tag: "Postgres", url: Redacted.make(url) })
  return Either.left(`unsupported database URL '${url.split("://")[0]}...': use sqlite:<path> or postgres://...`)
}

const reason = (cause: Cause.Cause<unknown>) => {
  const error = Cause.squash(cause) as { message?: string; cause?: { message?: string } }
  return error?.cause?.message ?? error?.message ?? String(error)
}

/**
 * SQLite at `filename`, WAL journal. Its folder must exist: a mistyped path fails here
 * instead of silently creating folders somewhere (a host that wants a default folder
 * creates it first). The connection lives in a worker thread (`SqliteWorker`), so a
 * statement that waits on the disk never holds the event loop.
 */
export const layerSqlite = (filename: string): Layer.Layer<SqlClient.SqlClient, StoreError> =>
  Layer.unwrapEffect(
    Effect.suspend(() => {
      const folder = dirname(filename)
      return filename === ":memory:" || existsSync(folder)
        ? Effect.succeed(SqliteWorker.layer({ filename }))
        : Effect.fail(new StoreError({ message: `cannot open database ${filename}: the folder ${folder} does not exist` }))
    })
  ).pipe(
    Layer.catchAllCause((cause) =>
      Layer.fail(
        Cause.failureOption(cause).pipe((failure) =>
          failure._tag === "Some" && failure.value instanceof StoreError
            ? failure.value
            : new StoreError({ message: `cannot open database ${filename}: ${reason(cause)}` })
        )
      )
    )
  )

/** PostgreSQL at `url`. */
export const layerPg = (url: Redacted.Redacted<string>): Layer.Layer<SqlClient.SqlClient, StoreError> =>
  // @effect/sql-pg and pg imported here, not at the top: a process on SQLite never loads them.
  // The pool is ours (`PgPool`): a connection whose session the server ended leaves it.
  Layer.unwrapEffect(Effect.promise(() => Promise.all([import("@effect/sql-pg"), import("pg")])).pipe(
    Effect.map(([{ PgClient }, { default: pg }]) => PgClient.layerFromPool({ acquire: PgPool.make(pg, { url, maxConnections: 10 }) }))
  )).pipe(
    Layer.catchAllCause((cause) => {
      const safe = Redacted.value(url).replace(/\/\/[^@/]*@/, "//***@")
      return Layer.fail(new StoreError({ message: `cannot open database ${safe}: ${reason(cause)}` }))
    })
  )

/** The SqlClient for a database URL. */
export const layerFromUrl = (url: string): Layer.Layer<SqlClient.SqlClient, StoreError> =>
  Either.match(parseUrl(url), {
    onLeft: (message) => Layer.fail(new StoreError({ message })),
    onRight: (parsed) => (parsed._tag === "Sqlite" ? layerSqlite(parsed.filename) : layerPg(parsed.url))
  })

/** Settings every SQL backend takes. */
export interface Options {
  /** Prefix of every table name; the backends on one database share it. Default `mediagate_`. */
  readonly tablePrefix?: string
}

/** The default table prefix. */
export const defaultPrefix = "mediagate_"

/** What a SQL backend builds on, once `prepare` has migrated its database. */
export interface Prepared {
  readonly sql: SqlClient.SqlClient
  /** The backends' tables, named with the prefix. */
  readonly tables: ReturnType<typeof tables>
  readonly isPg: boolean
  /** A statement written with `?` placeholders, numbered as PostgreSQL wants them there. */
  readonly compile: (text: string) => string
}

const identifier = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * The prologue of every SQL backend's `make`: checks the table prefix (it is written into
 * statements, so only letters, digits and _), then runs the migrations (all the backends'
 * tables, one schema), on the SqlClient in context. `component` names the backend in the
 * error, such as "the ledger".
 */
export const prepare = (component: string, options: Options = {}): Effect.Effect<Prepared, StoreError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const prefix = options.tablePrefix ?? defaultPrefix
    if (!identifier.test(prefix)) {
      return yield* new StoreError({ message: `table prefix must be letters, digits and _: '${prefix}'` })
    }
    yield* migrate(prefix).pipe(StoreError.refail(`migrating ${component}`))
    const isPg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
    const compile = (text: string) => {
      let n = 0
      return isPg ? text.replace(/\?/g, () => `$${++n}`) : text
    }
    return { sql, tables: tables(prefix), isPg, compile }
  })
