/**
 * What the admin CLI's commands run on: the AdminService (core's `AdminOperations`, the same
 * service the admin API and the console call, so no rule is written twice) over the database
 * of MEDIAGATE_DATABASE_URL, opened only when a command runs (so `--help` needs none), and
 * the actor every action is logged as, `cli:<OS user name>`.
 *
 * Its use cases have no engine or deliverer here: a task cancelled or a callback redelivered
 * from the CLI is written with its credits settled, and the server's engine and deliverer
 * find it at their next scan.
 */
import { AdminOperations, AdminService, AuditLog, Ids, ModelCatalog, Moderation, TaskServiceAlone } from "@mediagate/core"
import { Database, SqlAccounts, SqlAdminKeys, SqlAuditLog, SqlLedger, SqlTaskStore } from "@mediagate/store-sql"
import { Data, Effect, Layer } from "effect"
import { userInfo } from "node:os"
import { defaultDatabaseUrl } from "./Config.js"

/** A failure the operator can act on: printed as one line, exit 1. */
export class AdminError extends Data.TaggedError("AdminError")<{ readonly message: string }> {}

/** Who runs the CLI, as the audit log names them: `cli:<OS user name>`. */
export const actor: AuditLog.Actor = {
  kind: "cli",
  id: (() => {
    try {
      return userInfo().username
    } catch {
      // No passwd entry for this uid (some containers).
      return process.env["USER"] ?? process.env["USERNAME"] ?? `uid-${process.getuid?.() ?? "unknown"}`
    }
  })()
}

const databaseUrl = process.env["MEDIAGATE_DATABASE_URL"] ?? defaultDatabaseUrl

/** The AdminService and what the commands read beside it, on the database. */
const database = (url: string) => {
  // The clients as the server has them: one for all on SQLite, the task store's own pool beside it on PostgreSQL.
  const shared = Database.layerFromUrl(url)
  const store = SqlTaskStore.layer.pipe(Layer.provide(/^postgres(ql)?:\/\//.test(url) ? Database.layerFromUrl(url) : shared))
  const backends = Layer.mergeAll(SqlAccounts.layer, SqlLedger.layer, SqlAdminKeys.layer, SqlAuditLog.layer).pipe(Layer.provide(shared))
  const tasks = TaskServiceAlone.layerBilled.pipe(Layer.provide([ModelCatalog.layer, Moderation.layerAllowAll, TaskServiceAlone.noUpstream]))
  return AdminOperations.layer.pipe(Layer.provideMerge(tasks), Layer.provideMerge(Layer.merge(backends, store)), Layer.provideMerge(Ids.layer))
}

/** Runs a command's work with the AdminService on the database, opened only then. */
export const onDatabase = <A, E>(effect: Effect.Effect<A, E, AdminService.AdminService>) =>
  Effect.provide(
    effect,
    Layer.unwrapEffect(Effect.suspend(() =>
      databaseUrl === "memory"
        ? Effect.fail(new AdminError({ message: "MEDIAGATE_DATABASE_URL is memory: there is no database to administer" }))
        : Effect.succeed(database(databaseUrl))
    ))
  )

/** The AdminService, in a command's work. */
export const service = AdminService.AdminService
