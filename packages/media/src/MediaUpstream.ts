/**
 * The spec's media rules around any Upstream (spec 2 and 4.3), as a wrapper:
 *
 * - alpha-image-2 image-to-image: a WebP input is fetched (SafeFetch), transcoded to JPEG,
 *   stored in the MediaStore, and the upstream receives our hosted JPEG's URL.
 * - motion `mediaUrls`: every material is fetched and probed (kind from the bytes, durations
 *   of video and audio), then the spec's rules are checked in its order (at most 9 images,
 *   total video at most 15 s, total audio at most 15 s; motion-1.5-pro: images only, at most
 *   2); the first rule broken, or a file that cannot be fetched or read, fails the task with
 *   INVALID_PARAMETERS and a message naming it.
 * - Results of alpha-image-2 and beta-imagine are hosted by the service ("by the service's
 *   own CDN"): the wrapper says so (`hostsResults`) and copies them (`hostResult`), and the
 *   engine runs that copy as a step of its own once the upstream's job succeeded, retrying a
 *   failed copy with backoff until the task's deadline without ever submitting the job again.
 *   Submit and poll answer the upstream's result as given. Other models' URLs are returned
 *   as given.
 *
 * Everything is fetched through SafeFetch, so every address rule applies at connection time.
 */
import type { Task } from "@mediagate/core"
import { MediaProbe, MediaStore, Motion, SafeFetch, Transcoder, Upstream, UpstreamError } from "@mediagate/core"

type UpstreamJob = Task.UpstreamJob
type TaskResult = Task.TaskResult
import { Effect, Layer } from "effect"

/** Settings of the wrapper. */
export interface Options {
  /** The MediaStore's public base URL: results already there are not copied again. */
  readonly mediaBaseUrl: string
  /** Longest total of video, and of audio, among motion materials (spec: 15 s). */
  readonly maxMaterialSeconds?: number
}

/** Models whose results the service hosts itself (spec section 2). */
const hostsResults = (job: UpstreamJob) => job.model === "alpha-image-2" || job.model.startsWith("beta-imagine")

/** Fetch failures no later try cures: the result's URL itself is not one we may fetch, or the file is too large. */
const permanentFetchFailures: ReadonlySet<SafeFetch.SafeFetchError["reason"]> = new Set(["InvalidUrl", "NotPublic", "Redirect", "TooLarge"])

/** A rule of the request broken: the task fails with INVALID_PARAMETERS, not retried. */
const invalid = (message: string) => new UpstreamError({ message, reason: "INVALID_PARAMETERS", retryable: false })

/** The extension the MediaStore serves a sniffed content type under. */
const extensionOf = (contentType: string) =>
  Object.entries(MediaStore.contentTypes).find(([, type]) => type === contentType)?.[0]

type Material = Motion.Material

/** Seconds as the messages show them: 15.2 s. */
const seconds = (value: number) => `${Math.round(value * 10) / 10} s`

/** The Upstream `inner` with the media rules around it. */
export const make = (inner: Upstream.Upstream["Type"], options: Options) =>
  Effect.gen(function*() {
    const fetch = yield* SafeFetch.SafeFetch
    const probe = yield* MediaProbe.MediaProbe
    const transcoder = yield* Transcoder.Transcoder
    const media = yield* MediaStore.MediaStore
    const base = options.mediaBaseUrl.replace(/\/+$/, "")
    const maxSeconds = options.maxMaterialSeconds ?? 15

    /** alpha-image-2 image-to-image: a WebP input becomes our hosted JPEG. */
    const jpegInput = (job: UpstreamJob) =>
      Effect.forEach(job.imageUrls, (url, index) =>
        fetch.get(url).pipe(
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

    /** motion: the materials typed from their bytes, then the spec's rules in its order. */
    const checkedMaterials = (job: UpstreamJob) =>
      Effect.gen(function*() {
        const materials = (job.params["materials"] ?? []) as ReadonlyArray<Material>
        if (materials.length === 0) return job
        // (imageUrls is accepted as another name for mediaUrls; messages use the spec's name.)
        const field = "mediaUrls"
        const probed = yield* Effect.forEach(materials, (material, index) =>
          probe.probeUrl(material.url).pipe(Effect.mapError((error) => invalid(`input.${field}[${index}]: ${error.message}`))), { concurrency: 4 })
        const typed: ReadonlyArray<Material> = materials.map((material, index) => ({ url: material.url, type: probed[index]!.kind }))
        const images = typed.filter((material) => material.type === "image").length
        if (images > 9) return yield* invalid(`input.${field} may contain at most 9 images (it has ${images})`)
        for (const kind of ["video", "audio"] as const) {
          const total = probed.filter((found) => found.kind === kind).reduce((sum, found) => sum + (found.durationSeconds ?? 0), 0)
          if (total > maxSeconds) return yield* invalid(`input.${field}: the ${kind} materials last ${seconds(total)} in all; at most ${maxSeconds} s`)
        }
        const tier = job.model as Motion.Tier
        const rejection = Motion.rejectionOf(tier, `input.${field}`, typed)
        if (rejection !== undefined) return yield* invalid(rejection)
        return {
          ...job,
          mode: Motion.modeOf(tier, typed),
          imageUrls: typed.filter((material) => material.type === "image").map((material) => material.url),
          params: { ...job.params, materials: typed }
        }
      })

    const prepare = (job: UpstreamJob): Effect.Effect<UpstreamJob, UpstreamError> =>
      job.model === "alpha-image-2" && job.mode === "image-to-image"
        ? jpegInput(job)
        : job.model.startsWith("motion-") && Array.isArray(job.params["materials"])
        ? checkedMaterials(job)
        : Effect.succeed(job)

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
      hostsResults: (job, result) => hostsResults(job) && !result.urls.every(ours),
      hostResult
    }
    return service
  })

/** Wraps the Upstream in context (provide the inner one below this layer). */
export const layer = (
  options: Options
): Layer.Layer<Upstream.Upstream, never, Upstream.Upstream | SafeFetch.SafeFetch | MediaProbe.MediaProbe | Transcoder.Transcoder | MediaStore.MediaStore> =>
  Layer.effect(Upstream.Upstream, Effect.flatMap(Upstream.Upstream, (inner) => make(inner, options)))
