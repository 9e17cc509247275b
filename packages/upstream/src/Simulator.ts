/**
 * The simulator: the embedded default upstream (DESIGN.md section 6). Deterministic for a
 * seed, timed only by Effect's Clock, producing real files through the MediaStore.
 */
import { AlphaImage2, Ids, MediaStore, Upstream, UpstreamError } from "@mediagate/core"
import type { Task } from "@mediagate/core"
import { Clock, Effect, Layer } from "effect"
import { encodeMp4 } from "./Mp4.js"
import { encodePng } from "./Png.js"

/** Latency profiles: none, a few seconds (the standalone default), or the spec's typical times. */
export type Profile = "instant" | "demo" | "realistic"

/** Simulator settings. */
export interface Options {
  readonly profile: Profile
  /** Varies latencies and images; the same seed gives the same run. Default 0. */
  readonly seed?: number
  /** Where the simulator counts what it did; tests pass one to look at it. */
  readonly stats?: Stats
}

/** How many idempotency keys the simulator remembers (the oldest are forgotten first). */
const rememberedKeys = 100_000

/**
 * What the simulator did, for tests and benchmarks: files encoded (the rest came from the
 * cache), upstream jobs started, in all and per idempotency key, and jobs cancelled. An
 * async submit repeated with a key already accepted starts no job (the simulator honours
 * idempotency keys, as the upstreams the engine is built for do); every sync call starts
 * one, so a sync call made twice under one key counts 2. Counts live in this object only:
 * a process that dies takes them with it.
 */
export class Stats {
  encodes = 0
  jobs = 0
  readonly cancelled = new Set<string>()
  /** Jobs started per idempotency key (`<taskId>.<attempt>` from the engine), the newest 100,000 keys. */
  readonly jobsByKey = new Map<string, number>()
  /** Upstream jobs started under one idempotency key: 1 for each attempt the engine made once. */
  jobsFor(idempotencyKey: string): number {
    return this.jobsByKey.get(idempotencyKey) ?? 0
  }
  /** Counts a job started under `idempotencyKey`. */
  jobStarted(idempotencyKey: string): void {
    this.jobs++
    this.jobsByKey.set(idempotencyKey, this.jobsFor(idempotencyKey) + 1)
    if (this.jobsByKey.size > rememberedKeys) this.jobsByKey.delete(this.jobsByKey.keys().next().value!)
  }
}

/**
 * Encoded files by shape. Encoding a 1024x1024 PNG takes about 15 ms and a 1080p MP4 150 ms:
 * done for every task, it was most of an instant task's cost. Each shape (kind, size,
 * duration) has a few colour variants, encoded once each; the oldest are dropped past 256 MB.
 */
class FileCache {
  private readonly files = new Map<string, Uint8Array>()
  private bytes = 0
  constructor(private readonly stats: Stats, private readonly limit = 256 * 1024 * 1024) {}
  get(key: string, encode: () => Uint8Array): Uint8Array {
    const cached = this.files.get(key)
    if (cached !== undefined) return cached
    const fresh = encode()
    this.stats.encodes++
    this.files.set(key, fresh)
    this.bytes += fresh.length
    for (const [oldest, file] of this.files) {
      if (this.bytes <= this.limit || oldest === key) break
      this.files.delete(oldest)
      this.bytes -= file.length
    }
    return fresh
  }
}

/** Colour variants per image shape (videos have one). */
const variants = 8

/** FNV-1a of a string: a stable number per task for latencies and colours. */
export const hash = (text: string, seed = 0): number => {
  let h = (0x811c9dc5 ^ seed) >>> 0
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0
  return h
}

const second = 1_000
const minute = 60 * second

/**
 * Typical generation times, [min, max] milliseconds, for the realistic profile: the
 * spec's figures where it gives them (beta-imagine images 5 to 20 s, its video under
 * 5 min, compact 10 to 30 s, motion 2 min to 4 h, clip3 a few minutes), ours elsewhere.
 */
export const realisticLatency: ReadonlyArray<readonly [prefix: string, min: number, max: number]> = [
  ["alpha-image-2", 5 * second, 20 * second],
  ["beta-imagine/text-to-image", 5 * second, 20 * second],
  ["beta-imagine/", 1 * minute, 5 * minute],
  ["clip3", 2 * minute, 5 * minute],
  ["motion", 2 * minute, 240 * minute],
  ["compact-image", 10 * second, 30 * second],
  ["canvas-video", 1 * minute, 10 * minute],
  ["canvas", 10 * second, 40 * second],
  ["dream", 10 * second, 30 * second]
]

/** How long the simulated upstream takes for a job. */
export const latencyMillis = (options: Options, job: Task.UpstreamJob, taskId: string): number => {
  const spread = (min: number, max: number) => min + (hash(taskId, options.seed ?? 0) % (max - min + 1))
  const base = options.profile === "instant"
    ? 0
    : options.profile === "demo"
    ? spread(2_000, 4_000)
    : spread(...(realisticLatency.find(([prefix]) => job.model.startsWith(prefix))?.slice(1) as [number, number] ?? [5_000, 20_000]))
  return job.prompt.includes("[sim:slow]") ? base * 10 : base
}

/** The failure a prompt marker asks for, if any. */
const markedFailure = (job: Task.UpstreamJob): UpstreamError | undefined => {
  const prompt = job.prompt
  return prompt.includes("[sim:fallback]") && job.fallbackModel !== null
    ? new UpstreamError({ message: "simulated failure of the primary model", reason: null, retryable: false })
    : prompt.includes("[sim:fail]")
    ? new UpstreamError({ message: "simulated upstream failure", reason: null, retryable: false })
    : prompt.includes("[sim:rejected]")
    ? new UpstreamError({ message: "simulated content rejection", reason: "CONTENT_MODERATION", retryable: false })
    : prompt.includes("[sim:insufficient]")
    ? new UpstreamError({ message: "simulated insufficient credits", reason: "INSUFFICIENT_POINTS", retryable: false })
    : undefined
}

const neverFinishes = (prompt: string) => prompt.includes("[sim:timeout]")

/** The pixel size the upstream produces: the job's, or the model's choice when the client named no ratio. */
export const pixelSize = (job: Task.UpstreamJob): readonly [number, number] => {
  if (job.width !== null && job.height !== null) return [job.width, job.height]
  const resolution = (job.resolution ?? "1k") as AlphaImage2.Resolution
  return AlphaImage2.pixelSizes[AlphaImage2.defaultRatio(resolution)][resolution] ?? [1024, 1024]
}

/**
 * Upstream ids carry their completion time and their start, so polling needs no memory and
 * survives restarts. Ids from before the start was carried (`sim_<readyAt>_<token>`) still
 * poll; they report no progress. Whole milliseconds: a clock may answer a fraction (the
 * TestClock stops at every sleep's end, such as a third of a heartbeat window), and the id
 * must parse back.
 */
const upstreamIdOf = (startedAt: number, readyAt: number, token: string) =>
  Ids.UpstreamId.make(`sim_${Math.ceil(readyAt)}_${Math.floor(startedAt)}_${token}`)
const parseId = (upstreamId: string): { readonly readyAt: number; readonly startedAt: number | undefined } | undefined => {
  const match = /^sim_(\d+)(?:_(\d+))?_[0-9a-f]+$/.exec(upstreamId)
  return match === null ? undefined : { readyAt: Number(match[1]), startedAt: match[2] === undefined ? undefined : Number(match[2]) }
}

/** The share of a job's time it waits in the simulated queue before it runs. */
const queuedShare = 0.25
/** Queue places the simulator starts a job at: it moves up one place per quarter of its wait. */
const queuePlaces = 4

/**
 * What the simulator says of a job started at `startedAt`, done at `readyAt`, at `now`: in its
 * first quarter queued, its place (1-based) falling from 4 to 1; then running, its percent the
 * share of its running time gone (0..99; 100 is the result), with a log line per quarter done.
 * The log is the whole log so far, as Replicate sends it. Nothing for a job with no duration.
 */
export const progressAt = (startedAt: number, readyAt: number, now: number): Upstream.UpstreamProgress | undefined => {
  const total = readyAt - startedAt
  if (total <= 0) return undefined
  const queuedUntil = startedAt + total * queuedShare
  if (now < queuedUntil) {
    const left = (queuedUntil - Math.max(now, startedAt)) / (queuedUntil - startedAt)
    return { queuePosition: Math.max(1, Math.ceil(left * queuePlaces)), logs: ["job queued"] }
  }
  const percent = Math.min(99, Math.floor((100 * (now - queuedUntil)) / (readyAt - queuedUntil)))
  const quarters = Math.floor(percent / 25)
  return {
    percent,
    logs: ["job queued", "job started", ...Array.from({ length: quarters }, (_, i) => `${(i + 1) * 25}% generated`)]
  }
}

/** Builds the simulator. */
export const make = (options: Options) =>
  Effect.gen(function*() {
    const media = yield* MediaStore.MediaStore
    const ids = yield* Ids.Ids
    const stats = options.stats ?? new Stats()
    const cache = new FileCache(stats)
    /** Accepted async jobs by idempotency key: a repeated submit answers the same job. */
    const accepted = new Map<string, Ids.UpstreamId>()

    const render = (job: Task.UpstreamJob, taskId: string) =>
      Effect.gen(function*() {
        const failure = markedFailure(job)
        if (failure !== undefined) return yield* failure
        const [width, height] = pixelSize(job)
        const store = (bytes: Uint8Array, contentType: string, extension: string) =>
          media.put({ bytes, contentType, extension }).pipe(
            Effect.mapError((error) =>
              new UpstreamError({ message: `storing the result failed: ${error.message}`, reason: null, retryable: true })
            )
          )
        const seed = options.seed ?? 0
        if (job.output === "video") {
          const seconds = job.duration ?? 5
          const bytes = cache.get(`mp4:${width}x${height}:${seconds}`, () => encodeMp4({ width, height, seconds, seed }))
          const url = yield* store(bytes, "video/mp4", "mp4")
          return { type: "video" as const, urls: [url] }
        }
        const urls = yield* Effect.forEach(
          Array.from({ length: job.n }, (_, i) => i),
          (i) => {
            const variant = hash(`${taskId}#${i}`, seed) % variants
            const bytes = cache.get(`png:${width}x${height}:${variant}`, () => encodePng({ width, height, seed: variant + seed * variants }))
            return store(bytes, "image/png", "png")
          }
        )
        return { type: "image" as const, urls }
      })

    // The simulator knows when each job will be done (its id says so), and tells the engine,
    // as a provider that answers an ETA would: an instant job is polled at once. Not for a job
    // that never finishes.
    const acceptance = (upstreamId: Ids.UpstreamId, job: Task.UpstreamJob): Upstream.SubmitOutcome => {
      const readyAt = neverFinishes(job.prompt) ? undefined : parseId(upstreamId)?.readyAt
      return readyAt === undefined ? { _tag: "Accepted", upstreamId } : { _tag: "Accepted", upstreamId, readyAt }
    }

    const service: Upstream.Upstream["Type"] = {
      submit: (job, { idempotencyKey, taskId }) =>
        Effect.gen(function*() {
          const latency = latencyMillis(options, job, taskId)
          if (job.sync) {
            stats.jobStarted(idempotencyKey)
            if (neverFinishes(job.prompt)) return yield* Effect.never
            // An instant job waits for no timer (a zero sleep is a timer's turn of a millisecond or more).
            if (latency > 0) yield* Effect.sleep(latency)
            return { _tag: "Completed" as const, result: yield* render(job, taskId) }
          }
          const known = accepted.get(idempotencyKey)
          if (known !== undefined) return acceptance(known, job)
          const now = yield* Clock.currentTimeMillis
          const upstreamId = upstreamIdOf(now, now + latency, yield* ids.token(8))
          stats.jobStarted(idempotencyKey)
          accepted.set(idempotencyKey, upstreamId)
          if (accepted.size > rememberedKeys) accepted.delete(accepted.keys().next().value!)
          return acceptance(upstreamId, job)
        }),
      cancel: (upstreamId) => Effect.sync(() => void stats.cancelled.add(upstreamId)),
      poll: (upstreamId, job) =>
        Effect.gen(function*() {
          const parsed = parseId(upstreamId)
          if (parsed === undefined) {
            return yield* new UpstreamError({ message: `unknown upstream job ${upstreamId}`, reason: null, retryable: false })
          }
          if (stats.cancelled.has(upstreamId)) {
            return yield* new UpstreamError({ message: `upstream job ${upstreamId} was cancelled`, reason: null, retryable: false })
          }
          const now = yield* Clock.currentTimeMillis
          const { readyAt, startedAt } = parsed
          if (neverFinishes(job.prompt) || now < readyAt) {
            const progress = startedAt === undefined ? undefined : progressAt(startedAt, readyAt, now)
            return progress === undefined ? { _tag: "Running" as const } : { _tag: "Running" as const, progress }
          }
          return { _tag: "Completed" as const, result: yield* render(job, upstreamId) }
        })
    }
    return service
  })

/** The simulator as the Upstream. */
export const layer = (options: Options): Layer.Layer<Upstream.Upstream, never, MediaStore.MediaStore | Ids.Ids> =>
  Layer.effect(Upstream.Upstream, make(options))
