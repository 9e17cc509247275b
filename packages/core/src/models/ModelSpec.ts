/**
 * What the catalog knows of one model: how to validate and normalise its input into an
 * upstream job, what it outputs, how long it may take, how it is priced, and what the service
 * does around its upstream (hosted results, transcoded input, rules on its materials).
 */
import type { Duration, Either, Schema } from "effect"
import type { ValidationError } from "../domain/Errors.js"
import type { MediaUrl } from "./Fields.js"
import type { UpstreamJob } from "../domain/Task.js"
import type { PriceTable } from "./Pricing.js"

/** A job as normalisation leaves it; the price is added by the catalog. */
export type DraftJob = Omit<UpstreamJob, "priceMicroUsd">

/**
 * The outcome of normalising an accepted request. `rejection` is set when the spec says a
 * rule makes the task fail (rather than the submit call): the task is created and ends at
 * once in FAILURE with INVALID_PARAMETERS (motion mediaUrls counts).
 */
export interface Normalized {
  readonly job: DraftJob
  readonly rejection?: string
}

/** The kinds of material a model may take (spec: material types). */
export type MaterialType = "image" | "video" | "audio"

/**
 * A material as the job carries it. A URL without a known extension (a signed URL, say)
 * is "unknown": it is kept, and its type is told from the file when it is fetched.
 */
export interface Material {
  readonly url: string
  readonly type: MaterialType | "unknown"
}

/** A material as its file shows it: what it is and, for video and audio, how long it lasts. */
export interface MaterialFile {
  readonly url: string
  readonly type: MaterialType
  readonly durationSeconds?: number | undefined
}

/**
 * A model's rules on its materials (motion's `mediaUrls`) that need the files themselves.
 * `normalize` applies what the URLs tell at submit; a wrapper that fetches the files
 * (MediaUpstream) applies these, with each file's type and duration, before the upstream
 * sees the job.
 */
export interface MaterialRules {
  /** The input field the materials came from, as messages name it. */
  readonly field: string
  /** Longest total of video, and of audio, in seconds; a deployment may choose another. */
  readonly maxSeconds: number
  /** The job's materials; none for a job without them (text-to-video). */
  readonly of: (job: UpstreamJob) => ReadonlyArray<Material>
  /**
   * The job with its materials as their files show them (types, and the mode they select),
   * or the first rule they break, in the spec's order: the message the task fails with.
   */
  readonly check: (job: UpstreamJob, files: ReadonlyArray<MaterialFile>, maxSeconds: number) => Either.Either<UpstreamJob, string>
}

/** A valid request and what it must produce, used by the docs and the conformance tests. */
export interface ModelExample {
  readonly input: Readonly<Record<string, unknown>>
  readonly type: "image" | "video"
  readonly count: number
}

/**
 * One model id as clients spell it in `model`. The parameters keep a model module's literal
 * id and its input Schema's type (so @mediagate/client derives each model's input type);
 * their defaults make a plain `ModelSpec` the catalog's uniform view of any model.
 */
export interface ModelSpec<Id extends string = string, S extends Schema.Schema.Any = Schema.Schema.Any> {
  readonly id: Id
  readonly family: string
  readonly output: "image" | "video"
  /** The modes the model runs in; the input selects one. */
  readonly modes: ReadonlyArray<string>
  /** The Effect Schema of `input`; the catalog endpoint renders it as JSON Schema. */
  readonly inputSchema: S
  /** Every URL of an accepted input that is fetched, from the fields its schema marks `MediaUrls`. */
  readonly mediaUrls: (input: Readonly<Record<string, unknown>>) => ReadonlyArray<MediaUrl>
  /** Whether fields the schema does not name pass through to the upstream (spec leaves them open). */
  readonly passThrough: boolean
  /** Defaults applied when a field is omitted. */
  readonly defaults: Readonly<Record<string, unknown>>
  /** Limits beyond the schema, in words. */
  readonly limits: ReadonlyArray<string>
  /** The price rule, in words. */
  readonly priceRule: string
  /** After this long without a terminal state the task becomes TIMEOUT. */
  readonly deadline: Duration.Duration
  /** Validates `input` and resolves every default into the job an upstream runs. */
  readonly normalize: (input: unknown) => Either.Either<Normalized, ValidationError>
  /** Price of a normalised job in integer micro-USD. */
  readonly price: (job: DraftJob, prices: PriceTable) => number
  readonly examples: ReadonlyArray<ModelExample>
  /**
   * Whether the service hosts the model's results itself (spec 2, "by the service's own
   * CDN"): the wrapper that owns the MediaStore (MediaUpstream) copies them there.
   */
  readonly hostsResults: boolean
  /** Whether WebP image input reaches the upstream as a JPEG the service transcodes and hosts (MediaUpstream). */
  readonly transcodesWebp: boolean
  /** Rules on the job's materials that need their files (motion), or undefined for models without materials. */
  readonly materials?: MaterialRules
  /**
   * The job to run instead when this model's job failed (motion-2.0 falls back to
   * motion-1.5-pro), or undefined when the model has no fallback or this job may not take it.
   */
  readonly fallback?: (job: UpstreamJob, failure: string) => UpstreamJob | undefined
}
