/**
 * The audit log: every admin action (through the admin API, the console or the admin CLI),
 * with who did it, when, to what, and the state before and after. Append-only: nothing
 * updates or deletes an entry. Secrets and keys are never written to it (hints only).
 * Backends: @mediagate/store-memory, @mediagate/store-sql.
 */
import type { Effect } from "effect"
import { Context } from "effect"
import type { StoreError } from "../domain/Errors.js"

/** Who acted: an admin key (through the API or the console), or the admin CLI on the database host. */
export type Actor =
  | { readonly kind: "admin_key"; readonly id: string }
  | { readonly kind: "cli"; readonly id: string }

/** The actor as one string, as the log keeps it: `admin_key:<id>`, `cli:<os user>`. */
export const actorName = (actor: Actor): string => `${actor.kind}:${actor.id}`

/** What was done. */
export type Action =
  | "account.create"
  | "key.create"
  | "key.revoke"
  | "secret.rotate"
  | "credits.add"
  | "task.cancel"
  | "task.redeliver"
  | "admin_key.create"
  | "admin_key.revoke"

export interface AuditEntry {
  readonly id: string
  readonly at: number
  /** `actorName` of who did it. */
  readonly actor: string
  readonly action: Action
  /** The id of what it was done to (account, key, task); null when nothing in particular. */
  readonly target: string | null
  /** The state of the target before and after, as JSON-ready values (never a secret); null where there was none. */
  readonly before: unknown
  readonly after: unknown
}

/** A page of the log, newest first. */
export interface AuditPage {
  readonly entries: ReadonlyArray<AuditEntry>
  /** Pass it back as `before` for the next page; null on the last page. */
  readonly nextCursor: string | null
}

export class AuditLog extends Context.Tag("@mediagate/core/AuditLog")<AuditLog, {
  readonly record: (entry: AuditEntry) => Effect.Effect<void, StoreError>
  /** Newest first, `limit` at a time, after the cursor; only `action` and `target` when given. */
  readonly list: (options: {
    readonly limit: number
    readonly cursor?: string | undefined
    readonly action?: Action | undefined
    readonly target?: string | undefined
  }) => Effect.Effect<AuditPage, StoreError>
}>() {}
