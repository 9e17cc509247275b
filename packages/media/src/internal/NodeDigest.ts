/**
 * The SHA-256 that names a stored file (`MediaStore.keyOf`), on Node. A result of a few
 * hundred kilobytes is hashed at once by node:crypto: that takes a few tens of microseconds,
 * less than WebCrypto's trip to the thread pool and back, which on the 2-core machine cost an
 * idle task about half a millisecond before its result was stored (issue 37). A larger file
 * (a video) is hashed by WebCrypto in the thread pool, so that the event loop is not held
 * while it is read.
 */
import { MediaError, MediaStore } from "@mediagate/core"
import { Effect } from "effect"
import { createHash } from "node:crypto"

/** The largest file hashed on the calling thread: about a fifth of a millisecond of SHA-256. */
export const syncLimit = 256 * 1024

/** SHA-256 for `MediaStore.keyOf`: node:crypto at once up to `syncLimit` bytes, WebCrypto above. */
export const sha256: MediaStore.Digest = (bytes) =>
  bytes.length > syncLimit ? MediaStore.webDigest(bytes) : Effect.try({
    try: () => new Uint8Array(createHash("sha256").update(bytes).digest()),
    catch: (cause) => new MediaError({ message: "cannot hash the file", cause })
  })
