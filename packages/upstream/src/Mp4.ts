/**
 * A minimal MP4 (ISO BMFF) for the simulator's videos: one H.264 video track ('avc1') of
 * the requested size and duration, whose single sample is one I_PCM picture shown for the
 * whole duration. Players and parsers read it as an ordinary H.264 video.
 */
import { constraintFlags, encodeFrame, levelIdc, profileIdc } from "./H264.js"

const u8 = (...values: ReadonlyArray<number>) => Uint8Array.from(values)
const u16 = (value: number) => u8((value >>> 8) & 0xff, value & 0xff)
const u32 = (value: number) => u8((value >>> 24) & 0xff, (value >>> 16) & 0xff, (value >>> 8) & 0xff, value & 0xff)
const ascii = (text: string) => Uint8Array.from(text, (c) => c.charCodeAt(0))
const zeros = (count: number) => new Uint8Array(count)

const concat = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0))
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

const box = (type: string, ...parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const body = concat(parts)
  return concat([u32(8 + body.length), ascii(type), body])
}
const fullBox = (type: string, version: number, flags: number, ...parts: ReadonlyArray<Uint8Array>) =>
  box(type, u8(version, (flags >>> 16) & 0xff, (flags >>> 8) & 0xff, flags & 0xff), ...parts)

/** The identity transformation matrix of mvhd and tkhd. */
const matrix = concat([u32(0x00010000), u32(0), u32(0), u32(0), u32(0x00010000), u32(0), u32(0), u32(0), u32(0x40000000)])

/** Movie timescale: units per second. */
const timescale = 1000

/** Builds an MP4 of `width` x `height` lasting `seconds`, its frame drawn from `seed`. */
export const encodeMp4 = (options: {
  readonly width: number
  readonly height: number
  readonly seconds: number
  readonly seed: number
}): Uint8Array => {
  const { height, seconds, seed, width } = options
  const { idr, pps, sps } = encodeFrame({ width, height, seed })
  // One length-prefixed NAL unit per sample (avcC lengthSizeMinusOne = 3).
  const frame = concat([u32(idr.length), idr])
  const duration = Math.round(seconds * timescale)
  const ftyp = box("ftyp", ascii("isom"), u32(0x200), ascii("isom"), ascii("iso2"), ascii("mp41"))
  const mdat = box("mdat", frame)
  const frameOffset = ftyp.length + 8

  const mvhd = fullBox("mvhd", 0, 0, u32(0), u32(0), u32(timescale), u32(duration), u32(0x00010000), u16(0x0100), zeros(10), matrix, zeros(24), u32(2))
  const tkhd = fullBox("tkhd", 0, 3, u32(0), u32(0), u32(1), u32(0), u32(duration), zeros(8), u16(0), u16(0), u16(0), u16(0), matrix, u32(width * 65536), u32(height * 65536))
  const mdhd = fullBox("mdhd", 0, 0, u32(0), u32(0), u32(timescale), u32(duration), u16(0x55c4), u16(0))
  const hdlr = fullBox("hdlr", 0, 0, u32(0), ascii("vide"), zeros(12), ascii("VideoHandler\0"))
  const vmhd = fullBox("vmhd", 0, 1, u16(0), zeros(6))
  const dinf = box("dinf", fullBox("dref", 0, 0, u32(1), fullBox("url ", 0, 1)))
  const compressor = concat([u8(4), ascii("h264"), zeros(27)])
  const avcC = box(
    "avcC",
    u8(1, profileIdc, constraintFlags, levelIdc, 0xff, 0xe1),
    u16(sps.length), sps,
    u8(1), u16(pps.length), pps
  )
  const sampleEntry = box(
    "avc1",
    zeros(6), u16(1), // reserved, data_reference_index
    zeros(16), // pre_defined, reserved, pre_defined[3]
    u16(width), u16(height),
    u32(0x00480000), u32(0x00480000), // 72 dpi
    u32(0), u16(1), // reserved, frame_count
    compressor,
    u16(0x0018), u16(0xffff), // depth, pre_defined
    avcC
  )
  const stbl = box(
    "stbl",
    fullBox("stsd", 0, 0, u32(1), sampleEntry),
    fullBox("stts", 0, 0, u32(1), u32(1), u32(duration)),
    fullBox("stss", 0, 0, u32(1), u32(1)),
    fullBox("stsc", 0, 0, u32(1), u32(1), u32(1), u32(1)),
    fullBox("stsz", 0, 0, u32(0), u32(1), u32(frame.length)),
    fullBox("stco", 0, 0, u32(1), u32(frameOffset))
  )
  const moov = box("moov", mvhd, box("trak", tkhd, box("mdia", mdhd, hdlr, box("minf", vmhd, dinf, stbl))))
  return concat([ftyp, mdat, moov])
}
