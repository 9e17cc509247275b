import { describe, expect, it } from "@effect/vitest"
import { inflateSync } from "node:zlib"
import { Png } from "../src/index.js"

/** Splits a PNG into its chunks, checking each CRC-carrying layout. */
const chunks = (bytes: Uint8Array) => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const out: Array<{ type: string; data: Uint8Array }> = []
  for (let at = 8; at < bytes.length;) {
    const length = view.getUint32(at)
    out.push({ type: String.fromCharCode(...bytes.subarray(at + 4, at + 8)), data: bytes.subarray(at + 8, at + 8 + length) })
    at += 12 + length
  }
  return out
}

describe("Png", () => {
  for (const [width, height] of [[1, 1], [1024, 1024], [1536, 864], [2016, 864], [3840, 2160], [1648, 3840]] as const) {
    it(`encodes ${width}x${height} as a PNG whose pixels decompress to the right size`, () => {
      const bytes = Png.encodePng({ width, height, seed: 7 })
      expect(Array.from(bytes.subarray(0, 8))).toEqual(Array.from(Png.signature))
      expect(Png.readPngSize(bytes)).toEqual({ width, height })
      const parts = chunks(bytes)
      expect(parts.map((p) => p.type)).toEqual(["IHDR", "IDAT", "IEND"])
      const raw = inflateSync(parts[1]!.data)
      expect(raw.length).toBe(height * (1 + 3 * width))
    })
  }

  it("different seeds give different images, the same seed the same", () => {
    const a = Png.encodePng({ width: 64, height: 64, seed: 1 })
    expect(Buffer.from(a).equals(Buffer.from(Png.encodePng({ width: 64, height: 64, seed: 1 })))).toBe(true)
    expect(Buffer.from(a).equals(Buffer.from(Png.encodePng({ width: 64, height: 64, seed: 2 })))).toBe(false)
  })

  it("readPngSize refuses what is not a PNG", () => {
    expect(Png.readPngSize(new TextEncoder().encode("GIF89a............................"))).toBeUndefined()
  })
})
