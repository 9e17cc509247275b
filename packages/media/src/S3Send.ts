/**
 * Requests to an S3-compatible store and what their failures mean, for the S3 media store's
 * modules (S3MediaStore, S3Upload).
 */
import { MediaError } from "@mediagate/core"
import { Effect } from "effect"

/** An SDK error's name and HTTP status, whatever its shape. */
export const describe = (cause: unknown): { readonly name: string; readonly status: number | undefined; readonly message: string } => {
  const error = typeof cause === "object" && cause !== null ? cause as Record<string, unknown> : {}
  const metadata = typeof error["$metadata"] === "object" && error["$metadata"] !== null ? error["$metadata"] as Record<string, unknown> : {}
  return {
    name: typeof error["name"] === "string" ? error["name"] : "Error",
    status: typeof metadata["httpStatusCode"] === "number" ? metadata["httpStatusCode"] : undefined,
    message: typeof error["message"] === "string" ? error["message"] : String(cause)
  }
}

/**
 * No such object. Without s3:ListBucket on the bucket, AWS answers 403 rather than 404 for a
 * missing key: that is a storage failure here, since it cannot be told apart from a denied read.
 */
export const isMissing = (cause: unknown) => {
  const { name, status } = describe(cause)
  return status === 404 || name === "NotFound" || name === "NoSuchKey"
}

/** One request; its failure a MediaError saying `message` and the store's own words. */
export const send = <A>(run: (signal: AbortSignal) => Promise<A>, message: string): Effect.Effect<A, MediaError> =>
  Effect.tryPromise({ try: run, catch: (cause) => new MediaError({ message: `${message}: ${describe(cause).message}`, cause }) })

/** A storage failure logged as a warning with the file's key, as the file store does. */
export const warn = (key: string) => (error: MediaError) =>
  Effect.logWarning(`mediagate: media storage failed: ${error.message}`, error.cause).pipe(Effect.annotateLogs("mediaKey", key))
