/**
 * An OpenAI-compatible images API (https://platform.openai.com/docs/api-reference/images), a
 * synchronous upstream like the spec's alpha-image-2: the call answers with the images.
 *
 * - `POST {base}/v1/images/generations` with JSON (`model`, `prompt`, `n`, `size`, ...);
 * - with reference images, `POST {base}/v1/images/edits` as multipart/form-data: the input's
 *   fields, and each reference image downloaded and attached (`image`, or `image[]` for
 *   several);
 * - the answer's `data[]` holds a `url` or a `b64_json` each; base64 images are stored in the
 *   MediaStore, so the task still returns URLs.
 *
 * `Authorization: Bearer <key>`; a refusal by the provider's safety system (400,
 * `content_policy_violation` or `moderation_blocked`) is CONTENT_MODERATION.
 */
import type { Task } from "@mediagate/core"
import { MediaStore, UpstreamError } from "@mediagate/core"
import { Effect, Option } from "effect"
import * as ProviderHttp from "./ProviderHttp.js"
import type { Provider } from "./Router.js"

export interface Options {
  /** The API key (`OPENAI_API_KEY`). */
  readonly key: string
  /** Default `https://api.openai.com`. */
  readonly baseUrl?: string
  /** The provider's name in routes. Default `openai`. */
  readonly name?: string
}

/** A size the images API takes for the job's ratio: square, portrait or landscape (`auto` without one). */
export const sizeOf = (job: Task.UpstreamJob): string => {
  if (job.ratio === null) return "auto"
  const [w, h] = job.ratio.split(":").map(Number) as [number, number]
  return w === h ? "1024x1024" : w < h ? "1024x1536" : "1536x1024"
}

/** The input most OpenAI-compatible image models take: the prompt, how many, and a size for the ratio. */
export const defaultInput = (job: Task.UpstreamJob, model: string): Readonly<Record<string, unknown>> => ({
  model,
  prompt: job.prompt,
  n: job.n,
  size: sizeOf(job)
})

/** The file extension of the answer's `output_format` (PNG when it names none). */
const extensionOf = (format: unknown) => (format === "jpeg" ? "jpg" : format === "webp" ? "webp" : "png")

export const make = (options: Options): Effect.Effect<Provider, never, MediaStore.MediaStore> =>
  Effect.gen(function*() {
    const media = yield* MediaStore.MediaStore
    const name = options.name ?? "openai"
    const base = (options.baseUrl ?? "https://api.openai.com").replace(/\/+$/, "")
    const headers = { authorization: `Bearer ${options.key}` }

    /** The URL of each image of the answer, base64 ones stored first. */
    const files = (body: unknown) =>
      Effect.gen(function*() {
        const data = ProviderHttp.field(body, "data")
        if (!Array.isArray(data) || data.length === 0) return yield* Effect.fail(ProviderHttp.malformed(name, "data[]", body))
        const extension = extensionOf(ProviderHttp.field(body, "output_format"))
        return yield* Effect.forEach(data, (item) => {
          const url = ProviderHttp.stringField(item, "url")
          if (Option.isSome(url)) return Effect.succeed(url.value)
          const encoded = ProviderHttp.stringField(item, "b64_json")
          if (Option.isNone(encoded)) return Effect.fail(ProviderHttp.malformed(name, "a url or b64_json", item))
          const bytes = new Uint8Array(Buffer.from(encoded.value, "base64"))
          return media.put({ bytes, contentType: `image/${extension === "jpg" ? "jpeg" : extension}`, extension }).pipe(
            Effect.mapError((error) => new UpstreamError({ message: `storing ${name}'s image failed: ${error.message}`, reason: null, retryable: true }))
          )
        })
      })

    /** The edits call: the input's fields and the reference images as files. */
    const editForm = (input: Readonly<Record<string, unknown>>, imageUrls: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const form = new FormData()
        for (const [key, value] of Object.entries(input)) {
          if (value !== undefined && value !== null) form.append(key, typeof value === "string" ? value : JSON.stringify(value))
        }
        const field = imageUrls.length > 1 ? "image[]" : "image"
        for (const [i, url] of imageUrls.entries()) {
          const image = yield* ProviderHttp.download(name, url)
          form.append(field, new Blob([image.bytes], { type: image.contentType }), `image-${i + 1}.${image.contentType.split("/")[1] ?? "png"}`)
        }
        return form
      })

    const provider: Provider = {
      name,
      submit: (job, given) =>
        Effect.gen(function*() {
          // The target's model unless the input names one.
          const input = given["model"] === undefined ? { model: job.model, ...given } : given
          const imageUrls = job.job.imageUrls
          const answer = imageUrls.length === 0
            ? yield* ProviderHttp.send(name, { method: "POST", url: `${base}/v1/images/generations`, headers, body: input })
            : yield* ProviderHttp.send(name, { method: "POST", url: `${base}/v1/images/edits`, headers, form: yield* editForm(input, imageUrls) })
          return { _tag: "Completed" as const, result: ProviderHttp.result(job.job, yield* files(answer.body)) }
        }),
      poll: () =>
        Effect.fail(new UpstreamError({ message: `${name} is synchronous: there is no job to poll`, reason: null, retryable: false }))
    }
    return provider
  })
