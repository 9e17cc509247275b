/** Result files on the local file system. */
export * as FileMediaStore from "./FileMediaStore.js"
/** Requests to third parties on node:http, pinned to checked addresses. */
export * as NodeOutbound from "./NodeOutbound.js"
/** Host names to addresses with the operating system's resolver. */
export * as NodeResolver from "./NodeResolver.js"
/** Downloads of client media, pinned to checked addresses, with size and time limits. */
export * as SafeFetch from "./NodeSafeFetch.js"
/** Kinds, formats and durations of media files, without ffmpeg. */
export * as MediaProbe from "./NodeMediaProbe.js"
/** WebP to JPEG with sharp. */
export * as Transcoder from "./SharpTranscoder.js"
/** The spec's media rules around an Upstream: WebP to JPEG, motion materials checked, results hosted. */
export * as MediaUpstream from "./MediaUpstream.js"
/** An S3 media store's bucket, prefix and client settings, without the SDK (the store itself is `@mediagate/media/s3`). */
export * as S3Location from "./S3Location.js"
