/**
 * Downloads of client media (input images, videos and audio) under the rules of Outbound:
 * every host, the first and each redirect's, is resolved once, every address it answers must
 * be public and the connection goes to the address that was checked. On top of them, a
 * download has a size limit, time limits, a few redirects at most and never goes from https
 * to http; its content type is read from the bytes, not from the server's headers.
 */
import type { Effect } from "effect"
import { Context, Schema } from "effect"

/** Why a download failed; `message` starts with the requested URL and says what was wrong. */
export class SafeFetchError extends Schema.TaggedError<SafeFetchError>()("SafeFetchError", {
  /** The URL that was asked for (the first one, whatever redirects followed). */
  url: Schema.String,
  reason: Schema.Literal(
    /** Not an absolute http(s) URL without credentials. */
    "InvalidUrl",
    /** A host name did not resolve. */
    "Unresolvable",
    /** A host is, or resolves to, an address that is not public. Nothing was sent to it. */
    "NotPublic",
    /** Too many redirects, a redirect from https to http or to no URL. */
    "Redirect",
    /** The body is larger than the limit. */
    "TooLarge",
    /** No connection, answer or whole body within its time limit. */
    "Timeout",
    /** The server answered with a status other than success. */
    "Status",
    /** The connection or the exchange failed. */
    "Failed"
  ),
  message: Schema.String
}) {}

/** A downloaded file. */
export interface Fetched {
  /** The URL the bytes came from, after redirects. */
  readonly url: string
  readonly bytes: Uint8Array
  /** Sniffed from the bytes (MediaProbe.contentType); application/octet-stream when none of our formats. */
  readonly contentType: string
}

/** SSRF-safe HTTP GET with size and time limits (see the module comment). */
export class SafeFetch extends Context.Tag("@mediagate/core/SafeFetch")<SafeFetch, {
  readonly get: (url: string) => Effect.Effect<Fetched, SafeFetchError>
}>() {}
