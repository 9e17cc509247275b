import { SqlClient } from "@effect/sql"
import { Database } from "@mediagate/store-sql"
import { Effect, ManagedRuntime, Redacted } from "effect"
import pg from "pg"
const url = "postgres://postgres@127.0.0.1:5432/test"
const rt = ManagedRuntime.make(Database.layerPg(Redacted.make(url)))
const N = 3000
const t = async (name: string, eff: Effect.Effect<unknown, unknown, any>) => {
  const s = performance.now(); await rt.runPromise(eff as any); const ms = performance.now() - s
  console.log(name, Math.round(N / ms * 1000), "ops/s")
}
const main = async () => {
  const sql = await rt.runPromise(SqlClient.SqlClient)
  const loop = (f: () => Effect.Effect<unknown, unknown>) => Effect.forEach(Array.from({ length: N }), f, { discard: true })
  await t("sql template", loop(() => sql`SELECT ${1}::int AS x`))
  await t("reserve+execute", Effect.scoped(Effect.flatMap(sql.reserve, (c) => loop(() => c.execute(`SELECT $1::int AS x`, [1], undefined)))))
  await t("scoped reserve per op", loop(() => Effect.scoped(Effect.flatMap(sql.reserve, (c) => c.execute(`SELECT $1::int AS x`, [1], undefined)))))
  const client = new pg.Client({ connectionString: url }); await client.connect()
  let s = performance.now(); for (let i = 0; i < N; i++) await client.query(`SELECT $1::int AS x`, [1]); console.log("bare", Math.round(N / (performance.now() - s) * 1000))
  const pool = new pg.Pool({ connectionString: url, max: 10 })
  s = performance.now(); for (let i = 0; i < N; i++) await pool.query(`SELECT $1::int AS x`, [1]); console.log("bare pool", Math.round(N / (performance.now() - s) * 1000))
  await client.end(); await pool.end(); await rt.dispose()
}
main()
