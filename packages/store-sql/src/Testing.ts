/**
 * Databases for tests: a PostgreSQL database of its own, created on the server a test run
 * is given (`MEDIAGATE_TEST_PG_URL`) and dropped afterwards. Imported from
 * `@mediagate/store-sql/testing`, never from the public index.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import { randomBytes } from "node:crypto"
import pg from "pg"

/** The PostgreSQL server tests may use, or undefined (the PostgreSQL cases are then skipped). */
export const pgUrl: string | undefined = process.env["MEDIAGATE_TEST_PG_URL"]

/** Creates a database named after `label` and this process, answers its URL, and drops it when the scope closes. */
export const freshPgDatabase = (url: string, label = "test"): Effect.Effect<string, never, Scope.Scope> =>
  Effect.gen(function*() {
    const name = `mediagate_${label}_${process.pid}_${randomBytes(4).toString("hex")}`
    const admin = new pg.Client({ connectionString: url })
    yield* Effect.promise(() => admin.connect())
    yield* Effect.promise(() => admin.query(`CREATE DATABASE ${name}`))
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
        await admin.end()
      })
    )
    return Object.assign(new URL(url), { pathname: `/${name}` }).toString()
  })
