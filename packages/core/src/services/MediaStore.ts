/**
 * Hosting of produced files (the service's own CDN in the spec's words). A file's key is
 * its content's hash plus its extension, so a key never changes meaning: the same bytes
 * stored twice are one file at one URL, and clients may cache a URL forever.
 *
 * The contract leaves room for stores that are not local files (an S3-compatible bucket):
 * serving goes through `stat` and `stream`, never through a path on disk.
 */
import type { Stream } from "effect"
import { Context, Effect, Option } from "effect"
import { MediaError } from "../domain/Errors.js"
import type { MediaTooLarge } from "../domain/Errors.js"

/** A stored file. */
export interface MediaObject {
  readonly contentType: string
  readonly bytes: Uint8Array
}

/** What serving a file needs before its bytes. */
export interface MediaInfo {
  readonly contentType: string
  /** Size in bytes. */
  readonly size: number
  /** The content hash the key is named after (hex): a strong validator, the ETag. */
  readonly hash: string
}

/** Bytes `start` to `end` of a file, both included, within its size. */
export interface ByteRange {
  readonly start: number
  readonly end: number
}

/** Where a client may fetch a file itself, for how long the address may be cached. */
export interface MediaRedirect {
  readonly url: string
  /** Seconds a cache may keep the redirect: shorter than the address stays valid. */
  readonly maxAge: number
}

/** The extensions a file may be stored under, with the content type each is served as. */
export const contentTypes: Readonly<Record<string, string>> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  webp: "image/webp",
  gif: "image/gif",
  mp4: "video/mp4",
  mov: "video/quicktime",
  mp3: "audio/mpeg",
  wav: "audio/wav"
}

/**
 * A key: the first 32 hex characters (128 bits) of the bytes' SHA-256 and an extension of
 * `contentTypes`. Anything else is never a file of ours, whatever a store holds.
 */
const keyPattern = /^([0-9a-f]{32})\.(png|jpg|jpeg|webp|gif|mp4|mov|mp3|wav)$/

/** The parts of a well-formed key; none for anything else (paths, other names). */
export const parseKey = (key: string): Option.Option<{ readonly hash: string; readonly contentType: string }> => {
  const match = keyPattern.exec(key)
  return match === null ? Option.none() : Option.some({ hash: match[1]!, contentType: contentTypes[match[2]!]! })
}

const hex = (byte: number) => byte.toString(16).padStart(2, "0")

/** A file's SHA-256, for `keyOf`. */
export type Digest = (bytes: Uint8Array) => Effect.Effect<Uint8Array, MediaError>

/** SHA-256 by WebCrypto, on any platform: the hashing runs off the calling thread (on Node, in its thread pool). */
export const webDigest: Digest = (bytes) =>
  Effect.tryPromise({
    try: () => globalThis.crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>),
    catch: (cause) => new MediaError({ message: "cannot hash the file", cause })
  }).pipe(Effect.map((digest) => new Uint8Array(digest)))

/**
 * The key of `bytes` stored with `extension`; fails for an extension that is not served.
 * `digest` is the SHA-256 to use (WebCrypto's unless a store on a platform with a faster one
 * for its files passes that): every store names the same bytes alike.
 */
export const keyOf = (bytes: Uint8Array, extension: string, digest: Digest = webDigest): Effect.Effect<string, MediaError> => {
  const normalized = extension.toLowerCase()
  if (contentTypes[normalized] === undefined) {
    return Effect.fail(new MediaError({ message: `files with the extension '${extension}' are not served` }))
  }
  return Effect.map(digest(bytes), (hash) => `${Array.from(hash.subarray(0, 16), hex).join("")}.${normalized}`)
}

/**
 * Keeps files and names their public URL. A store that is not on local disk implements the
 * same operations; the HTTP route serves `/media/<key>` from `stat` and `stream` alone.
 */
export class MediaStore extends Context.Tag("@mediagate/core/MediaStore")<MediaStore, {
  /**
   * Stores bytes under `keyOf(bytes, extension)` and returns the public URL they are served
   * at: the same bytes give the same URL. The type served is the extension's (`contentTypes`);
   * an extension not listed there fails.
   */
  readonly put: (object: MediaObject & { readonly extension: string }) => Effect.Effect<string, MediaError>
  /** The whole file stored under `key` (the last path segment of its URL), for small files and tests. */
  readonly get: (key: string) => Effect.Effect<Option.Option<MediaObject>, MediaError>
  /**
   * Type, size and hash of the file under `key`; none when nothing is stored there (or `key`
   * is not a key). Fails only when the storage itself cannot answer, which must never look
   * like a missing file.
   */
  readonly stat: (key: string) => Effect.Effect<Option.Option<MediaInfo>, MediaError>
  /**
   * The bytes under `key`, all of them or `range` (checked against the size `stat` gave).
   * Lazy: nothing is read until the stream runs, and the file is read piece by piece. A
   * file gone since `stat` fails the stream.
   */
  readonly stream: (key: string, range?: ByteRange) => Stream.Stream<Uint8Array, MediaError>
  /**
   * Only for a store that serves its files itself (an S3 bucket with presigned URLs, when its
   * host chooses that): an address the HTTP layer redirects a GET of a file `stat` found to,
   * instead of sending its bytes. Without it, the HTTP layer always sends the bytes.
   */
  readonly redirect?: (key: string) => Effect.Effect<MediaRedirect, MediaError>
  /**
   * Stores a file that arrives as a stream (an upload), under the `key` given (a key `parseKey`
   * reads: 32 hex characters and an extension listed in `contentTypes`, e.g. random hex from
   * `Ids`), never holding the whole file in memory: past `maxBytes` it stops reading and fails
   * with MediaTooLarge, and nothing is stored. Answers the public URL and the size. The
   * stream's own failure fails it with nothing stored.
   */
  readonly putStream: <E>(input: {
    readonly key: string
    readonly stream: Stream.Stream<Uint8Array, E>
    readonly maxBytes: number
  }) => Effect.Effect<{ readonly url: string; readonly size: number }, MediaError | MediaTooLarge | E>
  /** Deletes the file under `key`; nothing when there is none (or `key` is not a key). */
  readonly remove: (key: string) => Effect.Effect<void, MediaError>
}>() {}
