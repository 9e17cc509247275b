/**
 * What an upload is, read as its bytes stream past (`Files.upload`), never holding the file:
 * its first bytes (the format, an image's dimensions), its last bytes (whether the file ends
 * as its format ends) and, for a video, where its top-level boxes lie (whether they fill the
 * file exactly, where the movie header is, to be read back from the store alone).
 */
import type { Format } from "../services/MediaProbe.js"

/** How much of the start of a file is kept: an image's header and a video's ftyp are well within it. */
export const headBytes = 256 * 1024

/** A top-level ISO BMFF box: its type, where it starts and its size (header included). */
export interface TopBox {
  readonly type: string
  readonly offset: number
  readonly size: number
}

/** Watches the chunks of a file go by: keeps its head and tail, and walks a video's top-level boxes. */
export class Inspector {
  private readonly head: Array<Uint8Array> = []
  private headLength = 0
  private tail = new Uint8Array(0)
  /** Bytes seen so far. */
  total = 0
  /** The video's top-level boxes, with the header of the next one while it arrives. */
  readonly boxes: Array<TopBox> = []
  private nextBox = 0
  private boxHeader: Array<number> = []
  /** A box whose header makes no sense (size below its header): the walk stops there. */
  broken = false

  constructor(private readonly video: boolean) {}

  readonly see = (chunk: Uint8Array): void => {
    if (this.headLength < headBytes) {
      const kept = chunk.subarray(0, headBytes - this.headLength)
      this.head.push(kept.slice())
      this.headLength += kept.length
    }
    const joined = new Uint8Array(Math.min(16, this.tail.length + chunk.length))
    const fromChunk = Math.min(chunk.length, joined.length)
    joined.set(this.tail.subarray(this.tail.length - (joined.length - fromChunk)), 0)
    joined.set(chunk.subarray(chunk.length - fromChunk), joined.length - fromChunk)
    this.tail = joined
    if (this.video) this.walk(chunk)
    this.total += chunk.length
  }

  /** Reads box headers (size, type, and a 64-bit size) wherever one starts in this chunk. */
  private walk(chunk: Uint8Array) {
    while (!this.broken && Number.isFinite(this.nextBox)) {
      // Where the next header byte is in this chunk: a header cut by the chunk's start goes on at 0.
      let i = this.nextBox + this.boxHeader.length - this.total
      if (i >= chunk.length) return
      while (i < chunk.length && this.boxHeader.length < 8) this.boxHeader.push(chunk[i++]!)
      if (this.boxHeader.length < 8) return
      const h = this.boxHeader
      const size32 = ((h[0]! << 24) | (h[1]! << 16) | (h[2]! << 8) | h[3]!) >>> 0
      if (size32 === 1) {
        while (i < chunk.length && h.length < 16) h.push(chunk[i++]!)
        if (h.length < 16) return
      }
      const type = String.fromCharCode(...h.slice(4, 8))
      // 0: the last box, to the end of the file.
      const size = size32 === 1 ? h.slice(8, 16).reduce((sum, byte) => sum * 256 + byte, 0) : size32 === 0 ? Number.POSITIVE_INFINITY : size32
      if (size < h.length) {
        this.broken = true
        return
      }
      this.boxes.push({ type, offset: this.nextBox, size })
      this.boxHeader = []
      this.nextBox += size
    }
  }

  /** The first `headBytes` (or the whole file when shorter). */
  headBytes(): Uint8Array {
    const out = new Uint8Array(this.headLength)
    this.head.reduce((offset, part) => (out.set(part, offset), offset + part.length), 0)
    return out
  }

  /** The last 16 bytes (fewer for a shorter file). */
  tailBytes(): Uint8Array {
    return this.tail
  }
}

const iend = [0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82]

const endsWith = (bytes: Uint8Array, suffix: ReadonlyArray<number>) =>
  bytes.length >= suffix.length && suffix.every((byte, i) => bytes[bytes.length - suffix.length + i] === byte)

/**
 * Why a file of `format` seen whole by `inspector` is cut short or broken, or undefined when it
 * ends as its format ends: a PNG with its IEND chunk, a JPEG with its end-of-image marker, a
 * WebP as long as its RIFF header says, a video whose top-level boxes fill the file and hold
 * a movie header.
 */
export const truncation = (format: Format, inspector: Inspector): string | undefined => {
  const name = format === "jpeg" ? "JPEG" : format === "png" ? "PNG" : format === "webp" ? "WebP" : format.toUpperCase()
  const cut = `the ${name} file is cut short`
  const tail = inspector.tailBytes()
  switch (format) {
    case "png":
      return endsWith(tail, iend) ? undefined : `${cut} (it has no IEND chunk at its end)`
    case "jpeg": {
      // Some cameras pad after the end-of-image marker; it must be among the last bytes.
      const at = tail.findIndex((byte, i) => byte === 0xff && tail[i + 1] === 0xd9)
      return at >= 0 ? undefined : `${cut} (it has no end-of-image marker)`
    }
    case "webp": {
      const head = inspector.headBytes()
      const declared = head.length < 8 ? 0 : (head[4]! | (head[5]! << 8) | (head[6]! << 16) | (head[7]! << 24)) >>> 0
      return inspector.total >= declared + 8 ? undefined : `${cut} (${inspector.total} bytes of the ${declared + 8} its header announces)`
    }
    default: {
      if (inspector.broken) return `the ${name} file is broken (a box's size is smaller than its header)`
      const last = inspector.boxes[inspector.boxes.length - 1]
      if (last === undefined || (Number.isFinite(last.size) && last.offset + last.size > inspector.total)) {
        return `${cut} (its last box ends past the end of the file)`
      }
      return inspector.boxes.some((box) => box.type === "moov") ? undefined : `the ${name} file has no movie header (moov box)`
    }
  }
}

const u16be = (bytes: Uint8Array, at: number) => (bytes[at]! << 8) | bytes[at + 1]!
const u32be = (bytes: Uint8Array, at: number) => ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0
const u24le = (bytes: Uint8Array, at: number) => bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16)

/** Width and height of an image from its first bytes (PNG's IHDR, JPEG's start of frame, WebP's VP8, VP8L or VP8X header). */
export const imageSize = (format: Format, head: Uint8Array): { readonly width: number; readonly height: number } | undefined => {
  if (format === "png" && head.length >= 24) return { width: u32be(head, 16), height: u32be(head, 20) }
  if (format === "webp" && head.length >= 30) {
    const chunk = String.fromCharCode(...head.subarray(12, 16))
    if (chunk === "VP8X") return { width: u24le(head, 24) + 1, height: u24le(head, 27) + 1 }
    if (chunk === "VP8L" && head[20] === 0x2f) {
      const bits = (head[21]! | (head[22]! << 8) | (head[23]! << 16) | (head[24]! << 24)) >>> 0
      return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 }
    }
    if (chunk === "VP8 ") return { width: (head[26]! | (head[27]! << 8)) & 0x3fff, height: (head[28]! | (head[29]! << 8)) & 0x3fff }
    return undefined
  }
  if (format === "jpeg") {
    let at = 2
    while (at + 9 < head.length) {
      if (head[at] !== 0xff) return undefined
      const marker = head[at + 1]!
      if (marker === 0xff) {
        at += 1
        continue
      }
      // Start of frame: every SOFn but DHT (C4), JPG (C8) and DAC (CC).
      if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
        return { width: u16be(head, at + 7), height: u16be(head, at + 5) }
      }
      at += 2 + u16be(head, at + 2)
    }
  }
  return undefined
}

/** Width and height of a movie: the first track whose header (tkhd) gives a picture size. */
export const movieSize = (moov: Uint8Array): { readonly width: number; readonly height: number } | undefined => {
  const children = (start: number, end: number) => {
    const found: Array<{ type: string; start: number; end: number }> = []
    let at = start
    while (at + 8 <= end) {
      const size = u32be(moov, at)
      if (size < 8 || at + size > end) break
      found.push({ type: String.fromCharCode(...moov.subarray(at + 4, at + 8)), start: at + 8, end: at + size })
      at += size
    }
    return found
  }
  // `moov` is the whole box, header included.
  for (const trak of children(8, moov.length).filter((box) => box.type === "trak")) {
    const tkhd = children(trak.start, trak.end).find((box) => box.type === "tkhd")
    if (tkhd === undefined) continue
    const widthAt = tkhd.start + (moov[tkhd.start] === 1 ? 88 : 76)
    if (widthAt + 8 > tkhd.end) continue
    const width = Math.round(u32be(moov, widthAt) / 65536)
    const height = Math.round(u32be(moov, widthAt + 4) / 65536)
    if (width > 0 && height > 0) return { width, height }
  }
  return undefined
}
