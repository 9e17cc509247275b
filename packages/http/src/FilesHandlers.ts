/**
 * Handlers of the files endpoints (`FilesApi`): an upload's body, raw or the one `file` field
 * of multipart/form-data (@effect/platform's Multipart, streamed), goes to the use case
 * (`Files`) as a stream, while it progresses (`RequestTimeouts.readUpload`), after the key's own
 * upload rate (`UploadRateLimit`, per API key). A composition without `Files` (no `Uploads` backend)
 * answers 404 on these paths, as for an unknown route.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Multipart from "@effect/platform/Multipart"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import type { Uploads } from "@mediagate/core"
import { Accounts, Api, Files, FilesApi, MediaError } from "@mediagate/core"
import { Clock, Context, Effect, Layer, Option, Stream } from "effect"
import { answerErrors, envelope } from "./EnvelopeMiddleware.js"
import { notFoundMessage } from "./Paths.js"
import * as RateLimit from "./RateLimit.js"
import * as RequestTimeouts from "./RequestTimeouts.js"
import * as TokenBuckets from "./TokenBuckets.js"

/** Uploads a second per API key and the burst; none: no limit of their own. */
export type UploadRate = Option.Option<{ readonly perSecond: number; readonly burst: number }>

/** The default upload rate: one a second on average, ten at once. */
export const defaultUploadRate: UploadRate = Option.some({ perSecond: 1, burst: 10 })

/**
 * The upload rate per API key (`Account.keyId`; the account's id for an account known without
 * one), so each key of an account has its own budget; `defaultUploadRate` unless the host provides one.
 */
export class UploadRateLimit extends Context.Reference<UploadRateLimit>()("@mediagate/http/UploadRateLimit", {
  defaultValue: (): UploadRate => defaultUploadRate
}) {}

/** The bucket of an upload's rate: its key's, or its account's where the key is not known (keys given as configuration). */
const uploadBucket = (account: Accounts.Account) => (account.keyId === undefined ? `account ${account.id}` : `key ${account.keyId}`)

/** An upload as the endpoints show it. */
export const uploadWire = (upload: Uploads.UploadRecord): typeof FilesApi.Upload.Type => ({
  fileId: upload.id,
  url: upload.url,
  contentType: upload.contentType,
  bytes: upload.bytes,
  width: upload.width,
  height: upload.height,
  durationSeconds: upload.durationSeconds,
  expiresAt: new Date(upload.expiresAt).toISOString()
})

const badRequest = (msg: string) => new Api.BadRequest({ code: 400, msg })

const isMultipart = (contentType: string | undefined) => contentType !== undefined && /^multipart\/form-data\s*;/i.test(contentType.trim())

/** How much a multipart body may be over the file's limit: its boundaries and part headers. */
const multipartOverhead = 64 * 1024

/**
 * The file's bytes: the body itself, or the content of the one file field `file` of a
 * multipart body (other fields are skipped; a second `file` is 400).
 */
const fileStream = (request: HttpServerRequest.HttpServerRequest): Stream.Stream<Uint8Array, Api.BadRequest> => {
  if (!isMultipart(request.headers["content-type"])) {
    return Stream.mapError(request.stream, () => badRequest("the request body could not be read"))
  }
  let files = 0
  const unreadable = (error: Multipart.MultipartError) => badRequest(`the multipart body could not be read: ${error.reason}`)
  return request.multipartStream.pipe(
    Stream.mapError(unreadable),
    Stream.flatMap((part): Stream.Stream<Uint8Array, Api.BadRequest> => {
      if (!Multipart.isFile(part)) return Stream.empty
      if (part.key !== "file") return Stream.drain(Stream.mapError(part.content, unreadable))
      files += 1
      return files === 1 ? Stream.mapError(part.content, unreadable) : Stream.fail(badRequest("the multipart body has more than one field 'file'"))
    }),
    Stream.concat(Stream.suspend(() => files === 0 ? Stream.fail(badRequest("the multipart body has no file field 'file'")) : Stream.empty))
  )
}

const notFound = (error: Files.UploadNotFound) => new Api.NotFound({ code: 404, msg: `file not found: ${error.fileId.slice(0, 64)}` })

/** The media store failed: logged, and 503 with Retry-After (the envelope adds it), never why. */
const mediaUnavailable = <A, E, R>(effect: Effect.Effect<A, E | MediaError, R>): Effect.Effect<A, Exclude<E, MediaError> | Api.ServiceUnavailable, R> =>
  Effect.catchIf(
    effect,
    (error): error is MediaError => error instanceof MediaError,
    (error) =>
      Effect.zipRight(
        Effect.logWarning("mediagate: the media store failed during an upload request; answered 503", error),
        Effect.fail(new Api.ServiceUnavailable({ code: 503, msg: "media storage is unavailable; try again later" }))
      )
  ) as Effect.Effect<A, Exclude<E, MediaError> | Api.ServiceUnavailable, R>

const refusedAnswer = (error: Files.UploadRefused) =>
  error.status === 413
    ? new Api.PayloadTooLarge({ code: 413, msg: error.message })
    : error.status === 415
    ? new Api.UnsupportedMediaType({ code: 415, msg: error.message })
    : badRequest(error.message)

/** The handlers of the "files" group. */
export const filesLayer: Layer.Layer<HttpApiGroup.ApiGroup<"mediagate", "files">, never, Api.Authorization> = HttpApiBuilder.group(
  Api.MediagateApi,
  "files",
  (handlers) =>
    Effect.gen(function*() {
      const found = yield* Effect.serviceOption(Files.Files)
      const rate = yield* UploadRateLimit
      const buckets = Option.map(rate, ({ burst, perSecond }) => TokenBuckets.make({ perSecond, burst, maxKeys: 10_000 }))
      /** Runs `use` with the files service; 404 as an unknown path where the composition has none. */
      const withFiles = <A, E, R>(
        use: (files: Files.FilesService) => Effect.Effect<A, E, R>
      ): Effect.Effect<A, E | Api.NotFound, R | HttpServerRequest.HttpServerRequest> =>
        Option.isSome(found)
          ? use(found.value)
          : Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => Effect.fail(new Api.NotFound({ code: 404, msg: notFoundMessage(request.url) })))
      return handlers
        .handleRaw("upload", ({ request }) =>
          Option.isNone(found) ? Effect.succeed(envelope(404, notFoundMessage(request.url))) : Effect.succeed(found.value).pipe(Effect.flatMap((files) =>
            Effect.gen(function*() {
              const account = yield* Accounts.CurrentAccount
              if (Option.isSome(buckets)) {
                const decision = buckets.value.take(uploadBucket(account), yield* Clock.currentTimeMillis)
                if (decision._tag === "Limited") {
                  const seconds = RateLimit.retryAfterSeconds(decision.retryAfterMs)
                  return envelope(429, `too many uploads for this API key (at most ${rate.pipe(Option.map((r) => r.perSecond), Option.getOrElse(() => 0))} a second); slow down`, undefined, {
                    "retry-after": String(seconds)
                  })
                }
              }
              const { maxBytes } = files.settings
              const declared = Number(request.headers["content-length"] ?? "0")
              const margin = isMultipart(request.headers["content-type"]) ? multipartOverhead : 0
              if (declared > maxBytes + margin) {
                return yield* Effect.fail(new Api.PayloadTooLarge({ code: 413, msg: `the file is larger than ${maxBytes} bytes, the most an upload may be` }))
              }
              const upload = yield* RequestTimeouts.readUpload(
                (progress) => files.upload(account, Stream.tap(fileStream(request), () => progress)),
                RequestTimeouts.bodyTooSlow
              )
              return envelope(0, "ok", uploadWire(upload))
            }).pipe(Effect.catchTag("UploadRefused", (error) => Effect.fail(refusedAnswer(error))))
          ), mediaUnavailable, answerErrors))
        .handle("file", ({ path }) =>
          withFiles((files) =>
            Effect.gen(function*() {
              const account = yield* Accounts.CurrentAccount
              return Api.ok(uploadWire(yield* files.get(account, path.fileId)))
            }).pipe(Effect.catchTag("UploadNotFound", (error) => Effect.fail(notFound(error))))
          ).pipe(answerErrors))
        .handle("deleteFile", ({ path }) =>
          withFiles((files) =>
            Effect.gen(function*() {
              const account = yield* Accounts.CurrentAccount
              return Api.ok(uploadWire(yield* files.remove(account, path.fileId)))
            }).pipe(Effect.catchTag("UploadNotFound", (error) => Effect.fail(notFound(error))))
          ).pipe(mediaUnavailable, answerErrors))
    })
)
