/**
 * Uploaded input files (issue 36, additive: not in the spec): `POST /api/v1/files` takes a
 * file, as the body itself or as the one `file` field of `multipart/form-data`, and answers
 * its URL, which any URL input of a task accepts; `GET` and `DELETE /api/v1/files/{fileId}`
 * read and remove it. The handlers read the body themselves (streamed to the media store).
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { BadRequest, NotFound, okSchema, PayloadTooLarge, RequestTimeout, UnsupportedMediaType } from "./Envelope.js"

const additive = "Additive: not in the spec."

/** An uploaded file as the files endpoints show it. */
export const Upload = Schema.Struct({
  fileId: Schema.String.annotations({ description: "`file_` and 24 hex characters." }),
  url: Schema.String.annotations({
    description: "Where the file is served; give it in any URL input of a task (imageUrls, image_urls, mediaUrls, ...)."
  }),
  contentType: Schema.String.annotations({ description: "Decided by the file's bytes, not by the Content-Type it was sent with." }),
  bytes: Schema.Int,
  width: Schema.NullOr(Schema.Int).annotations({ description: "Pixels; null where the file does not say." }),
  height: Schema.NullOr(Schema.Int).annotations({ description: "Pixels; null where the file does not say." }),
  durationSeconds: Schema.NullOr(Schema.Number).annotations({ description: "A video's length; null for an image." }),
  expiresAt: Schema.String.annotations({
    description: "When the upload ends (ISO 8601 UTC): from then on it answers 404. A task accepted before then still reads it."
  })
}).annotations({ identifier: "Upload" })

export const UploadResponse = okSchema(Upload).annotations({ identifier: "UploadResponse" })

export const FileIdPath = Schema.Struct({
  fileId: Schema.String.annotations({ description: "The upload's fileId." })
})

/** The files endpoints; the API adds the authorization middleware and the `/api/v1` prefix. */
export class FilesGroup extends HttpApiGroup.make("files")
  .add(
    HttpApiEndpoint.post("upload", "/files")
      .addSuccess(UploadResponse)
      .addError(BadRequest)
      .addError(PayloadTooLarge)
      .addError(UnsupportedMediaType)
      .addError(RequestTimeout)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Upload a file to use as a task's input")
      .annotate(
        OpenApi.Description,
        `${additive} The body is the file itself (any Content-Type), or \`multipart/form-data\` with one field \`file\`. The file's type is decided by its bytes; images and videos a model takes are accepted (415 names anything else), up to the server's size limit (413); a file that cannot be read is 400. A server set up without uploads answers 404 on the files paths. Uploads have a rate of their own per account (429 with Retry-After).`
      )
  )
  .add(
    HttpApiEndpoint.get("file", "/files/:fileId")
      .setPath(FileIdPath)
      .addSuccess(UploadResponse)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Show an upload")
      .annotate(OpenApi.Description, `${additive} Another account's upload, and one past its expiresAt, are 404.`)
  )
  .add(
    HttpApiEndpoint.del("deleteFile", "/files/:fileId")
      .setPath(FileIdPath)
      .addSuccess(UploadResponse)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Delete an upload")
      .annotate(OpenApi.Description, `${additive} Deletes the file and its metadata at once and answers the upload as it was. A task accepted with it whose provider has not fetched it yet may fail; an upload left to expire is kept while such tasks run.`)
  )
{}
