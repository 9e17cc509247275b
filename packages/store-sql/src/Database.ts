/**
 * The database behind the SQL store, chosen by URL: `sqlite:<path>` or `postgres://...`.
 * A database that cannot be opened fails with one line naming it, not a stack.
 */
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import type { SqlClient } from "@effect/sql"
import { StoreError } from "@mediagate/core"
import { Cause, Effect, Either, Layer, Redacted } from "effect"
import { existsSync } from "node:fs"
import { dirname } from "node:path"

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
 * creates it first).
 */
export const layerSqlite = (filename: string): Layer.Layer<SqlClient.SqlClient, StoreError> =>
  Layer.unwrapEffect(
    Effect.suspend(() => {
      const folder = dirname(filename)
      return filename === ":memory:" || existsSync(folder)
        ? Effect.succeed(SqliteClient.layer({ filename }))
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
  PgClient.layer({ url, maxConnections: 10 }).pipe(
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
