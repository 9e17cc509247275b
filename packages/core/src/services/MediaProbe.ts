/**
 * What a media file is: its kind, its format and, for video and audio, its duration. The
 * format comes from the bytes (magic numbers), never from a URL's extension or a server's
 * Content-Type, which anyone can get wrong. Only the contract's material formats are known
 * (.jpg .jpeg .png .webp .gif .bmp, .mp4 .mov .m4v, .mp3 .wav); anything else is unsupported.
 */
import type { Effect } from "effect"
import { Context, Schema } from "effect"
import type { SafeFetchError } from "./SafeFetch.js"

/** The kinds of material the contract knows. */
export const Kind = Schema.Literal("image", "video", "audio")
export type Kind = typeof Kind.Type

/** The formats we recognise, by their usual extension. */
export const Format = Schema.Literal("jpeg", "png", "webp", "gif", "bmp", "mp4", "mov", "m4v", "mp3", "wav")
export type Format = typeof Format.Type

/** A format's kind and the content type its bytes are served as. */
export const formats: Readonly<Record<Format, { readonly kind: Kind; readonly contentType: string; readonly name: string }>> = {
  jpeg: { kind: "image", contentType: "image/jpeg", name: "JPEG" },
  png: { kind: "image", contentType: "image/png", name: "PNG" },
  webp: { kind: "image", contentType: "image/webp", name: "WebP" },
  gif: { kind: "image", contentType: "image/gif", name: "GIF" },
  bmp: { kind: "image", contentType: "image/bmp", name: "BMP" },
  mp4: { kind: "video", contentType: "video/mp4", name: "MP4" },
  mov: { kind: "video", contentType: "video/quicktime", name: "MOV" },
  m4v: { kind: "video", contentType: "video/x-m4v", name: "M4V" },
  mp3: { kind: "audio", contentType: "audio/mpeg", name: "MP3" },
  wav: { kind: "audio", contentType: "audio/wav", name: "WAV" }
}

/** What a probe found. */
export interface Probe {
  readonly kind: Kind
  readonly format: Format
  /** Seconds, for video and audio. */
  readonly durationSeconds?: number
}

/** A file we cannot use: not one of our formats, or one whose content does not hold together. */
export class MediaProbeError extends Schema.TaggedError<MediaProbeError>()("MediaProbeError", {
  reason: Schema.Literal(
    /** Not one of the contract's formats. */
    "Unsupported",
    /** One of our formats by its first bytes, but unreadable past them. */
    "Corrupt"
  ),
  message: Schema.String
}) {}

/** The message of a file that is none of our formats. */
export const unsupportedMessage = "not a supported file (JPEG, PNG, WebP, GIF, BMP, MP4, MOV, M4V, MP3 or WAV)"

/** Reads types and durations of media files. */
export class MediaProbe extends Context.Tag("@mediagate/core/MediaProbe")<MediaProbe, {
  /** What `bytes` are. */
  readonly probe: (bytes: Uint8Array) => Effect.Effect<Probe, MediaProbeError>
  /** What the file at `url` is, fetched with SafeFetch; messages start with the URL. */
  readonly probeUrl: (url: string) => Effect.Effect<Probe, MediaProbeError | SafeFetchError>
}>() {}

const ascii = (bytes: Uint8Array, at: number, length: number) =>
  String.fromCharCode(...bytes.subarray(at, at + length))

const startsWith = (bytes: Uint8Array, ...prefix: ReadonlyArray<number>) =>
  bytes.length >= prefix.length && prefix.every((byte, i) => bytes[i] === byte)

/** ISO base media file brands (ftyp) of QuickTime and of Apple's M4V, by the major brand. */
const quickTimeBrands = new Set(["qt  "])
const m4vBrands = new Set(["M4V ", "M4VH", "M4VP"])
/** Audio-only major brands (AAC in MP4, audio books, protected audio): not among the contract's formats. */
const audioBrands = new Set(["M4A ", "M4B ", "M4P ", "F4A ", "F4B "])
/** Still images and image sequences in the same box format (HEIF, HEIC, AVIF): not video, whatever else they list. */
const imageBrands = new Set([
  "mif1", "mif2", "msf1", "miaf", "heic", "heix", "heim", "heis", "hevc", "hevx", "hevm", "hevs", "avif", "avis", "avci",
  "avcs", "MA1A", "MA1B"
])
/** Brands of MP4 video, major or compatible; a file listing none of them is some other member of the family. */
const mp4Brands = new Set([
  "isom", "iso2", "iso3", "iso4", "iso5", "iso6", "iso7", "iso8", "iso9", "mp41", "mp42", "mp71", "avc1", "dash", "msdh",
  "msix", "cmfc", "cmf2", "mmp4", "MSNV", "NDAS", "XAVC", "f4v "
])

/** The video format of an ISO base media file by its brands: major first, then the compatible ones. */
const isoVideo = (bytes: Uint8Array): Format | undefined => {
  const size = ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0
  const brands = [ascii(bytes, 8, 4)]
  for (let at = 16; at + 4 <= Math.min(size, bytes.length); at += 4) brands.push(ascii(bytes, at, 4))
  if (brands.some((brand) => imageBrands.has(brand))) return undefined
  const major = brands[0]!
  if (quickTimeBrands.has(major)) return "mov"
  if (m4vBrands.has(major)) return "m4v"
  if (audioBrands.has(major)) return undefined
  return brands.some((brand) => mp4Brands.has(brand) || m4vBrands.has(brand)) ? "mp4" : undefined
}

/** Old QuickTime files start with a movie atom and no ftyp. */
const quickTimeAtoms = new Set(["moov", "mdat", "wide", "pnot"])
/** Sizes of the BMP info headers in use (core, OS/2 2, v3 to v5). */
const bmpInfoSizes = new Set([12, 16, 40, 52, 56, 64, 108, 124])

/**
 * An MPEG audio layer III frame header: 11 sync bits, a version that is not reserved, layer
 * III (layer bits 01, which AAC's ADTS, 00, never has), a bitrate index that is neither free
 * nor bad and a sample rate that is not reserved.
 */
const isMp3Frame = (bytes: Uint8Array) => {
  if (bytes.length < 4 || bytes[0] !== 0xff || (bytes[1]! & 0xe0) !== 0xe0) return false
  const version = (bytes[1]! >> 3) & 3
  const layer = (bytes[1]! >> 1) & 3
  const bitrate = bytes[2]! >> 4
  const sampleRate = (bytes[2]! >> 2) & 3
  return version !== 1 && layer === 1 && bitrate !== 0 && bitrate !== 15 && sampleRate !== 3
}

/** The format of `bytes` by their magic numbers, or undefined when it is none of ours. */
export const sniff = (bytes: Uint8Array): Format | undefined => {
  if (startsWith(bytes, 0xff, 0xd8, 0xff)) return "jpeg"
  if (startsWith(bytes, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return "png"
  if (bytes.length >= 6 && (ascii(bytes, 0, 6) === "GIF87a" || ascii(bytes, 0, 6) === "GIF89a")) return "gif"
  if (bytes.length >= 12 && ascii(bytes, 0, 4) === "RIFF") {
    const form = ascii(bytes, 8, 4)
    return form === "WEBP" ? "webp" : form === "WAVE" ? "wav" : undefined
  }
  // "BM" alone is two letters any text may start with; the info header's size must be one BMP knows.
  if (bytes.length >= 18 && ascii(bytes, 0, 2) === "BM") {
    const infoSize = bytes[14]! | (bytes[15]! << 8) | (bytes[16]! << 16) | (bytes[17]! << 24)
    return bmpInfoSizes.has(infoSize) ? "bmp" : undefined
  }
  if (bytes.length >= 12 && ascii(bytes, 4, 4) === "ftyp") return isoVideo(bytes)
  if (bytes.length >= 8 && quickTimeAtoms.has(ascii(bytes, 4, 4))) return "mov"
  if (ascii(bytes, 0, 3) === "ID3" || isMp3Frame(bytes)) return "mp3"
  return undefined
}

/** The content type of `bytes` by their magic numbers; application/octet-stream when they are none of ours. */
export const contentType = (bytes: Uint8Array): string => {
  const format = sniff(bytes)
  return format === undefined ? "application/octet-stream" : formats[format].contentType
}
