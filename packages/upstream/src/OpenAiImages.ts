/**
 * An OpenAI-compatible images API (https://platform.openai.com/docs/api-reference/images), a
 * synchronous upstream like the spec's alpha-image-2: the call answers with the images.
 *
 * - `POST {base}/v1/images/generations` with JSON (`model`, `prompt`, `n`, `size`, ...);
 * - with reference images, `POST {base}/v1/images/edits` as multipart/form-data: the input's
 *   fields, and each reference image downloaded and attached (`image`, or `image[]` for
 *   several), typed and named by its bytes (PNG, JPEG or WebP; anything else is refused
 *   before any call, INVALID_PARAMETERS);
 * - sizes and `n` per model family (`familyOf`): the default input sends the size the model
 *   takes nearest the job's, and an `n` above what one call draws (dall-e-3: 1) is split
 *   into several calls;
 * - the answer's `data[]` holds a `url` or a `b64_json` each; base64 images are stored in the
 *   MediaStore, so the task still returns URLs;
 * - of a split job, each call is paid for: when some fail, the others run to their end and
 *   the submit fails with what they drew (`UpstreamError.partialResult`), which the engine
 *   keeps on the attempt and gives back with its next submit (`SubmitContext.partialResult`);
 *   that submit asks only for the images still missing.
 *
 * `Authorization: Bearer <key>`; a refusal by the provider's safety system (400,
 * `content_policy_violation` or `moderation_blocked`) is CONTENT_MODERATION.
 */
import type { Task } from "@mediagate/core"
import { MediaProbe, MediaStore, UpstreamError } from "@mediagate/core"
import { Effect, Either, Option } from "effect"
import * as ProviderHttp from "./ProviderHttp.js"
import type { Provider } from "./Router.js"

/** Where the images API is and how to call it. */
export interface Options {
  /** The API key (`OPENAI_API_KEY`). */
  readonly key: string
  /** Default `https://api.openai.com`. */
  readonly baseUrl?: string
  /** The provider's name in routes. Default `openai`. */
  readonly name?: string
}

/**
 * What one family of OpenAI image models takes, from the official client's types (`openai`
 * 6, resources/images.ts): its sizes (`auto` where it may choose), how many images one call
 * may ask, and whether it answers URLs (dall-e: `response_format`; the GPT image models
 * always answer base64).
 */
export interface Family {
  readonly sizes: ReadonlyArray<string>
  readonly perCall: number
  readonly urls: boolean
}

/** The families by model: dall-e-2, dall-e-3, and the GPT image models (any other name, as OpenAI-compatible services mostly take these). */
export const familyOf = (model: string): Family =>
  model.startsWith("dall-e-2")
    ? { sizes: ["256x256", "512x512", "1024x1024"], perCall: 10, urls: true }
    : model.startsWith("dall-e-3")
    ? { sizes: ["1024x1024", "1792x1024", "1024x1792"], perCall: 1, urls: true }
    : { sizes: ["1024x1024", "1536x1024", "1024x1536", "auto"], perCall: 10, urls: false }

/** Width over height of the job: its ratio, else its pixel size; undefined when it asks for neither. */
const aspectOf = (job: Task.UpstreamJob): number | undefined => {
  if (job.ratio !== null) {
    const [w, h] = job.ratio.split(":").map(Number) as [number, number]
    if (w > 0 && h > 0) return w / h
  }
  return job.width !== null && job.height !== null && job.width > 0 && job.height > 0 ? job.width / job.height : undefined
}

/**
 * The size `model` takes nearest the job's: the nearest in shape (by the logarithm of the
 * aspect ratios, so 2:1 and 1:2 are as far from square), then the nearest in pixels to the
 * job's own size, or the largest when it has none. A job without ratio nor size gets `auto`
 * where the model takes it, else the square. Default model: the GPT image models'.
 */
export const sizeOf = (job: Task.UpstreamJob, model = "gpt-image-1"): string => {
  const { sizes } = familyOf(model)
  const aspect = aspectOf(job)
  if (aspect === undefined && sizes.includes("auto")) return "auto"
  const pixels = job.width !== null && job.height !== null ? job.width * job.height : undefined
  const ranked = sizes.filter((size) => size !== "auto").map((size) => {
    const [w, h] = size.split("x").map(Number) as [number, number]
    return {
      size,
      shape: Math.abs(Math.log(w / h / (aspect ?? 1))),
      scale: pixels === undefined ? -w * h : Math.abs(Math.log((w * h) / pixels))
    }
  })
  ranked.sort((a, b) => a.shape - b.shape || a.scale - b.scale)
  return ranked[0]!.size
}

/**
 * The input each OpenAI image model takes: the prompt, how many, and its size for the job.
 * dall-e is asked for base64, stored like the GPT image models' answers, since its URLs
 * expire after an hour.
 */
export const defaultInput = (job: Task.UpstreamJob, model: string): Readonly<Record<string, unknown>> => ({
  model,
  prompt: job.prompt,
  n: job.n,
  size: sizeOf(job, model),
  ...(familyOf(model).urls ? { response_format: "b64_json" } : {})
})

/**
 * The inputs of the calls that draw what `input` asks: one, unless its `n` is more than one
 * call of its model draws (dall-e-3: one image, the others: ten), then as many as it takes,
 * each asking at most that many.
 */
export const callsOf = (input: Readonly<Record<string, unknown>>): ReadonlyArray<Readonly<Record<string, unknown>>> => {
  const n = input["n"]
  const { perCall } = familyOf(String(input["model"]))
  if (typeof n !== "number" || !Number.isInteger(n) || n <= perCall) return [input]
  return Array.from({ length: Math.ceil(n / perCall) }, (_, i) => ({ ...input, n: Math.min(perCall, n - i * perCall) }))
}

/** The image formats the edits take, by what the bytes are, with the extension a file of each is named with. */
const editFormats: Partial<Record<MediaProbe.Format, string>> = { png: "png", jpeg: "jpg", webp: "webp" }

/** The format of an answer's image: its bytes, else the answer's `output_format`, else PNG. */
const formatOf = (bytes: Uint8Array, outputFormat: unknown): "png" | "jpeg" | "webp" => {
  const sniffed = MediaProbe.sniff(bytes)
  if (sniffed === "png" || sniffed === "jpeg" || sniffed === "webp") return sniffed
  return outputFormat === "jpeg" || outputFormat === "webp" ? outputFormat : "png"
}

/** The `openai` provider; base64 images are stored in the host's MediaStore. */
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
        return yield* Effect.forEach(data, (item) => {
          const url = ProviderHttp.stringField(item, "url")
          if (Option.isSome(url)) return Effect.succeed(url.value)
          const encoded = ProviderHttp.stringField(item, "b64_json")
          if (Option.isNone(encoded)) return Effect.fail(ProviderHttp.malformed(name, "a url or b64_json", item))
          const bytes = new Uint8Array(Buffer.from(encoded.value, "base64"))
          const format = formatOf(bytes, ProviderHttp.field(body, "output_format"))
          return media.put({ bytes, contentType: MediaProbe.formats[format].contentType, extension: editFormats[format]! }).pipe(
            Effect.mapError((error) => new UpstreamError({ message: `storing ${name}'s image failed: ${error.message}`, reason: null, retryable: true }))
          )
        })
      })

    /**
     * A reference image as the edits take it: typed and named by its bytes, since hosts (object
     * storage above all) often serve images as application/octet-stream, which the API refuses.
     */
    const reference = (url: string) =>
      Effect.gen(function*() {
        const { bytes } = yield* ProviderHttp.download(name, url)
        const format = MediaProbe.sniff(bytes)
        const extension = format === undefined ? undefined : editFormats[format]
        if (format === undefined || extension === undefined) {
          return yield* Effect.fail(
            new UpstreamError({ message: `the input ${url} is not a PNG, JPEG or WebP image, the only files ${name} takes`, reason: "INVALID_PARAMETERS", retryable: false })
          )
        }
        return { bytes, type: MediaProbe.formats[format].contentType, extension }
      })

    /** The edits call: the input's fields and the reference images as files (`image`, or `image[]` for several). */
    const editForm = (input: Readonly<Record<string, unknown>>, images: ReadonlyArray<Effect.Effect.Success<ReturnType<typeof reference>>>) => {
      const form = new FormData()
      for (const [key, value] of Object.entries(input)) {
        if (value !== undefined && value !== null) form.append(key, typeof value === "string" ? value : JSON.stringify(value))
      }
      const field = images.length > 1 ? "image[]" : "image"
      for (const [i, image] of images.entries()) {
        form.append(field, new Blob([image.bytes], { type: image.type }), `image-${i + 1}.${image.extension}`)
      }
      return form
    }

    const provider: Provider = {
      name,
      submit: (job, given, context) =>
        Effect.gen(function*() {
          // The target's model unless the input names one.
          const named = given["model"] === undefined ? { model: job.model, ...given } : given
          // What this attempt's earlier calls drew is kept: only the rest is asked for.
          const kept = context.partialResult?.urls ?? []
          const n = named["n"]
          const input = kept.length > 0 && typeof n === "number" ? { ...named, n: n - kept.length } : named
          if (kept.length > 0 && typeof n === "number" && n <= kept.length) {
            return { _tag: "Completed" as const, result: ProviderHttp.result(job.job, kept.slice(0, n)) }
          }
          const imageUrls = job.job.imageUrls
          const images = yield* Effect.forEach(imageUrls, reference, { concurrency: 4 })
          // Several calls go at once: a synchronous job's time limit covers them all. Each runs
          // to its end whatever the others do: a call that failed does not lose what the others drew.
          const answers = yield* Effect.forEach(callsOf(input), (call) =>
            (images.length === 0
              ? ProviderHttp.send(name, { method: "POST", url: `${base}/v1/images/generations`, headers, body: call })
              : ProviderHttp.send(name, { method: "POST", url: `${base}/v1/images/edits`, headers, form: editForm(call, images) })).pipe(
                Effect.flatMap((answer) => files(answer.body)),
                Effect.either
              ), { concurrency: "unbounded" })
          const drawn = [...kept, ...answers.flatMap((answer) => Either.isRight(answer) ? answer.right : [])]
          const failures = answers.flatMap((answer) => Either.isLeft(answer) ? [answer.left] : [])
          // A permanent failure decides the attempt's end; otherwise the first transient one is told.
          const failure = failures.find((error) => !error.retryable) ?? failures[0]
          if (failure === undefined) return { _tag: "Completed" as const, result: ProviderHttp.result(job.job, drawn) }
          if (drawn.length === 0) return yield* Effect.fail(failure)
          // The images drawn were paid for: the engine keeps them on the attempt and hands them back.
          return yield* Effect.fail(
            new UpstreamError({
              message: `${failure.message} (${drawn.length} image(s) drawn before it are kept for the attempt)`,
              reason: failure.reason,
              retryable: failure.retryable,
              ...(failure.retryAfterMs === undefined ? {} : { retryAfterMs: failure.retryAfterMs }),
              partialResult: ProviderHttp.result(job.job, drawn)
            })
          )
        }),
      poll: () =>
        Effect.fail(new UpstreamError({ message: `${name} is synchronous: there is no job to poll`, reason: null, retryable: false }))
    }
    return provider
  })
