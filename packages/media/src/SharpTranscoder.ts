/**
 * The Transcoder on sharp (libvips). JPEG has no transparency: transparent pixels are laid on
 * white, as a browser shows them, rather than left to whatever colour they hide. The pixel
 * size is kept as it is (no rotation by EXIF, no resizing).
 */
import { MediaProbe, spanned, Transcoder } from "@mediagate/core"
import type { Context } from "effect"
import { Effect, Layer } from "effect"
import * as OnFirstUse from "./internal/OnFirstUse.js"

/** Transcoder settings. */
export interface Options {
  /** JPEG quality, 1 to 100. Default 90. */
  readonly jpegQuality?: number
}

/** A Transcoder with these settings. */
export const make = (options: Options = {}): Context.Tag.Service<Transcoder.Transcoder> => {
  const quality = options.jpegQuality ?? 90
  return Transcoder.Transcoder.of({
    webpToJpeg: (bytes) => {
      const format = MediaProbe.sniff(bytes)
      if (format !== "webp") {
        const found = format === undefined ? "" : ` (it is ${MediaProbe.formats[format].name})`
        return Effect.fail(new Transcoder.TranscodeError({ reason: "WrongFormat", message: `not a WebP image${found}` }))
      }
      return OnFirstUse.sharp.pipe(
        Effect.flatMap((sharp) =>
          Effect.tryPromise({
            try: () => sharp(bytes).flatten({ background: "#ffffff" }).jpeg({ quality }).toBuffer(),
            catch: (cause) =>
              new Transcoder.TranscodeError({
                reason: "Corrupt",
                message: `corrupt WebP image: ${cause instanceof Error ? cause.message : String(cause)}`
              })
          })
        ),
        Effect.map((jpeg) => new Uint8Array(jpeg.buffer, jpeg.byteOffset, jpeg.byteLength)),
        spanned("Transcoder.webpToJpeg", { attributes: { bytes: bytes.length } })
      )
    }
  })
}

/** The Transcoder layer. */
export const layer = (options: Options = {}): Layer.Layer<Transcoder.Transcoder> =>
  Layer.succeed(Transcoder.Transcoder, make(options))
