/**
 * Uploaded input files (issue 36): a client's file streamed into the MediaStore under a random
 * key, its type decided by its first bytes, checked whole as it streams past
 * (`UploadInspection`), probed (`MediaProbe`) and recorded in `Uploads`; read and deleted by
 * its owner; swept once past its expiry and its pins. Deleting one a running task pins ends it
 * at once and leaves its file to the sweep (docs/decisions.md).
 */
import { Clock, Context, Duration, Effect, Layer, Option, Schedule, Schema, Sink, Stream } from "effect"
import type { MediaError, StoreError } from "../domain/Errors.js"
import { Ids } from "../domain/Ids.js"
import type { Account } from "../services/Accounts.js"
import * as MediaProbe from "../services/MediaProbe.js"
import { MediaStore } from "../services/MediaStore.js"
import type { UploadRecord } from "../services/Uploads.js"
import { Uploads } from "../services/Uploads.js"
import * as Inspection from "./UploadInspection.js"
import { spanned } from "./SpanOptions.js"

/** The settings of uploads. */
export interface Settings {
  /** Largest upload in bytes. */
  readonly maxBytes: number
  /** How long an upload lives. */
  readonly retention: Duration.Duration
}

/**
 * 50 MB: the most mediagate fetches of any media URL (SafeFetch's limit), so no upload is
 * larger than a URL input could be; 24 hours, as the providers' temporary storage.
 */
export const defaults: Settings = { maxBytes: 50_000_000, retention: Duration.hours(24) }

export class FilesSettings extends Context.Reference<FilesSettings>()("@mediagate/core/FilesSettings", {
  defaultValue: (): Settings => defaults
}) {}

/** An upload refused: 400 (unreadable), 413 (too large) or 415 (a type no model takes); the message says why. */
export class UploadRefused extends Schema.TaggedError<UploadRefused>()("UploadRefused", {
  status: Schema.Literal(400, 413, 415),
  message: Schema.String
}) {}

/** No upload of this id for this account, or one past its expiry. */
export class UploadNotFound extends Schema.TaggedError<UploadNotFound>()("UploadNotFound", {
  fileId: Schema.String
}) {}

/** The formats an upload may be: the images every image input takes, and the videos of motion's materials. */
export const allowed: ReadonlyArray<MediaProbe.Format> = ["jpeg", "png", "webp", "mp4", "mov"]

/** The MediaStore extension of each allowed format. */
const extensions: Partial<Record<MediaProbe.Format, string>> = { jpeg: "jpg", png: "png", webp: "webp", mp4: "mp4", mov: "mov" }

const allowedText = "JPEG, PNG or WebP images, MP4 or MOV videos"

/** What a file that is none of the allowed formats looks like, for the 415's message. */
export const describe = (head: Uint8Array): string => {
  const format = MediaProbe.sniff(head)
  if (format !== undefined) {
    const { kind, name } = MediaProbe.formats[format]
    return `${kind === "image" ? "a" : "an"} ${name} ${kind}`
  }
  if (head.length === 0) return "an empty body"
  const sample = head.subarray(0, 512)
  const text = sample.every((byte) => byte === 9 || byte === 10 || byte === 13 || byte >= 32)
  return text ? "text" : "data of an unknown type"
}

/** Most bytes of a movie header read back from the store to probe a video (its whole moov box). */
export const maxMovieHeader = 16 * 1024 * 1024

/** The upload id: `file_` and 24 hex characters. */
const idPattern = /^file_[0-9a-f]{24}$/

/** The first chunks of `body` until they hold `bytes` (all of it when shorter), joined, and the rest of it. */
const peel = <E>(body: Stream.Stream<Uint8Array, E>, bytes: number) =>
  Effect.map(
    Stream.peel(
      body,
      Sink.fold<Array<Uint8Array>, Uint8Array>([], (chunks) => chunks.reduce((sum, chunk) => sum + chunk.length, 0) < bytes, (chunks, chunk) => [...chunks, chunk])
    ),
    ([chunks, rest]) => {
      const head = new Uint8Array(chunks.reduce((sum, chunk) => sum + chunk.length, 0))
      chunks.reduce((offset, chunk) => (head.set(chunk, offset), offset + chunk.length), 0)
      return [head, rest] as const
    }
  )

export interface FilesService {
  /** The settings it was made with. */
  readonly settings: Settings
  /** Stores `body` as `account`'s upload: the record made, or why it was refused (nothing stored then). */
  readonly upload: <E>(account: Account, body: Stream.Stream<Uint8Array, E>) => Effect.Effect<UploadRecord, UploadRefused | MediaError | StoreError | E>
  /** `account`'s upload of this id, not past its expiry. */
  readonly get: (account: Account, fileId: string) => Effect.Effect<UploadRecord, UploadNotFound | StoreError>
  /**
   * Deletes `account`'s upload: not found from then on (expired at once), its file deleted now,
   * or once past the deadlines of the tasks that use it (the sweep); the upload as it is then.
   */
  readonly remove: (account: Account, fileId: string) => Effect.Effect<UploadRecord, UploadNotFound | StoreError | MediaError>
  /**
   * Whether the file under this MediaStore key is an upload past its expiry and past the
   * deadlines of the tasks that use it (its URL answers 404): a provider running such a task
   * fetches the URL from our public address, until the task's end.
   */
  readonly expiredMedia: (key: string) => Effect.Effect<boolean, StoreError>
  /** Deletes the files of up to `limit` uploads past their expiry and pins, and marks them deleted; how many. */
  readonly sweep: (limit: number) => Effect.Effect<number, StoreError | MediaError>
}

export class Files extends Context.Tag("@mediagate/core/Files")<Files, FilesService>() {}

export const make: Effect.Effect<FilesService, never, Uploads | MediaStore | MediaProbe.MediaProbe | Ids> = Effect.gen(function*() {
  const uploads = yield* Uploads
  const store = yield* MediaStore
  const probe = yield* MediaProbe.MediaProbe
  const ids = yield* Ids
  // The settings in context when the service is made (a host's layer of FilesSettings).
  const { maxBytes, retention } = yield* FilesSettings
  const removeFile = (key: string) => (store.remove === undefined ? Effect.void : store.remove(key))
  const refused = (status: 400 | 413 | 415, message: string) => new UploadRefused({ status, message })

  /** The ftyp and moov boxes of a stored video, read back by range: what the probe needs of it. */
  const movieHeader = (key: string, inspector: Inspection.Inspector) =>
    Effect.gen(function*() {
      const moov = inspector.boxes.find((box) => box.type === "moov")!
      if (moov.size > maxMovieHeader) return yield* refused(400, `the movie header is larger than ${maxMovieHeader} bytes`)
      const head = inspector.headBytes()
      const ftyp = inspector.boxes[0]?.type === "ftyp" && inspector.boxes[0].size <= head.length ? head.subarray(0, inspector.boxes[0].size) : new Uint8Array(0)
      const chunks: Array<Uint8Array> = []
      yield* Stream.runForEach(
        store.stream(key, { start: moov.offset, end: moov.offset + moov.size - 1 }),
        (chunk) => Effect.sync(() => chunks.push(chunk))
      )
      const out = new Uint8Array(ftyp.length + moov.size)
      out.set(ftyp, 0)
      chunks.reduce((offset, chunk) => (out.set(chunk, offset), offset + chunk.length), ftyp.length)
      return { bytes: out, moov: out.subarray(ftyp.length) }
    })

  /** Width, height and duration of a stored file the inspector saw whole; 400 for one the probe cannot read. */
  const measure = (key: string, format: MediaProbe.Format, inspector: Inspection.Inspector) =>
    Effect.gen(function*() {
      const cut = Inspection.truncation(format, inspector)
      if (cut !== undefined) return yield* refused(400, cut)
      if (MediaProbe.formats[format].kind === "image") {
        const head = inspector.headBytes()
        // The whole image when it is small, else its head: the probe reads the header.
        yield* probe.probe(head)
        const size = Inspection.imageSize(format, head)
        if (size === undefined) return yield* refused(400, `the ${MediaProbe.formats[format].name} file does not give its size`)
        return { ...size, durationSeconds: null }
      }
      const header = yield* movieHeader(key, inspector)
      const found = yield* probe.probe(header.bytes)
      const size = Inspection.movieSize(header.moov)
      return { width: size?.width ?? null, height: size?.height ?? null, durationSeconds: found.durationSeconds ?? null }
    }).pipe(
      Effect.catchTag("MediaProbeError", (error) => Effect.fail(refused(error.reason === "Unsupported" ? 415 : 400, error.message)))
    )

  const upload = <E>(account: Account, body: Stream.Stream<Uint8Array, E>) =>
    Effect.scoped(Effect.gen(function*() {
      if (store.putStream === undefined) return yield* Effect.die(new Error("this media store cannot take uploads (no putStream)"))
      // The first bytes decide the type and the key's extension before the rest is read.
      const [head, rest] = yield* peel(body, 64)
      if (head.length === 0) return yield* refused(400, "the body is empty: send the file as the body, or as the field 'file' of multipart/form-data")
      const format = MediaProbe.sniff(head)
      if (format === undefined || !allowed.includes(format)) {
        return yield* refused(415, `the file is ${describe(head)}; an upload may be ${allowedText}`)
      }
      const key = `${yield* ids.token(16)}.${extensions[format]}`
      const inspector = new Inspection.Inspector(MediaProbe.formats[format].kind === "video")
      inspector.see(head)
      // The head goes first, as it came; the rest is watched as it streams past.
      const stream = Stream.concat(Stream.make(head), Stream.tap(rest, (chunk) => Effect.sync(() => inspector.see(chunk))))
      const stored = yield* store.putStream({ key, maxBytes, stream }).pipe(
        Effect.catchTag("MediaTooLarge", () => Effect.fail(refused(413, `the file is larger than ${maxBytes} bytes, the most an upload may be`)))
      )
      const measured = yield* measure(key, format, inspector).pipe(Effect.tapError(() => removeFile(key)))
      const now = yield* Clock.currentTimeMillis
      const record: UploadRecord = {
        id: `file_${yield* ids.token(12)}`,
        ownerId: account.id,
        keyId: account.keyId ?? null,
        mediaKey: key,
        url: stored.url,
        contentType: MediaProbe.formats[format].contentType,
        bytes: stored.size,
        width: measured.width,
        height: measured.height,
        durationSeconds: measured.durationSeconds,
        createdAt: now,
        expiresAt: now + Duration.toMillis(retention),
        pinnedUntil: null
      }
      yield* uploads.create(record).pipe(Effect.tapError(() => removeFile(key)))
      return record
    })).pipe(spanned("Files.upload"))

  const live = (fileId: string, found: Option.Option<UploadRecord>) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Option.isSome(found) && found.value.expiresAt > now ? Effect.succeed(found.value) : Effect.fail(new UploadNotFound({ fileId })))

  const get = (account: Account, fileId: string) =>
    idPattern.test(fileId) ? Effect.flatMap(uploads.getOwned(fileId, account.id), (found) => live(fileId, found)) : Effect.fail(new UploadNotFound({ fileId }))

  /**
   * The file first, then the mark: a marked upload is found by no lookup, the sweep included,
   * so a file whose deletion failed stays under an unmarked, expired upload and is swept again.
   */
  const discard = (upload: UploadRecord, now: number) =>
    Effect.zipRight(removeFile(upload.mediaKey), uploads.delete(upload.id, upload.ownerId, now))

  const remove = (account: Account, fileId: string) =>
    Effect.gen(function*() {
      // The upload as it was, which DELETE answers; an expired one is not found here either.
      const found = yield* get(account, fileId)
      const now = yield* Clock.currentTimeMillis
      // Expired now, in one write: GET, a second DELETE and a new submit see it gone, as they
      // see an expired upload; of two DELETEs at once the second finds nothing to expire.
      const ended = yield* uploads.expire(fileId, account.id, now)
      if (Option.isNone(ended)) return yield* new UploadNotFound({ fileId })
      // A task accepted with it may still have its provider fetch it: a pinned upload's file
      // stays served to the latest pin, then the sweep deletes it.
      if ((ended.value.pinnedUntil ?? 0) <= now) yield* discard(ended.value, now)
      return found
    })

  const expiredMedia = (key: string) =>
    Effect.flatMap(uploads.byMediaKey(key), (found) =>
      Option.isNone(found)
        ? Effect.succeed(false)
        : Effect.map(Clock.currentTimeMillis, (now) => found.value.expiresAt <= now && (found.value.pinnedUntil ?? 0) <= now))

  const sweep = (limit: number) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const due = yield* uploads.expired(now, limit)
      for (const upload of due) yield* discard(upload, now)
      return due.length
    })

  return { settings: { maxBytes, retention }, upload, get, remove, expiredMedia, sweep }
})

export const layer: Layer.Layer<Files, never, Uploads | MediaStore | MediaProbe.MediaProbe | Ids> = Layer.effect(Files, make)

/** How often the sweep runs, and how many uploads it deletes at most per batch. */
export const sweepInterval = Duration.minutes(5)
const sweepBatch = 100

/**
 * The sweep, forked for the layer's lifetime: every `interval` (default 5 minutes, by the
 * Clock; nothing else wakes it), deletes the uploads past their expiry and pins, in batches
 * until none is left. A failure is logged and waits for the next round.
 */
export const sweepLayer = (interval: Duration.DurationInput = sweepInterval): Layer.Layer<never, never, Files> =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const files = yield* Files
    const round = Effect.iterate(sweepBatch, { while: (deleted) => deleted === sweepBatch, body: () => files.sweep(sweepBatch) }).pipe(
      Effect.catchAll((error) => Effect.logWarning("mediagate: the upload sweep failed; it runs again later", error))
    )
    yield* Effect.forkScoped(Effect.repeat(Effect.delay(round, interval), Schedule.forever))
  }))
