/**
 * The spec's media rules around any Upstream (spec 2 and 4.3), as a wrapper. What applies
 * to a job is a fact about its model, read from the model's spec in the catalog
 * (`ModelCatalog.forJob`):
 *
 * - `transcodesWebp` (alpha-image-2 image-to-image): a WebP input is fetched (SafeFetch),
 *   transcoded to JPEG, stored in the MediaStore, and the upstream receives our hosted
 *   JPEG's URL.
 * - `materials` (motion `mediaUrls`): every material is fetched and probed (kind from the
 *   bytes, durations of video and audio), then the model's rules are checked with what the
 *   files show; the first rule broken, or a file that cannot be fetched or read, fails the
 *   task with INVALID_PARAMETERS and a message naming it.
 * - `hostsResults` (alpha-image-2 and beta-imagine, "by the service's own CDN"): the wrapper
 *   says so (`hostsResults`) and copies them (`hostResult`), and the engine runs that copy as
 *   a step of its own once the upstream's job succeeded, retrying a failed copy with backoff
 *   until the task's deadline without ever submitting the job again. Submit and poll answer
 *   the upstream's result as given. Other models' URLs are returned as given.
 *
 * Everything is fetched through SafeFetch, so every address rule applies at connection time,
 * except our own files: an input under `mediaBaseUrl` (an upload, a result of ours) is read
 * from the MediaStore, never over the network. The upstream still receives its URL as given
 * (a provider fetches it from our public address).
 */
import type { ModelSpec, Task } from "@mediagate/core"
import { MediaProbe, MediaStore, ModelCatalog, SafeFetch, Transcoder, Upstream, UpstreamError, UrlPolicy } from "@mediagate/core"
import { Effect, Either, Layer, Option } from "effect"

type UpstreamJob = Task.UpstreamJob
type TaskResult = Task.TaskResult

/** Settings of the wrapper. */
export interface Options {
  /** The MediaStore's public base URL: results already there are not copied again. */
  readonly mediaBaseUrl: string
  /** Longest total of video, and of audio, among a job's materials; the model's own when absent (motion: 15 s). */
  readonly maxMaterialSeconds?: number
}

/** Fetch failures no later try cures: the result's URL itself is not one we may fetch, or the file is too large. */
const permanentFetchFailures: ReadonlySet<SafeFetch.SafeFetchError["reason"]> = new Set(["InvalidUrl", "NotPublic", "Redirect", "TooLarge"])

/** A rule of the request broken: the task fails with INVALID_PARAMETERS, not retried. */
const invalid = (message: string) => new UpstreamError({ message, reason: "INVALID_PARAMETERS", retryable: false })

/** The extension the MediaStore serves a sniffed content type under. */
const extensionOf = (contentType: string) =>
  Object.entries(MediaStore.contentTypes).find(([, type]) => type === contentType)?.[0]

type MaterialRules = NonNullable<ModelSpec["materials"]>

/** The Upstream `inner` with the media rules around it. */
export const make = (inner: Upstream.Upstream["Type"], options: Options) =>
  Effect.gen(function*() {
    const fetch = yield* SafeFetch.SafeFetch
    const probe = yield* MediaProbe.MediaProbe
    const transcoder = yield* Transcoder.Transcoder
    const media = yield* MediaStore.MediaStore
    const catalog = yield* ModelCatalog.ModelCatalog
    const base = options.mediaBaseUrl.replace(/\/+$/, "")

    /** The MediaStore key an input URL of ours names (`<mediaBaseUrl>/<key>`); none for any other URL. */
    const ownKey = (url: string) => Option.fromNullable(UrlPolicy.underMediaBase(url, base))

    /** A file of ours as SafeFetch answers one (typed from its bytes); a missing one fails as a 404 would, naming the URL. */
    const readOwn = (url: string, key: string) =>
      media.get(key).pipe(
        Effect.mapError((error) => new SafeFetch.SafeFetchError({ url, reason: "Failed", message: `${url}: reading it from the media store failed: ${error.message}` })),
        Effect.flatMap(Option.match({
          onNone: () => Effect.fail(new SafeFetch.SafeFetchError({ url, reason: "Status", message: `${url}: no such file on this server` })),
          onSome: ({ bytes }) => Effect.succeed<SafeFetch.Fetched>({ url, bytes, contentType: MediaProbe.contentType(bytes) })
        }))
      )

    /** An input's bytes: ours from the MediaStore, any other over the network (SafeFetch). */
    const download = (url: string) => Option.match(ownKey(url), { onNone: () => fetch.get(url), onSome: (key) => readOwn(url, key) })

    /** What an input is: ours probed from the MediaStore's bytes, any other through `probeUrl`. */
    const probeInput = (url: string) =>
      Option.match(ownKey(url), {
        onNone: () => probe.probeUrl(url),
        onSome: (key) =>
          Effect.flatMap(readOwn(url, key), (fetched) =>
            probe.probe(fetched.bytes).pipe(
              Effect.mapError((error) => new MediaProbe.MediaProbeError({ reason: error.reason, message: `${url}: ${error.message}` }))
            ))
      })

    /** A WebP input becomes our hosted JPEG. */
    const jpegInput = (job: UpstreamJob) =>
      Effect.forEach(job.imageUrls, (url, index) =>
        download(url).pipe(
          Effect.mapError((error) => invalid(`input.imageUrls[${index}]: ${error.message}`)),
          Effect.flatMap((fetched) =>
            fetched.contentType !== "image/webp"
              ? Effect.succeed(url)
              : transcoder.webpToJpeg(fetched.bytes).pipe(
                Effect.mapError((error) => invalid(`input.imageUrls[${index}]: ${error.message}`)),
                Effect.flatMap((bytes) => media.put({ bytes, contentType: "image/jpeg", extension: "jpg" })),
                Effect.catchTag("MediaError", (error) =>
                  Effect.fail(new UpstreamError({ message: `storing the JPEG of input.imageUrls[${index}] failed: ${error.message}`, reason: null, retryable: true })))
              )
          )
        )).pipe(Effect.map((imageUrls) => ({ ...job, imageUrls })))

    /** The materials typed from their bytes, then the model's rules on them. */
    const checkedMaterials = (job: UpstreamJob, rules: MaterialRules) =>
      Effect.gen(function*() {
        const materials = rules.of(job)
        if (materials.length === 0) return job
        const probed = yield* Effect.forEach(materials, (material, index) =>
          probeInput(material.url).pipe(Effect.mapError((error) => invalid(`input.${rules.field}[${index}]: ${error.message}`))), { concurrency: 4 })
        const files = materials.map((material, index) => ({ url: material.url, type: probed[index]!.kind, durationSeconds: probed[index]!.durationSeconds }))
        return yield* Either.mapLeft(rules.check(job, files, options.maxMaterialSeconds ?? rules.maxSeconds), invalid)
      })

    const prepare = (job: UpstreamJob): Effect.Effect<UpstreamJob, UpstreamError> =>
      Option.match(catalog.forJob(job), {
        onNone: () => Effect.succeed(job),
        onSome: (spec) =>
          spec.transcodesWebp
            ? jpegInput(job)
            : spec.materials !== undefined
            ? checkedMaterials(job, spec.materials)
            : Effect.succeed(job)
      })

    /** One result file copied to the MediaStore (unless it is there already). */
    const copy = (url: string) =>
      ours(url)
        ? Effect.succeed(url)
        : fetch.get(url).pipe(
          Effect.catchTag("SafeFetchError", (error) =>
            Effect.fail(
              new Upstream.ResultCopyError({
                message: `copying the result failed: ${error.message}`,
                // A URL we may never fetch stays so; a download that failed may pass later.
                retryable: !permanentFetchFailures.has(error.reason)
              })
            )),
          Effect.flatMap((fetched) => {
            const extension = extensionOf(fetched.contentType)
            return extension === undefined
              ? Effect.fail(new Upstream.ResultCopyError({ message: `the result ${url} is not an image or video we serve (${fetched.contentType})`, retryable: false }))
              : media.put({ bytes: fetched.bytes, contentType: fetched.contentType, extension }).pipe(
                Effect.mapError((error) => new Upstream.ResultCopyError({ message: `storing the result ${url} failed: ${error.message}`, retryable: true }))
              )
          })
        )

    /** Ours already (the simulator writes its files to the MediaStore): nothing to copy. */
    const ours = (url: string) => url.startsWith(`${base}/`)

    const hostResult = (_job: UpstreamJob, result: TaskResult): Effect.Effect<TaskResult, Upstream.ResultCopyError> =>
      Effect.map(Effect.forEach(result.urls, copy, { concurrency: 4 }), (urls) => ({ ...result, urls }))

    const service: Upstream.Upstream["Type"] = {
      ...inner,
      submit: (job, context) => Effect.flatMap(prepare(job), (prepared) => inner.submit(prepared, context)),
      hostsResults: (job, result) => Option.exists(catalog.forJob(job), (spec) => spec.hostsResults) && !result.urls.every(ours),
      hostResult
    }
    return service
  })

/** Wraps the Upstream in context (provide the inner one below this layer). */
export const layer = (
  options: Options
): Layer.Layer<
  Upstream.Upstream,
  never,
  Upstream.Upstream | ModelCatalog.ModelCatalog | SafeFetch.SafeFetch | MediaProbe.MediaProbe | Transcoder.Transcoder | MediaStore.MediaStore
> =>
  Layer.effect(Upstream.Upstream, Effect.flatMap(Upstream.Upstream, (inner) => make(inner, options)))
