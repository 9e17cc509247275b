/**
 * PostgreSQL for the suites that need it: MEDIAGATE_TEST_PG_URL (CI sets it), and a
 * database of its own per suite, dropped afterwards.
 */
import { randomBytes } from "node:crypto"
import pg from "pg"

/** The server of the PostgreSQL suites, if set. */
export const pgUrl = process.env["MEDIAGATE_TEST_PG_URL"]

/** Why a PostgreSQL test is skipped, for its name and the log; empty when it runs. */
export const pgSkipReason = (suite: string) => {
  if (pgUrl !== undefined) return ""
  console.warn(`${suite}: MEDIAGATE_TEST_PG_URL is not set; the PostgreSQL tests are skipped`)
  return " [skipped: MEDIAGATE_TEST_PG_URL is not set]"
}

/** Creates a fresh database on the server of `url`; answers its URL and how to drop it. */
export const freshDatabase = async (url: string) => {
  const name = `mediagate_test_${process.pid}_${randomBytes(4).toString("hex")}`
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  const target = new URL(url)
  target.pathname = `/${name}`
  return {
    url: target.toString(),
    /** Drops the database, closing whatever connections are left. */
    drop: async () => {
      const admin = new pg.Client({ connectionString: url })
      await admin.connect()
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } finally {
        await admin.end()
      }
    }
  }
}
