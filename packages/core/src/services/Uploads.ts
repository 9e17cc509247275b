/**
 * Files a client uploaded (`POST /api/v1/files`) to use as a task's input: their metadata,
 * per owner. The bytes are in the MediaStore under `mediaKey`, served at `url` like a
 * result. An upload expires at `expiresAt` (MEDIAGATE_UPLOAD_RETENTION after its creation):
 * from then on it is not found (metadata and URL answer 404), and the sweep deletes its file,
 * once it is also past `pinnedUntil`: a task accepted with the upload as input pins it to the
 * task's deadline, so the task can read it to its end. A deleted upload's record stays, marked,
 * as history (`stored`, `created`): the usage of a past window never changes; no lookup finds
 * it. Backends: @mediagate/store-memory, @mediagate/store-sql.
 */
import type { Effect, Option } from "effect"
import { Context } from "effect"
import type { StoreError } from "../domain/Errors.js"
import type { AccountId } from "../domain/Ids.js"

export interface UploadRecord {
  /** `file_` and 24 hex characters. */
  readonly id: string
  readonly ownerId: AccountId
  /** The key it was uploaded with, where known (`Account.keyId`). */
  readonly keyId: string | null
  /** The MediaStore key of its bytes (random hex and the extension of its type). */
  readonly mediaKey: string
  /** The public URL it is served at. */
  readonly url: string
  /** Decided by its bytes (`MediaProbe`), never by what the client said. */
  readonly contentType: string
  readonly bytes: number
  readonly width: number | null
  readonly height: number | null
  readonly durationSeconds: number | null
  readonly createdAt: number
  readonly expiresAt: number
  /** The latest deadline of the tasks that use it; null when none does. */
  readonly pinnedUntil: number | null
}

export class Uploads extends Context.Tag("@mediagate/core/Uploads")<Uploads, {
  readonly create: (upload: UploadRecord) => Effect.Effect<void, StoreError>
  /** The upload with this id if `owner` owns it and it is not deleted (expired or not: the caller compares `expiresAt`). */
  readonly getOwned: (id: string, owner: AccountId) => Effect.Effect<Option.Option<UploadRecord>, StoreError>
  /** The upload stored under this MediaStore key, whoever owns it, unless deleted. */
  readonly byMediaKey: (mediaKey: string) => Effect.Effect<Option.Option<UploadRecord>, StoreError>
  /**
   * Ends `owner`'s upload at `at`: `expiresAt` becomes `at`, its pins stay. The upload as it is
   * then; none when there is none (deleted, another owner's, or expired at `at` already), so
   * of two at once only one answers it.
   */
  readonly expire: (id: string, owner: AccountId, at: number) => Effect.Effect<Option.Option<UploadRecord>, StoreError>
  /**
   * Marks `owner`'s upload deleted at `at` (its file gone): no lookup finds it from then on,
   * its record stays for `stored` and `created`. The upload as it was; none when there was
   * none or it was deleted already.
   */
  readonly delete: (id: string, owner: AccountId, at: number) => Effect.Effect<Option.Option<UploadRecord>, StoreError>
  /** Keeps the upload until at least `until` (a task's deadline): `pinnedUntil` becomes the later of the two. A deleted one stays as it is. */
  readonly pin: (id: string, until: number) => Effect.Effect<void, StoreError>
  /** Uploads not deleted and past both `expiresAt` and `pinnedUntil` at `now`, oldest first, at most `limit`: what the sweep deletes. */
  readonly expired: (now: number, limit: number) => Effect.Effect<ReadonlyArray<UploadRecord>, StoreError>
  /** An owner's uploads created in [from, to), deleted or not: how many and their bytes (usage reports). */
  readonly stored: (owner: AccountId | null, from: number, to: number) => Effect.Effect<{ readonly count: number; readonly bytes: number }, StoreError>
  /** Every upload created in [from, to), deleted or not, oldest first: the history usage reports fold. */
  readonly created: (from: number, to: number) => Effect.Effect<ReadonlyArray<UploadRecord>, StoreError>
}>() {}
