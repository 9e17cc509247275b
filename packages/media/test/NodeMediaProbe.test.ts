/**
 * MediaProbe on real files of known durations (fixtures/README.md), from bytes and from a
 * loopback server that lies about their content type; unsupported and corrupt files say what
 * is wrong with them.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { MediaProbe as Probe } from "@mediagate/core"
import { Effect, Layer } from "effect"
import { MediaProbe, NodeResolver, SafeFetch } from "../src/index.js"
import { fixture, fixtures, mediaServer } from "./MediaServer.js"

const server = mediaServer()
beforeAll(server.start)
afterAll(server.stop)

const probeLayer = MediaProbe.layer.pipe(
  Layer.provide(SafeFetch.layer({ allowPrivate: true })),
  Layer.provide(NodeResolver.layer)
)

const probe = (bytes: Uint8Array) => Effect.flatMap(Probe.MediaProbe, (probe) => probe.probe(bytes))
const probeUrl = (url: string) => Effect.flatMap(Probe.MediaProbe, (probe) => probe.probeUrl(url))

/** Durations are good to a tenth of a second (an MP3 carries its encoder's padding). */
const expectFound = (found: Probe.Probe, expected: (typeof fixtures)[number]) => {
  expect({ kind: found.kind, format: found.format }).toEqual({ kind: expected.kind, format: expected.format })
  if ("durationSeconds" in expected) {
    expect(Math.abs(found.durationSeconds! - expected.durationSeconds)).toBeLessThanOrEqual(0.1)
  } else {
    expect(found.durationSeconds).toBeUndefined()
  }
}

const ascii = (text: string) => Uint8Array.from(text, (c) => c.charCodeAt(0))
const concat = (...parts: ReadonlyArray<Uint8Array>) => {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0))
  parts.reduce((at, part) => (out.set(part, at), at + part.length), 0)
  return out
}

describe("MediaProbe", () => {
  it.effect.each(fixtures)("$file: $kind, $format", (expected) =>
    Effect.gen(function*() {
      expectFound(yield* probe(fixture(expected.file)), expected)
    }).pipe(Effect.provide(probeLayer)))

  it.effect.each(fixtures)("$file from a URL whose server says text/html", (expected) =>
    Effect.gen(function*() {
      expectFound(yield* probeUrl(server.url(`/files/${expected.file}?chunked`)), expected)
    }).pipe(Effect.provide(probeLayer)))

  it.effect("the MP3s are told apart from their first bytes whether or not an ID3 tag leads", () =>
    Effect.sync(() => {
      expect(Probe.sniff(fixture("audio-4s.mp3").subarray(0, 10))).toBe("mp3")
      expect(Probe.sniff(fixture("audio-4s-noid3.mp3").subarray(0, 4))).toBe("mp3")
      // ADTS AAC has the same sync bits as MPEG audio, but layer 00.
      expect(Probe.sniff(Uint8Array.of(0xff, 0xf1, 0x50, 0x80))).toBeUndefined()
    }))

  it.effect("a file of another format is unsupported, whatever its name", () =>
    Effect.gen(function*() {
      const unsupported = { _tag: "MediaProbeError", reason: "Unsupported", message: Probe.unsupportedMessage }
      expect(yield* Effect.flip(probe(ascii("<!doctype html><title>not an image</title>")))).toMatchObject(unsupported)
      expect(yield* Effect.flip(probe(new Uint8Array()))).toMatchObject(unsupported)
      // AAC audio in MP4 (brand M4A) is not among the contract's audio formats.
      const m4a = concat(Uint8Array.of(0, 0, 0, 20), ascii("ftypM4A "), new Uint8Array(8))
      expect(yield* Effect.flip(probe(m4a))).toMatchObject(unsupported)
      // AVIF and HEIC images share MP4's box format; they are neither video nor one of our image formats.
      const avif = concat(Uint8Array.of(0, 0, 0, 28), ascii("ftypavif"), new Uint8Array(4), ascii("avifmif1miafMA1B"))
      expect(yield* Effect.flip(probe(avif))).toMatchObject(unsupported)
      const heic = concat(Uint8Array.of(0, 0, 0, 24), ascii("ftypheic"), new Uint8Array(4), ascii("mif1heic"))
      expect(yield* Effect.flip(probe(heic))).toMatchObject(unsupported)
      // "BM" followed by text is no bitmap.
      expect(yield* Effect.flip(probe(ascii("BMW owners club, 1998 edition")))).toMatchObject(unsupported)
    }).pipe(Effect.provide(probeLayer)))

  it.effect("a file that starts like one of ours but does not hold together is corrupt, and the message names the format", () =>
    Effect.gen(function*() {
      const mp4 = yield* Effect.flip(probe(fixture("video-3s.mp4").subarray(0, 200)))
      expect(mp4.reason).toBe("Corrupt")
      expect(mp4.message).toMatch(/^corrupt MP4 file: /)
      const png = yield* Effect.flip(probe(concat(fixture("image-64x48.png").subarray(0, 8), ascii("garbage, not chunks"))))
      expect(png.reason).toBe("Corrupt")
      expect(png.message).toMatch(/^corrupt PNG file: /)
      const jpeg = yield* Effect.flip(probe(Uint8Array.of(0xff, 0xd8, 0xff, 0xe0, 0, 0)))
      expect(jpeg).toMatchObject({ reason: "Corrupt" })
      expect(jpeg.message).toMatch(/^corrupt JPEG file: /)
      // A WAV header whose data chunk holds nothing has no duration.
      const wav = fixture("audio-1.5s.wav").subarray(0, 44)
      expect(yield* Effect.flip(probe(wav))).toMatchObject({ reason: "Corrupt", message: "corrupt WAV file: no duration" })
      const bmp = concat(fixture("image-64x48.bmp").subarray(0, 18), new Uint8Array(8))
      expect(yield* Effect.flip(probe(bmp))).toMatchObject({ reason: "Corrupt", message: "corrupt BMP file: no pixels" })
    }).pipe(Effect.provide(probeLayer)))

  it.effect("from a URL, a probe's failure starts with the URL, and a download's failure is the download's", () =>
    Effect.gen(function*() {
      const text = server.url("/bytes/64")
      expect(yield* Effect.flip(probeUrl(text))).toEqual(
        new Probe.MediaProbeError({ reason: "Unsupported", message: `${text}: ${Probe.unsupportedMessage}` })
      )
      const missing = server.url("/status/404")
      expect(yield* Effect.flip(probeUrl(missing))).toMatchObject({ _tag: "SafeFetchError", message: `${missing}: HTTP 404` })
    }).pipe(Effect.provide(probeLayer)))
})
