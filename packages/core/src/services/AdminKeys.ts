/**
 * Admin keys: the keys of operators, apart from the accounts' keys. An admin key opens the
 * admin API (`/api/v1/admin/...`) and the console and nothing else; a customer key never
 * opens them. Stored hashed (SHA-256, `ApiKeys`), as the accounts' keys are. Backends:
 * @mediagate/store-memory, @mediagate/store-sql; `MEDIAGATE_ADMIN_KEY` adds one given as
 * configuration (`withGiven`).
 */
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js"
import * as ApiKeys from "../domain/ApiKeys.js"
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

/** The id of the admin key given as configuration (`withGiven`): what the audit log names as its actor. */
export const givenKeyId = "adk_configured"

/** SHA-256 of a key, hex: the form admin keys are stored and compared in. */
const hashOf = (key: string): string => bytesToHex(sha256(utf8ToBytes(key)))

/**
 * `inner` with one more admin key, given as configuration (the standalone server's
 * `MEDIAGATE_ADMIN_KEY`): it authenticates as `givenKeyId`, never expires, and since it is not
 * stored it is neither listed nor revoked (unset the variable and restart to end it). Only its
 * SHA-256 is kept in memory, compared in constant time. Every other call goes to `inner`.
 */
export const withGiven = (given: Redacted.Redacted<string>, inner: Context.Tag.Service<AdminKeys>): Context.Tag.Service<AdminKeys> => {
  const plain = Redacted.value(given)
  const hash = hashOf(plain)
  const info: AdminKeyInfo = {
    id: givenKeyId,
    hint: ApiKeys.hint(plain),
    label: "MEDIAGATE_ADMIN_KEY",
    createdAt: 0,
    expiresAt: null,
    revokedAt: null
  }
  return {
    ...inner,
    authenticate: (key, now) =>
      ApiKeys.sameHash(hashOf(Redacted.value(key)), hash) ? Effect.succeed(Option.some(info)) : inner.authenticate(key, now)
  }
}

/** The AdminKeys in context with the admin key `given` added (`withGiven`). */
export const layerWithGiven = (given: Redacted.Redacted<string>): Layer.Layer<AdminKeys, never, AdminKeys> =>
  Layer.effect(AdminKeys, Effect.map(AdminKeys, (inner) => withGiven(given, inner)))
