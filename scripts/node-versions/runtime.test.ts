/**
 * Run by scripts/node-versions/run.sh on each Node version with the suites (its
 * vitest.config.ts): inside a vitest worker, the worker, a child started the way `npm start`
 * starts the server (process.execPath, tsx as a loader, the parent's environment), one
 * started with nothing but PATH as test/standalone.test.ts and admin.test.ts do, and `node`
 * from PATH all run the Node under test
 * (MEDIAGATE_EXPECTED_NODE), and each loads better-sqlite3, the worker through
 * @mediagate/store-sql as the server does.
 */
import { it } from "@effect/vitest"
import { Database } from "@mediagate/store-sql"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { createRequire } from "node:module"
import { join } from "node:path"
import { expect } from "vitest"

const expected = process.env["MEDIAGATE_EXPECTED_NODE"]
const root = new URL("../..", import.meta.url).pathname

/** What a process prints about itself: its Node version and SQLite's, through better-sqlite3. */
const probe = `
const { createRequire } = require("node:module")
const Sqlite = createRequire(${JSON.stringify(join(root, "package.json"))})("better-sqlite3")
const db = new Sqlite(":memory:")
console.log(JSON.stringify({ node: process.version, sqlite: db.prepare("select sqlite_version() as v").get().v }))
`

it("the run says which Node it expects", () => {
  expect(expected, "MEDIAGATE_EXPECTED_NODE is set by run.sh").toMatch(/^v\d+\.\d+\.\d+$/)
})

it("the worker runs that Node and loads better-sqlite3", () => {
  expect(process.version).toBe(expected)
  const Sqlite = createRequire(join(root, "package.json"))("better-sqlite3")
  const db = new Sqlite(":memory:")
  expect(db.prepare("select 1 + 1 as two").get()).toEqual({ two: 2 })
  db.close()
})

it.effect("the worker opens SQLite through @mediagate/store-sql", () =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ readonly v: string }>`select sqlite_version() as v`
    expect(rows[0]!.v).toMatch(/^3\./)
  }).pipe(Effect.provide(Database.layerSqlite(":memory:")), Effect.orDie))

it("a child started as npm start starts the server (process.execPath, tsx, the parent's environment) runs that Node and loads better-sqlite3", () => {
  const out = execFileSync(process.execPath, ["--conditions=@mediagate/source", "--import", "tsx", "-e", probe], {
    cwd: root,
    env: { ...process.env },
    encoding: "utf8"
  })
  expect(JSON.parse(out).node).toBe(expected)
})

it("a child started with nothing but PATH in its environment runs that Node and loads better-sqlite3", () => {
  const out = execFileSync(process.execPath, ["--conditions=@mediagate/source", "--import", "tsx", "-e", probe], {
    cwd: root,
    env: { PATH: process.env["PATH"] ?? "" },
    encoding: "utf8"
  })
  expect(JSON.parse(out).node).toBe(expected)
})

it("`node` from PATH is that Node", () => {
  const out = execFileSync("node", ["-e", probe], { cwd: root, encoding: "utf8" })
  expect(JSON.parse(out).node).toBe(expected)
})
