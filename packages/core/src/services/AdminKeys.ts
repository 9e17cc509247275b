/**
 * Admin keys: the keys of operators, apart from the accounts' keys. An admin key opens the
 * admin API (`/api/v1/admin/...`) and the console and nothing else; a customer key never
 * opens them. Stored hashed (SHA-256, `ApiKeys`), as the accounts' keys are. Backends:
 * @mediagate/store-memory, @mediagate/store-sql; `MEDIAGATE_ADMIN_KEY` adds one given as
 * configuration (`withGiven`).
 */
import type { Effect, Option, Redacted } from "effect"
import { Context } from "effect"
import type { StoreError } from "../domain/Errors.js"

/** An admin key as admin tools list it: never the key itself. */
export interface AdminKeyInfo {
  readonly id: string
  readonly hint: string
  readonly label: string | null
  readonly createdAt: number
  readonly expiresAt: number | null
  readonly revokedAt: number | null
}

/** An admin key to store: its id, SHA-256 (hex) and hint (`ApiKeys.hint`), and its terms. */
export interface NewAdminKey {
  readonly id: string
  readonly hash: string
  readonly hint: string
  readonly label: string | null
  readonly createdAt: number
  readonly expiresAt: number | null
}

export class AdminKeys extends Context.Tag("@mediagate/core/AdminKeys")<AdminKeys, {
  /** The admin key presented, if it is one that is active (not revoked, not expired) at `now`. */
  readonly authenticate: (key: Redacted.Redacted<string>, now: number) => Effect.Effect<Option.Option<AdminKeyInfo>, StoreError>
  readonly create: (key: NewAdminKey) => Effect.Effect<void, StoreError>
  /** Every admin key, oldest first. */
  readonly list: Effect.Effect<ReadonlyArray<AdminKeyInfo>, StoreError>
  /** Revokes at `now`; the key as it now stands, none when there is no such key. Revoking twice keeps the first time. */
  readonly revoke: (id: string, now: number) => Effect.Effect<Option.Option<AdminKeyInfo>, StoreError>
}>() {}
