/**
 * Files as inputs: `upload` sends a file to `POST /api/v1/files` (the body is the file
 * itself), and `withUploads` uploads every local file an input gives in a media URL field
 * (a Blob, or in Node a path), putting the upload's URL in its place. Which fields are media
 * URLs is the model's schema's to say (the fields core's catalog marks `MediaUrls`:
 * imageUrls, images, mediaUrls); an http(s) URL in them is left as it is.
 */
import * as HttpBody from "@effect/platform/HttpBody"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Fields, FilesApi, ModelCatalog } from "@mediagate/core"
import { Effect, Redacted, Schema } from "effect"
import { type ClientError, LocalFileError, refail } from "./CallErrors.js"

/** What `upload` answers: `data` of POST /api/v1/files. */
export type Upload = typeof FilesApi.Upload.Type

/** A file to upload: a Blob (a browser's File is one), or in Node the path of a file on disk. */
export type FileInput = Blob | string

/** The input fields that may hold media URLs in some model of the catalog. */
export type MediaField = "imageUrls" | "images" | "mediaUrls"

/** A model's input in which each media URL may also be a Blob or a local path (a path is a string already). */
export type WithFiles<I> = {
  [K in keyof I]: K extends MediaField ? NonNullable<I[K]> extends ReadonlyArray<string> ? ReadonlyArray<string | Blob> | Exclude<I[K], ReadonlyArray<string>> : I[K]
    : I[K]
}

/** Whether `value` is a URL that is passed as it is (http or https). */
export const isRemoteUrl = (value: string): boolean => /^https?:\/\//i.test(value)

const isBlob = (value: unknown): value is Blob => typeof Blob !== "undefined" && value instanceof Blob

const specs = new Map(ModelCatalog.allModels.map((spec) => [spec.id as string, spec]))
const fieldsByModel = new Map<string, ReadonlyArray<string>>()

/** The media URL fields of `model`'s input; none for a model the catalog does not know (the server judges it). */
export const mediaFieldsOf = (model: string): ReadonlyArray<string> => {
  const known = fieldsByModel.get(model)
  if (known !== undefined) return known
  const spec = specs.get(model)
  const fields = spec === undefined ? [] : Fields.mediaUrlFields(spec.inputSchema)
  fieldsByModel.set(model, fields)
  return fields
}

/**
 * The file at `path` as a Blob backed by the file (Node's `fs.openAsBlob`): sending it
 * streams it from disk, never whole in memory. Fails with LocalFileError where it cannot
 * be opened, and in a browser (which has no paths: give a File).
 */
export const openFile = (path: string): Effect.Effect<Blob, LocalFileError> =>
  Effect.tryPromise({
    try: async () => {
      // A specifier in a variable: bundlers for browsers leave it alone.
      const fsModule = "node:fs"
      const fs = (await import(/* @vite-ignore */ fsModule)) as typeof import("node:fs")
      const stat = await fs.promises.stat(path)
      if (!stat.isFile()) throw new Error("not a file")
      return await fs.openAsBlob(path)
    },
    catch: (cause) => {
      const error = cause as { readonly code?: string; readonly message?: string }
      const reason = error.code === "ENOENT"
        ? "no such file"
        : error.code === "ERR_UNKNOWN_BUILTIN_MODULE" || typeof process === "undefined"
        ? "local paths are read in Node only; give a Blob or File"
        : error.message ?? String(cause)
      return new LocalFileError({ path, message: `cannot read ${path}: ${reason}` })
    }
  })

const decodeUpload = Schema.decodeUnknown(FilesApi.UploadResponse)

/** Uploads `file` to the server at `baseUrl` with `key`; answers the upload. */
export const upload = (http: HttpClient.HttpClient, baseUrl: string | URL, key: Redacted.Redacted<string>) =>
(file: FileInput): Effect.Effect<Upload, ClientError | LocalFileError> =>
  Effect.gen(function*() {
    const blob = typeof file === "string" ? yield* openFile(file) : file
    const request = HttpClientRequest.post("/api/v1/files").pipe(
      HttpClientRequest.prependUrl(baseUrl.toString()),
      HttpClientRequest.bearerToken(Redacted.value(key)),
      HttpClientRequest.setHeader("accept", "application/json"),
      // The Blob goes to fetch as it is: a file-backed one is streamed from disk.
      HttpClientRequest.setBody(HttpBody.raw(blob, { contentType: blob.type === "" ? "application/octet-stream" : blob.type, contentLength: blob.size }))
    )
    const answer = yield* http.execute(request).pipe(
      Effect.flatMap(HttpClientResponse.filterStatusOk),
      Effect.flatMap((response) => response.json),
      Effect.flatMap(decodeUpload),
      Effect.catchAll(refail)
    )
    return answer.data
  }).pipe(Effect.withSpan("MediagateClient.upload"))

/**
 * `input` with every Blob and local path in `model`'s media URL fields uploaded (one at a
 * time, in the fields' order) and replaced by its upload's URL. An input with none is
 * answered as it is, with no request.
 */
export const withUploads = <E>(
  model: string,
  input: unknown,
  send: (file: FileInput) => Effect.Effect<Upload, E>
): Effect.Effect<unknown, E> =>
  Effect.gen(function*() {
    if (typeof input !== "object" || input === null || Array.isArray(input)) return input
    const record = input as Readonly<Record<string, unknown>>
    const local = (value: unknown): value is FileInput => isBlob(value) || (typeof value === "string" && !isRemoteUrl(value))
    const replaced: Record<string, unknown> = { ...record }
    for (const field of mediaFieldsOf(model)) {
      const value = record[field]
      if (local(value)) replaced[field] = (yield* send(value)).url
      else if (Array.isArray(value) && value.some(local)) {
        replaced[field] = yield* Effect.forEach(value, (item: unknown) => (local(item) ? Effect.map(send(item), (done) => done.url) : Effect.succeed(item)))
      }
    }
    return replaced
  })
