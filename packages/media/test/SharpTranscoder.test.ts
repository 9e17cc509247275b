/**
 * WebP to JPEG: the same pixel size, transparency on white, anything but WebP refused. One
 * image comes through SafeFetch from a loopback server, as input images will.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { MediaProbe, SafeFetch as Fetch, Transcoder as Transcoding } from "@mediagate/core"
import { Effect, Layer } from "effect"
import sharp from "sharp"
import { NodeResolver, SafeFetch, Transcoder } from "../src/index.js"
import { fixture, mediaServer } from "./MediaServer.js"

const server = mediaServer()
beforeAll(server.start)
afterAll(server.stop)

const layer = Layer.merge(
  Transcoder.layer(),
  SafeFetch.layer({ allowPrivate: true }).pipe(Layer.provide(NodeResolver.layer))
)

const webpToJpeg = (bytes: Uint8Array) => Effect.flatMap(Transcoding.Transcoder, (transcoder) => transcoder.webpToJpeg(bytes))
const metadata = (bytes: Uint8Array) => Effect.promise(() => sharp(bytes).metadata())

describe("Transcoder", () => {
  it.effect("a WebP fetched from a server becomes a JPEG of the same pixel size", () =>
    Effect.gen(function*() {
      const fetched = yield* Effect.flatMap(Fetch.SafeFetch, (fetch) => fetch.get(server.url("/files/image-64x48.webp")))
      expect(fetched.contentType).toBe("image/webp")
      const jpeg = yield* webpToJpeg(fetched.bytes)
      expect(MediaProbe.sniff(jpeg)).toBe("jpeg")
      const { format, height, width } = yield* metadata(jpeg)
      expect({ format, width, height }).toEqual({ format: "jpeg", width: 64, height: 48 })
    }).pipe(Effect.provide(layer)))

  it.effect("transparent pixels become white, not black", () =>
    Effect.gen(function*() {
      const transparent = yield* Effect.promise(() =>
        sharp({ create: { width: 30, height: 20, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } } }).webp().toBuffer()
      )
      const jpeg = yield* webpToJpeg(new Uint8Array(transparent))
      const { data, info } = yield* Effect.promise(() => sharp(jpeg).raw().toBuffer({ resolveWithObject: true }))
      expect({ width: info.width, height: info.height, channels: info.channels }).toEqual({ width: 30, height: 20, channels: 3 })
      expect(Math.min(...data)).toBeGreaterThanOrEqual(250)
    }).pipe(Effect.provide(layer)))

  it.effect("anything but WebP is refused, and the message says what it is", () =>
    Effect.gen(function*() {
      expect(yield* Effect.flip(webpToJpeg(fixture("image-64x48.png")))).toEqual(
        new Transcoding.TranscodeError({ reason: "WrongFormat", message: "not a WebP image (it is PNG)" })
      )
      expect(yield* Effect.flip(webpToJpeg(fixture("image-64x48.jpg")))).toMatchObject({
        message: "not a WebP image (it is JPEG)"
      })
      expect(yield* Effect.flip(webpToJpeg(new TextEncoder().encode("hello")))).toEqual(
        new Transcoding.TranscodeError({ reason: "WrongFormat", message: "not a WebP image" })
      )
    }).pipe(Effect.provide(layer)))

  it.effect("a file that starts like WebP but is not one is corrupt", () =>
    Effect.gen(function*() {
      const broken = new Uint8Array(64)
      broken.set(fixture("image-64x48.webp").subarray(0, 16))
      const error = yield* Effect.flip(webpToJpeg(broken))
      expect(error.reason).toBe("Corrupt")
      expect(error.message).toMatch(/^corrupt WebP image: /)
    }).pipe(Effect.provide(layer)))

  it.effect("the JPEG quality is a setting", () =>
    Effect.gen(function*() {
      const webp = fixture("image-64x48.webp")
      const best = yield* webpToJpeg(webp)
      const low = yield* webpToJpeg(webp).pipe(Effect.provide(Transcoder.layer({ jpegQuality: 20 })))
      expect(low.length).toBeLessThan(best.length)
    }).pipe(Effect.provide(layer)))
})
