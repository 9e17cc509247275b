/**
 * MediaStore in an S3-compatible bucket (AWS S3, Cloudflare R2, MinIO, Backblaze B2, GCS
 * through its S3 interoperability) on `@aws-sdk/client-s3`. Files are objects named
 * `<prefix><key>`; the HTTP layer serves them under /media/<key> from `stat` and `stream`,
 * with ranges. With a retention, objects last stored longer ago than that are deleted by a
 * periodic sweep (ListObjectsV2, DeleteObjects), as the file store does with its folder.
 *
 * This module is `@mediagate/media/s3`, apart from the package's main entry, so that a host
 * that keeps files on disk or in memory never installs the SDK (an optional peer).
 */
import {
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client
} from "@aws-sdk/client-s3"
import type { S3ClientConfig } from "@aws-sdk/client-s3"
import { MediaError, MediaStore } from "@mediagate/core"
import type { Context, Scope } from "effect"
import { Clock, Duration, Effect, Layer, Option, Stream } from "effect"
import type { ClientOptions, Location } from "./S3Location.js"
import * as NodeDigest from "./internal/NodeDigest.js"
import { describe, isMissing, send, warn } from "./S3Send.js"
import { streamUploads, sweepSpool } from "./S3Upload.js"

export { clientConfig, parseMediaUrl } from "./S3Location.js"
export type { ClientOptions, Location } from "./S3Location.js"

/** Options of the S3 media store. */
export interface Options extends Location {
  readonly client: ClientOptions
  /** Public base URL, e.g. `http://127.0.0.1:8080/media`. */
  readonly baseUrl: string
  /** How long a file is kept after it was last stored; by default forever. */
  readonly retention?: Duration.DurationInput
  /** How often the layer sweeps when there is a retention; by default the retention, at most an hour. */
  readonly sweepInterval?: Duration.DurationInput
  /**
   * How /media/<key> answers: `proxy` (the default) sends the bytes from the bucket, with
   * ranges; `presigned` answers 302 to a presigned GET URL of the object (needs
   * `@aws-sdk/s3-request-presigner` installed), so the bytes go from the store to the client.
   */
  readonly serve?: "proxy" | "presigned"
  /** With `presigned`, how long a URL is valid (default an hour); the redirect is cached for half of it. */
  readonly presignedExpiry?: Duration.DurationInput
  /** Where uploads (`putStream`) are spooled before they are sent; by default the system's temporary folder. */
  readonly spoolDirectory?: string
}

/** The SDK client of `options`; path-style with a custom endpoint, checksums only where S3 requires them. */
export const makeClient = (options: ClientOptions): S3Client => {
  const config: S3ClientConfig = {
    region: options.region,
    // Newer SDKs send and check CRC32 checksums on every request by default, which many
    // S3-compatible stores reject or do not return: only where the API requires one.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    ...(options.endpoint === undefined ? {} : {
      endpoint: options.endpoint,
      // Virtual-hosted names (<bucket>.<host>) need wildcard DNS that MinIO, s3rver or a
      // loopback address do not have; path-style works on every S3-compatible store.
      forcePathStyle: true
    }),
    // The SDK waits forever by default: a store that accepts and never answers would hold
    // every /media/ request and every result copy.
    requestHandler: { connectionTimeout: options.timeouts?.connect ?? 10_000, socketTimeout: options.timeouts?.idle ?? 60_000 },
    ...(options.credentials === undefined ? {} : { credentials: { ...options.credentials } }),
    ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts })
  }
  return new S3Client(config)
}

/** `bytes <start>-<end>/<size>`'s start. */
const rangeStart = (contentRange: string | undefined) => {
  const match = /^bytes (\d+)-\d+\/(\d+|\*)$/.exec(contentRange ?? "")
  return match === null ? undefined : Number(match[1])
}

/** Drops the first `skip` bytes of a stream and ends it after `length` more, without pulling further. */
const slice = <E>(stream: Stream.Stream<Uint8Array, E>, skip: number, length: number): Stream.Stream<Uint8Array, E> =>
  stream.pipe(
    Stream.mapAccum(0, (position, chunk: Uint8Array) => {
      const from = Math.max(0, skip - position)
      const to = Math.max(from, Math.min(chunk.length, skip + length - position))
      return [position + chunk.length, { bytes: chunk.subarray(from, to), last: position + chunk.length >= skip + length }] as const
    }),
    Stream.takeUntil(({ last }) => last),
    Stream.map(({ bytes }) => bytes),
    Stream.filter((bytes) => bytes.length > 0)
  )

/** A client and its bucket, for `makeWith` and `sweep`. */
export interface Bucket extends Location {
  readonly client: S3Client
}

/** Fails with one line when the bucket cannot be reached: wrong name, endpoint or credentials. */
const checkBucket = (bucket: Bucket, endpoint: string | undefined) =>
  send((abortSignal) => bucket.client.send(new HeadBucketCommand({ Bucket: bucket.bucket }), { abortSignal }), "").pipe(
    Effect.mapError((error) => {
      const { message, name, status } = describe(error.cause)
      const why = status === 404
        ? "no such bucket"
        : status === 403
        ? "access denied (check the credentials)"
        : status === undefined
        ? message.split("\n")[0]
        : `${name} (HTTP ${status})`
      return new MediaError({ message: `cannot use bucket ${bucket.bucket} at ${endpoint ?? "AWS S3"}: ${why}`, cause: error.cause })
    })
  )

/** The store over a client the caller owns (`layerWith` builds and closes one). */
export const makeWith = (
  bucket: Bucket,
  options: {
    readonly baseUrl: string
    readonly retention?: Duration.DurationInput
    readonly redirect?: (key: string) => Effect.Effect<MediaStore.MediaRedirect, MediaError>
    readonly spoolDirectory?: string
  }
): Context.Tag.Service<MediaStore.MediaStore> => {
  const { client } = bucket
  const base = options.baseUrl.replace(/\/+$/, "")
  const objectKey = (key: string) => `${bucket.prefix}${key}`

  /** HeadObject: size and time when the object is there, none when it is not. */
  const head = (key: string): Effect.Effect<Option.Option<{ readonly size: number; readonly lastModified: number }>, MediaError> =>
    Effect.tryPromise({
      try: (abortSignal) => client.send(new HeadObjectCommand({ Bucket: bucket.bucket, Key: objectKey(key) }), { abortSignal }),
      catch: (cause) => cause
    }).pipe(
      Effect.map((found) => Option.some({ size: found.ContentLength ?? 0, lastModified: found.LastModified?.getTime() ?? 0 })),
      Effect.catchAll((cause) =>
        isMissing(cause)
          ? Effect.succeedNone
          : Effect.fail(new MediaError({ message: `cannot look up ${key} in bucket ${bucket.bucket}: ${describe(cause).message}`, cause }))
      )
    )

  /** The bytes of a well-formed key, or of `range`; a missing object fails the stream. */
  const read = (key: string, range?: MediaStore.ByteRange) =>
    Stream.unwrap(
      Effect.gen(function*() {
        const answer = yield* Effect.tryPromise({
          try: (abortSignal) =>
            client.send(
              new GetObjectCommand({
                Bucket: bucket.bucket,
                Key: objectKey(key),
                // Never a suffix range (bytes=-N): some emulators get it wrong, and the route
                // has already turned one into start-end against the size.
                ...(range === undefined ? {} : { Range: `bytes=${range.start}-${range.end}` })
              }),
              { abortSignal }
            ),
          catch: (cause) =>
            new MediaError({ message: isMissing(cause) ? `no file ${key}` : `cannot read ${key}: ${describe(cause).message}`, cause })
        })
        const body = answer.Body as AsyncIterable<Uint8Array> | undefined
        if (body === undefined) return yield* Effect.fail(new MediaError({ message: `cannot read ${key}: no body` }))
        const bytes = Stream.fromAsyncIterable(body, (cause) => new MediaError({ message: `cannot read ${key}`, cause }))
        if (range === undefined) return bytes
        // Trust what came back, not what was asked: a store that ignored the range answers the
        // whole file (200, no Content-Range), and s3rver answers all of it for bytes=0-0.
        const start = answer.ContentRange === undefined ? 0 : rangeStart(answer.ContentRange)
        if (start === undefined || start > range.start) {
          return yield* Effect.fail(new MediaError({ message: `cannot read ${key}: the store answered ${answer.ContentRange} for bytes ${range.start}-${range.end}` }))
        }
        return slice(bytes, range.start - start, range.end - range.start + 1)
      })
    )

  const upload = (key: string, bytes: Uint8Array) =>
    send(
      (abortSignal) =>
        client.send(
          new PutObjectCommand({
            Bucket: bucket.bucket,
            Key: objectKey(key),
            Body: bytes,
            ContentLength: bytes.length,
            ContentType: Option.getOrThrow(MediaStore.parseKey(key)).contentType
          }),
          { abortSignal }
        ),
      `cannot write ${key} to bucket ${bucket.bucket}`
    )

  // With a retention, storing the same bytes again must renew the object's age (its
  // LastModified), as the file store renews a file's time: a URL just handed out is never
  // already expiring. It is uploaded again (CopyObject onto itself would do on AWS, but not
  // on every S3-compatible store); a minute's slack spares bursts of the same bytes.
  const renewAfter = options.retention === undefined ? undefined : Duration.toMillis(Duration.min(Duration.decode(options.retention), Duration.minutes(1)))

  return {
    put: ({ bytes, extension }) =>
      Effect.gen(function*() {
        const key = yield* MediaStore.keyOf(bytes, extension, NodeDigest.sha256)
        const url = `${base}/${key}`
        return yield* Effect.gen(function*() {
          const found = yield* head(key)
          if (Option.isSome(found) && found.value.size === bytes.length) {
            if (renewAfter === undefined || (yield* Clock.currentTimeMillis) - found.value.lastModified < renewAfter) return url
          }
          yield* upload(key, bytes)
          return url
        }).pipe(Effect.tapError(warn(key)))
      }),
    get: (key) =>
      Option.isNone(MediaStore.parseKey(key)) ? Effect.succeedNone : Stream.runCollect(read(key)).pipe(
        Effect.map((chunks) => {
          const parts = Array.from(chunks)
          const bytes = new Uint8Array(parts.reduce((total, part) => total + part.length, 0))
          parts.reduce((offset, part) => (bytes.set(part, offset), offset + part.length), 0)
          return Option.some({ bytes, contentType: Option.getOrThrow(MediaStore.parseKey(key)).contentType })
        }),
        Effect.catchAll((error) => isMissing(error.cause) ? Effect.succeedNone : Effect.fail(error)),
        Effect.tapError(warn(key))
      ),
    stat: (key) =>
      Option.match(MediaStore.parseKey(key), {
        onNone: () => Effect.succeedNone,
        onSome: ({ contentType, hash }) =>
          head(key).pipe(
            Effect.map(Option.map(({ size }) => ({ contentType, hash, size }))),
            Effect.tapError(warn(key))
          )
      }),
    stream: (key, range) =>
      Option.isNone(MediaStore.parseKey(key))
        ? Stream.fail(new MediaError({ message: `no file ${key}` }))
        : Stream.suspend(() => read(key, range)),
    ...streamUploads(bucket, base, options.spoolDirectory),
    ...(options.redirect === undefined ? {} : { redirect: options.redirect })
  }
}

/**
 * Presigned GET URLs of the bucket's objects, valid `expiry` from the Clock's now, cached
 * for half of that. The presigner is an optional peer, loaded only here.
 */
export const presigner = (
  bucket: Bucket,
  expiry: Duration.DurationInput
): Effect.Effect<(key: string) => Effect.Effect<MediaStore.MediaRedirect, MediaError>, MediaError> =>
  Effect.map(
    Effect.tryPromise({
      try: () => import("@aws-sdk/s3-request-presigner"),
      catch: (cause) => new MediaError({ message: "presigned media URLs need @aws-sdk/s3-request-presigner installed", cause })
    }),
    ({ getSignedUrl }) => {
      const seconds = Math.max(2, Math.floor(Duration.toSeconds(expiry)))
      return (key: string) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          send(
            () =>
              getSignedUrl(bucket.client, new GetObjectCommand({ Bucket: bucket.bucket, Key: `${bucket.prefix}${key}` }), {
                expiresIn: seconds,
                signingDate: new Date(now)
              }),
            `cannot presign ${key}`
          )).pipe(Effect.map((url) => ({ url, maxAge: Math.floor(seconds / 2) })))
    }
  )

/** Names under the prefix that `sweep` may delete: our keys, nothing else in the bucket. */
const sweepable = /^[0-9a-f]{32}\.[a-z0-9]+$/

/** DeleteObjects takes at most this many keys. */
const deleteBatch = 1000

/**
 * Deletes the objects under the prefix last stored more than `retention` ago (by the Clock,
 * against their LastModified) and returns how many went. A key the store refuses to delete is
 * logged with its name and left.
 */
export const sweep = (bucket: Bucket & { readonly retention: Duration.DurationInput }): Effect.Effect<number, MediaError> =>
  Effect.gen(function*() {
    const cutoff = (yield* Clock.currentTimeMillis) - Duration.toMillis(bucket.retention)
    const expired: Array<string> = []
    let token: string | undefined = undefined
    do {
      const page = yield* send(
        (abortSignal) =>
          bucket.client.send(
            new ListObjectsV2Command({
              Bucket: bucket.bucket,
              ...(bucket.prefix === "" ? {} : { Prefix: bucket.prefix }),
              ...(token === undefined ? {} : { ContinuationToken: token })
            }),
            { abortSignal }
          ),
        `cannot list bucket ${bucket.bucket}`
      )
      for (const object of page.Contents ?? []) {
        const name = (object.Key ?? "").slice(bucket.prefix.length)
        if (sweepable.test(name) && object.LastModified !== undefined && object.LastModified.getTime() < cutoff) expired.push(object.Key!)
      }
      token = page.IsTruncated === true ? page.NextContinuationToken : undefined
    } while (token !== undefined)
    let count = 0
    for (let index = 0; index < expired.length; index += deleteBatch) {
      const keys = expired.slice(index, index + deleteBatch)
      const answer = yield* send(
        (abortSignal) =>
          bucket.client.send(
            new DeleteObjectsCommand({ Bucket: bucket.bucket, Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true } }),
            { abortSignal }
          ),
        `cannot delete expired files in bucket ${bucket.bucket}`
      )
      for (const error of answer.Errors ?? []) {
        yield* Effect.logWarning(`mediagate: cannot delete an expired media file: ${error.Code ?? ""} ${error.Message ?? ""}`).pipe(
          Effect.annotateLogs({ file: error.Key ?? "" })
        )
      }
      count += keys.length - (answer.Errors ?? []).length
    }
    if (count > 0) yield* Effect.logInfo(`mediagate: deleted ${count} expired media file(s)`)
    return count
  })

/**
 * A client for `options`, closed with the scope, after HeadBucket has answered: a wrong
 * bucket, endpoint or credentials fail here, with one line, rather than at the first file.
 */
export const acquireClient = (options: Location & { readonly client: ClientOptions }): Effect.Effect<Bucket, MediaError, Scope.Scope> =>
  Effect.acquireRelease(Effect.sync(() => makeClient(options.client)), (client) => Effect.sync(() => client.destroy())).pipe(
    Effect.map((client) => ({ client, bucket: options.bucket, prefix: options.prefix })),
    Effect.tap((bucket) => checkBucket(bucket, options.client.endpoint))
  )

/** The client and the store over it. */
const build = (options: Options) =>
  Effect.gen(function*() {
    const bucket = yield* acquireClient(options)
    const redirect = options.serve === "presigned" ? yield* presigner(bucket, options.presignedExpiry ?? Duration.hours(1)) : undefined
    const store = makeWith(bucket, {
      baseUrl: options.baseUrl,
      ...(options.retention === undefined ? {} : { retention: options.retention }),
      ...(redirect === undefined ? {} : { redirect }),
      ...(options.spoolDirectory === undefined ? {} : { spoolDirectory: options.spoolDirectory })
    })
    return { bucket, store }
  })

/** A MediaStore in the bucket of `options` (without the sweep: see `layerWith` and `sweep`). */
export const make = (options: Options): Effect.Effect<Context.Tag.Service<MediaStore.MediaStore>, MediaError, Scope.Scope> =>
  Effect.map(build(options), ({ store }) => store)

/**
 * The S3 MediaStore. When the layer starts it deletes the spool files a crash left
 * (`S3Upload.sweepSpool`). With a `retention`, a sweep runs when the layer starts and then every
 * `sweepInterval` for as long as the layer's scope is open; a failed sweep is logged and
 * tried again at the next interval.
 */
export const layerWith = (options: Options): Layer.Layer<MediaStore.MediaStore, MediaError> =>
  Layer.scoped(
    MediaStore.MediaStore,
    Effect.gen(function*() {
      const { bucket, store } = yield* build(options)
      yield* sweepSpool(options.spoolDirectory)
      const { retention } = options
      if (retention !== undefined) {
        const interval = options.sweepInterval ?? Duration.min(Duration.decode(retention), Duration.hours(1))
        yield* sweep({ ...bucket, retention }).pipe(
          Effect.catchAll((error) => Effect.logWarning("mediagate: the sweep of expired media files failed", error)),
          Effect.zipRight(Effect.sleep(interval)),
          Effect.forever,
          Effect.forkScoped
        )
      }
      return store
    })
  )

/** The S3 MediaStore layer: `layerWith`, under the name the other stores use. */
export const layer: (options: Options) => Layer.Layer<MediaStore.MediaStore, MediaError> = layerWith
