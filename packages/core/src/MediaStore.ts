/**
 * Hosting of produced files (the service's own CDN in the spec's words).
 */
import type { Effect, Option } from "effect"
import { Context } from "effect"
import type { MediaError } from "./Errors.js"

/** A stored file. */
export interface MediaObject {
  readonly contentType: string
  readonly bytes: Uint8Array
}

/** Keeps files and names their public URL. */
export class MediaStore extends Context.Tag("@mediagate/core/MediaStore")<MediaStore, {
  /** Stores bytes and returns the public URL they are served at. */
  readonly put: (object: MediaObject & { readonly extension: string }) => Effect.Effect<string, MediaError>
  /** The file stored under `key` (the last path segment of its URL). */
  readonly get: (key: string) => Effect.Effect<Option.Option<MediaObject>, MediaError>
}>() {}
