/**
 * A small PNG encoder (8-bit RGB, one IDAT) for the simulator's images, and the IHDR
 * reader the tests and the media probe use.
 */
import { deflateSync } from "node:zlib"

const crcTable = (() => {
  const table = new Uint32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    table[n] = c >>> 0
  }
  return table
})()

const crc32 = (bytes: Uint8Array): number => {
  let c = 0xffffffff
  for (let i = 0; i < bytes.length; i++) c = crcTable[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8)
  return (c ^ 0xffffffff) >>> 0
}

const chunk = (type: string, data: Uint8Array): Buffer => {
  const out = Buffer.alloc(12 + data.length)
  out.writeUInt32BE(data.length, 0)
  out.write(type, 4, "ascii")
  out.set(data, 8)
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length)
  return out
}

/** The eight bytes every PNG starts with. */
export const signature = Uint8Array.from([137, 80, 78, 71, 13, 10, 26, 10])

/** A 32-bit mix of a seed, for colours. */
const mix = (seed: number, salt: number) => {
  let h = (seed ^ Math.imul(salt, 0x9e3779b1)) >>> 0
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0
  return (h ^ (h >>> 16)) >>> 0
}

/**
 * Encodes a width x height RGB PNG: a horizontal gradient between two colours chosen by
 * `seed`, in bands of 64 rows. Rows repeat within a band, which keeps 4k images fast to
 * build and small to store.
 */
export const encodePng = (options: { readonly width: number; readonly height: number; readonly seed: number }): Uint8Array => {
  const { height, seed, width } = options
  const stride = 1 + 3 * width
  const raw = Buffer.alloc(stride * height)
  const bandHeight = 64
  for (let band = 0; band * bandHeight < height; band++) {
    const from = mix(seed, band * 2)
    const to = mix(seed, band * 2 + 1)
    const row = raw.subarray(band * bandHeight * stride, band * bandHeight * stride + stride)
    row[0] = 0
    for (let x = 0; x < width; x++) {
      const t = width === 1 ? 0 : x / (width - 1)
      for (let channel = 0; channel < 3; channel++) {
        const a = (from >>> (channel * 8)) & 0xff
        const b = (to >>> (channel * 8)) & 0xff
        row[1 + 3 * x + channel] = Math.round(a + (b - a) * t)
      }
    }
    const last = Math.min(height, (band + 1) * bandHeight)
    for (let y = band * bandHeight + 1; y < last; y++) row.copy(raw, y * stride)
  }
  const header = Buffer.alloc(13)
  header.writeUInt32BE(width, 0)
  header.writeUInt32BE(height, 4)
  header[8] = 8 // bit depth
  header[9] = 2 // colour type RGB
  return Buffer.concat([
    signature,
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(raw, { level: 6 })),
    chunk("IEND", new Uint8Array(0))
  ])
}

/** Width and height from a PNG's IHDR chunk, or undefined when the bytes are not a PNG. */
export const readPngSize = (bytes: Uint8Array): { readonly width: number; readonly height: number } | undefined => {
  if (bytes.length < 24 || signature.some((byte, i) => bytes[i] !== byte)) return undefined
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (String.fromCharCode(...bytes.subarray(12, 16)) !== "IHDR") return undefined
  return { width: view.getUint32(16), height: view.getUint32(20) }
}
