/**
 * Databases for tests, the one place every suite gets them from: a PostgreSQL database of its
 * own, created on the server a test run is given (`MEDIAGATE_TEST_PG_URL`, CI sets it) and
 * dropped afterwards. Imported from `@mediagate/store-sql/testing`, never from the public
 * index.
 */
import { Effect, Exit, Scope } from "effect"
import { randomBytes } from "node:crypto"
import pg from "pg"
import { pgSkipMarker } from "./internal/pgSkipMarker.js"

/** The PostgreSQL server tests may use, or undefined (the PostgreSQL cases are then skipped). */
export const pgUrl: string | undefined = process.env["MEDIAGATE_TEST_PG_URL"]

/**
 * Why a suite's PostgreSQL tests are skipped, for their names; empty when they run. When
 * they do not, it says so once in the log (`pgSkipMarker` and the suite's name), which the
 * run's summary (scripts/run-summary/reporter.ts) gathers into one line.
 */
export const pgSkipReason = (suite: string): string => {
  if (pgUrl !== undefined) return ""
  console.warn(`${pgSkipMarker}${suite}`)
  return " [skipped: MEDIAGATE_TEST_PG_URL is not set]"
}

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

/**
 * `freshPgDatabase` for a suite that sets up in `beforeAll` rather than in a scope: the
 * database's URL, and `drop` for its `afterAll` (closing whatever connections are left).
 */
export const freshDatabase = async (url: string, label = "test"): Promise<{ readonly url: string; readonly drop: () => Promise<void> }> => {
  const scope = Effect.runSync(Scope.make())
  const target = await Effect.runPromise(Scope.extend(freshPgDatabase(url, label), scope))
  return { url: target, drop: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}
