/**
 * What the catalog knows of one model: how to validate and normalise its input into an
 * upstream job, what it outputs, how long it may take, how it is priced.
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
   * The job to run instead when this model's job failed (motion-2.0 falls back to
   * motion-1.5-pro), or undefined when the model has no fallback or this job may not take it.
   */
  readonly fallback?: (job: UpstreamJob, failure: string) => UpstreamJob | undefined
}
