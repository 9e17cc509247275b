/**
 * MediaProbe without ffmpeg: the format from the bytes' magic numbers (core), images checked
 * by their headers (sharp, and by hand for BMP, which sharp does not read), video and audio
 * read by music-metadata. A movie's duration is its movie header's (moov/mvhd): music-metadata
 * only times audio tracks, and a video without sound has none.
 */
import { MediaProbe, SafeFetch, spanned } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer } from "effect"
import * as OnFirstUse from "./internal/OnFirstUse.js"

/** The content type music-metadata chooses its parser by: every ISO BMFF brand is read by the same one. */
const parserTypes: Partial<Record<MediaProbe.Format, string>> = {
  mp4: "video/mp4",
  mov: "video/mp4",
  m4v: "video/mp4",
  mp3: "audio/mpeg",
  wav: "audio/wav"
}

const corrupt = (format: MediaProbe.Format, problem: string) =>
  new MediaProbe.MediaProbeError({ reason: "Corrupt", message: `corrupt ${MediaProbe.formats[format].name} file: ${problem}` })

const problemOf = (cause: unknown) => cause instanceof Error ? cause.message : String(cause)

/** An ISO BMFF box: its type and where its body lies. */
interface Box {
  readonly type: string
  readonly start: number
  readonly end: number
}

/** The boxes between `start` and `end`; stops at the first box whose size does not fit. */
const boxes = (view: DataView, start: number, end: number): ReadonlyArray<Box> => {
  const found: Array<Box> = []
  let at = start
  while (at + 8 <= end) {
    const size32 = view.getUint32(at)
    const type = String.fromCharCode(view.getUint8(at + 4), view.getUint8(at + 5), view.getUint8(at + 6), view.getUint8(at + 7))
    const header = size32 === 1 ? 16 : 8
    if (at + header > end) break
    // 1: a 64-bit size follows the type; 0: the box runs to the end of its parent.
    const size = size32 === 1 ? Number(view.getBigUint64(at + 8)) : size32 === 0 ? end - at : size32
    if (size < header || at + size > end) break
    found.push({ type, start: at + header, end: at + size })
    at += size
  }
  return found
}

const child = (view: DataView, parent: Box, type: string) => boxes(view, parent.start, parent.end).find((box) => box.type === type)
const version = (view: DataView, box: Box) => view.getUint8(box.start)
const flags = (view: DataView, box: Box) => view.getUint32(box.start) & 0xffffff
/** A full box's 32-bit field at `offset` in version 0, or the one it moved to in version 1. */
const field32 = (view: DataView, box: Box, offset0: number, offset1: number) =>
  view.getUint32(box.start + (version(view, box) === 1 ? offset1 : offset0))
/** A full box's time: 32 bits at `offset0` in version 0, 64 at `offset1` in version 1. */
const time = (view: DataView, box: Box, offset0: number, offset1: number) =>
  version(view, box) === 1 ? view.getBigUint64(box.start + offset1) : BigInt(view.getUint32(box.start + offset0))

/**
 * Seconds of a fragmented movie, whose header says 0: the latest end of any track's samples,
 * each track in its own timescale. A fragment starts at its decode time (tfdt) or where the
 * track's previous one ended; its samples last what its runs (trun) say, or their defaults.
 */
const fragmentedSeconds = (view: DataView, top: ReadonlyArray<Box>, moov: Box): number | undefined => {
  const timescales = new Map<number, number>()
  const defaultDurations = new Map<number, number>()
  for (const box of boxes(view, moov.start, moov.end)) {
    const tkhd = box.type === "trak" ? child(view, box, "tkhd") : undefined
    const mdia = box.type === "trak" ? child(view, box, "mdia") : undefined
    const mdhd = mdia === undefined ? undefined : child(view, mdia, "mdhd")
    if (tkhd !== undefined && mdhd !== undefined) timescales.set(field32(view, tkhd, 12, 20), field32(view, mdhd, 12, 20))
    if (box.type === "mvex") {
      for (const trex of boxes(view, box.start, box.end)) {
        if (trex.type === "trex") defaultDurations.set(view.getUint32(trex.start + 4), view.getUint32(trex.start + 12))
      }
    }
  }
  const ends = new Map<number, number>()
  for (const moof of top.filter((box) => box.type === "moof")) {
    for (const traf of boxes(view, moof.start, moof.end).filter((box) => box.type === "traf")) {
      const tfhd = child(view, traf, "tfhd")
      if (tfhd === undefined) continue
      const track = view.getUint32(tfhd.start + 4)
      const tfhdFlags = flags(view, tfhd)
      // Optional fields in order: base data offset (64 bits), sample description index, default duration.
      const durationAt = tfhd.start + 8 + (tfhdFlags & 0x1 ? 8 : 0) + (tfhdFlags & 0x2 ? 4 : 0)
      const defaultDuration = tfhdFlags & 0x8 ? view.getUint32(durationAt) : defaultDurations.get(track) ?? 0
      const tfdt = child(view, traf, "tfdt")
      let end = tfdt === undefined ? ends.get(track) ?? 0 : Number(time(view, tfdt, 4, 4))
      for (const trun of boxes(view, traf.start, traf.end).filter((box) => box.type === "trun")) {
        const trunFlags = flags(view, trun)
        const count = view.getUint32(trun.start + 4)
        if (!(trunFlags & 0x100)) {
          end += count * defaultDuration
          continue
        }
        // Per sample, the fields present among duration, size, flags and composition offset.
        const stride = [0x100, 0x200, 0x400, 0x800].filter((bit) => trunFlags & bit).length * 4
        let at = trun.start + 8 + (trunFlags & 0x1 ? 4 : 0) + (trunFlags & 0x4 ? 4 : 0)
        for (let sample = 0; sample < count && at + 4 <= trun.end; sample++, at += stride) end += view.getUint32(at)
      }
      ends.set(track, Math.max(ends.get(track) ?? 0, end))
    }
  }
  const seconds = [...ends].map(([track, end]) => end / (timescales.get(track) ?? 0)).filter(Number.isFinite)
  return seconds.length === 0 ? undefined : Math.max(...seconds)
}

/**
 * Seconds of the movie by its header (mvhd); for a fragmented file, whose header may say 0,
 * by its movie extends header (mvex/mehd), else by its fragments. Undefined when none says.
 * Throws a RangeError when a box is shorter than its fields.
 */
const movieSeconds = (bytes: Uint8Array): number | undefined => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const top = boxes(view, 0, bytes.length)
  const moov = top.find((box) => box.type === "moov")
  const mvhd = moov === undefined ? undefined : child(view, moov, "mvhd")
  if (moov === undefined || mvhd === undefined) return undefined
  const timescale = field32(view, mvhd, 12, 20)
  const duration = time(view, mvhd, 16, 24)
  if (timescale === 0) return undefined
  // All ones means "unknown" (a file written as it was recorded).
  if (duration > 0n && duration !== (version(view, mvhd) === 1 ? 0xffffffffffffffffn : 0xffffffffn)) {
    return Number(duration) / timescale
  }
  const mvex = child(view, moov, "mvex")
  const mehd = mvex === undefined ? undefined : child(view, mvex, "mehd")
  const extended = mehd === undefined ? 0n : time(view, mehd, 4, 4)
  return extended > 0n ? Number(extended) / timescale : fragmentedSeconds(view, top, moov)
}

/** Seconds of a video or audio file; fails when its structure does not read or it says no duration. */
const durationOf = (format: MediaProbe.Format, bytes: Uint8Array): Effect.Effect<number, MediaProbe.MediaProbeError> =>
  OnFirstUse.parseBuffer.pipe(
    Effect.flatMap((parseBuffer) =>
      Effect.tryPromise({
        // duration: an MP3 without a Xing or VBRI header is timed by reading its frames.
        try: () => parseBuffer(bytes, { mimeType: parserTypes[format]!, size: bytes.length }, { duration: true, skipCovers: true }),
        catch: (cause) => corrupt(format, problemOf(cause))
      })
    ),
    Effect.flatMap((metadata) =>
      MediaProbe.formats[format].kind === "video"
        ? Effect.try({
          try: () => movieSeconds(bytes) ?? metadata.format.duration,
          catch: () => corrupt(format, "its movie header is cut short")
        })
        : Effect.succeed(metadata.format.duration)
    ),
    Effect.filterOrFail(
      (seconds): seconds is number => seconds !== undefined && Number.isFinite(seconds) && seconds > 0,
      () => corrupt(format, "no duration")
    )
  )

/** Checks an image's header: sharp reads the formats it decodes, BMP is checked here. */
const checkImage = (format: MediaProbe.Format, bytes: Uint8Array): Effect.Effect<void, MediaProbe.MediaProbeError> => {
  if (format === "bmp") {
    if (bytes.length < 26) return Effect.fail(corrupt(format, "shorter than its header"))
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    const core = view.getUint32(14, true) === 12
    const width = core ? view.getUint16(18, true) : view.getInt32(18, true)
    const height = core ? view.getUint16(20, true) : view.getInt32(22, true)
    return width > 0 && height !== 0 ? Effect.void : Effect.fail(corrupt(format, "no pixels"))
  }
  return OnFirstUse.sharp.pipe(
    Effect.flatMap((sharp) =>
      Effect.tryPromise({
        try: () => sharp(bytes).metadata(),
        catch: (cause) => corrupt(format, problemOf(cause))
      })
    ),
    Effect.flatMap((metadata) =>
      (metadata.width ?? 0) > 0 && (metadata.height ?? 0) > 0 ? Effect.void : Effect.fail(corrupt(format, "no pixels"))
    )
  )
}

/** What `bytes` are. */
export const probe = (bytes: Uint8Array): Effect.Effect<MediaProbe.Probe, MediaProbe.MediaProbeError> =>
  Effect.gen(function*() {
    const format = MediaProbe.sniff(bytes)
    if (format === undefined) {
      return yield* new MediaProbe.MediaProbeError({ reason: "Unsupported", message: MediaProbe.unsupportedMessage })
    }
    const kind = MediaProbe.formats[format].kind
    if (kind === "image") {
      yield* checkImage(format, bytes)
      return { kind, format }
    }
    return { kind, format, durationSeconds: yield* durationOf(format, bytes) }
  }).pipe(spanned("MediaProbe.probe", { attributes: { bytes: bytes.length } }))

/** A MediaProbe fetching URLs with the SafeFetch in context. */
export const make: Effect.Effect<Context.Tag.Service<MediaProbe.MediaProbe>, never, SafeFetch.SafeFetch> = Effect.gen(
  function*() {
    const fetch = yield* SafeFetch.SafeFetch
    return MediaProbe.MediaProbe.of({
      probe,
      probeUrl: (url) =>
        fetch.get(url).pipe(
          Effect.flatMap((fetched) => probe(fetched.bytes)),
          Effect.mapError((error) =>
            error._tag === "MediaProbeError"
              ? new MediaProbe.MediaProbeError({ reason: error.reason, message: `${url}: ${error.message}` })
              : error
          )
        )
    })
  }
)

/** The MediaProbe layer; needs SafeFetch (`SafeFetch.layer`). */
export const layer: Layer.Layer<MediaProbe.MediaProbe, never, SafeFetch.SafeFetch> = Layer.effect(MediaProbe.MediaProbe, make)
