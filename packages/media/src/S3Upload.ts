/**
 * `putStream` and `remove` of the S3 media store. An upload is spooled to a temporary file
 * while it arrives (counted against its limit, one piece in memory at a time), then sent with
 * one PutObject of known length from that file: past the limit, or when the client's stream
 * fails, nothing was sent, so nothing is left in the bucket; and a PutObject either stores
 * the whole object or none of it (docs/decisions.md says why not a multipart upload). A spool
 * file a crash left is deleted when the store starts again (`sweepSpool`).
 */
import { DeleteObjectCommand, PutObjectCommand } from "@aws-sdk/client-s3"
import type { S3Client } from "@aws-sdk/client-s3"
import { MediaError, MediaStore } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Option } from "effect"
import { createReadStream } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { send, warn } from "./S3Send.js"
import { discard, spool, sweepLeftovers } from "./Spool.js"

type Service = Context.Tag.Service<MediaStore.MediaStore>

/** A spool file's name: the upload's key (random) between our prefix and suffix. */
const spoolName = (key: string) => `mediagate-upload-${key}.partial`
const spoolNames = /^mediagate-upload-[0-9a-f]{32}\.[a-z0-9]+\.partial$/

/**
 * Deletes the spool files in `spoolDirectory` (by default the system's temporary folder) that
 * a crashed process left: ours by name, unwritten for `Spool.leftoverAge`, so another
 * process's upload in progress there is left alone. Never fails.
 */
export const sweepSpool = (spoolDirectory: string = tmpdir()): Effect.Effect<number> =>
  sweepLeftovers({ directory: spoolDirectory, ours: spoolNames })

/** The two operations over a bucket; `spoolDirectory` holds the uploads on their way (by default the system's temporary folder). */
export const streamUploads = (
  bucket: { readonly client: S3Client; readonly bucket: string; readonly prefix: string },
  base: string,
  spoolDirectory: string = tmpdir()
): Pick<Service, "putStream" | "remove"> => ({
  putStream: ({ key, maxBytes, stream }) =>
    Option.match(MediaStore.parseKey(key), {
      onNone: () => Effect.fail(new MediaError({ message: `'${key}' is not a media key` })),
      onSome: ({ contentType }) => {
        // The key is random (the caller's, from Ids): one upload per name at a time.
        const path = join(spoolDirectory, spoolName(key))
        // The spool file is deleted once sent or not (spool deletes its own on failure; a name
        // that already existed, EEXIST, is another upload's and is left alone).
        return Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(restore(spool(path, stream, maxBytes, key)), (size) =>
            restore(send(
            (abortSignal) =>
              bucket.client.send(
                new PutObjectCommand({
                  Bucket: bucket.bucket,
                  Key: `${bucket.prefix}${key}`,
                  Body: createReadStream(path),
                  ContentLength: size,
                  ContentType: contentType
                }),
                { abortSignal }
              ),
              `cannot write ${key} to bucket ${bucket.bucket}`
            )).pipe(Effect.as({ url: `${base}/${key}`, size }), Effect.ensuring(discard(path))))
        ).pipe(
          Effect.tapError((error) => error instanceof MediaError ? warn(key)(error) : Effect.void)
        )
      }
    }),
  remove: (key) =>
    Option.isNone(MediaStore.parseKey(key))
      ? Effect.void
      : send(
        (abortSignal) => bucket.client.send(new DeleteObjectCommand({ Bucket: bucket.bucket, Key: `${bucket.prefix}${key}` }), { abortSignal }),
        `cannot delete ${key} in bucket ${bucket.bucket}`
      ).pipe(Effect.asVoid, Effect.tapError(warn(key)))
})
