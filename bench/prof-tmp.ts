import { SqlClient } from "@effect/sql"
import { TaskStore } from "@mediagate/core"
import { Database, SqlTaskStore } from "@mediagate/store-sql"
import { Effect, Layer, ManagedRuntime } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
const file = join(mkdtempSync(join(tmpdir(), "prof-")), "p.db")
const db = Database.layerSqlite(file)
const rt = ManagedRuntime.make(Layer.merge(SqlTaskStore.layerWith({ tablePrefix: "p_" }), db).pipe(Layer.provideMerge(db)))
const N = 5000
const t = async (name: string, eff: Effect.Effect<unknown, unknown, any>) => {
  const s = performance.now(); await rt.runPromise(eff as any); const ms = performance.now() - s
  console.log(name, Math.round(N / ms * 1000), "ops/s")
}
const main = async () => {
  const sql = await rt.runPromise(SqlClient.SqlClient)
  const store = await rt.runPromise(TaskStore.TaskStore)
  const loop = (f: () => Effect.Effect<unknown, unknown>) => Effect.forEach(Array.from({ length: N }), f, { discard: true })
  await t("store.get", loop(() => store.get("nope", "x")))
  await t("sql template", loop(() => sql`SELECT * FROM ${sql("p_tasks")} WHERE id = ${"nope"} AND owner_id = ${"x"}`))
  await t("sql.unsafe", loop(() => sql.unsafe(`SELECT * FROM p_tasks WHERE id = ? AND owner_id = ?`, ["nope", "x"])))
  await t("sql template, tracer off", loop(() => sql`SELECT * FROM ${sql("p_tasks")} WHERE id = ${"nope"} AND owner_id = ${"x"}`).pipe(Effect.withTracerEnabled(false)))
  await t("store.get, tracer off", loop(() => store.get("nope", "x")).pipe(Effect.withTracerEnabled(false)))
  await t("reserve+execute", Effect.scoped(Effect.flatMap(sql.reserve, (c) => loop(() => c.execute(`SELECT * FROM p_tasks WHERE id = ? AND owner_id = ?`, ["nope", "x"], undefined)))))
  await t("scoped reserve per op + execute", loop(() => Effect.scoped(Effect.flatMap(sql.reserve, (c) => c.execute(`SELECT * FROM p_tasks WHERE id = ? AND owner_id = ?`, ["nope", "x"], undefined)))))
  await rt.dispose()
}
main()
