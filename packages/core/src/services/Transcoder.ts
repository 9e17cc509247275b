/**
 * Conversions of input media for upstreams that do not take a format: WebP images become
 * JPEG before they are handed on (the contract: "WebP input is transcoded to JPEG
 * automatically").
 */
import type { Effect } from "effect"
import { Context, Schema } from "effect"

/** Why a conversion did not happen. */
export class TranscodeError extends Schema.TaggedError<TranscodeError>()("TranscodeError", {
  reason: Schema.Literal(
    /** The input is not of the format the conversion takes. */
    "WrongFormat",
    /** The input starts like its format but cannot be decoded. */
    "Corrupt"
  ),
  message: Schema.String
}) {}

/** Converts media files. */
export class Transcoder extends Context.Tag("@mediagate/core/Transcoder")<Transcoder, {
  /** A JPEG of the WebP image `bytes`, of the same pixel size (its first frame, when animated). */
  readonly webpToJpeg: (bytes: Uint8Array) => Effect.Effect<Uint8Array, TranscodeError>
}>() {}
