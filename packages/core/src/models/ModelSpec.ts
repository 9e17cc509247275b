/**
 * What the catalog knows of one model: how to validate and normalise its input into an
 * upstream job, what it outputs, how long it may take.
 */
import type { Duration, Either, Schema } from "effect"
import type { ValidationError } from "../Errors.js"
import type { UpstreamJob } from "../Task.js"

/** One model id as clients spell it in `model`. */
export interface ModelSpec {
  readonly id: string
  readonly family: string
  readonly output: "image" | "video"
  /** The Effect Schema of `input`; the catalog endpoint renders it as JSON Schema. */
  readonly inputSchema: Schema.Schema.Any
  /** After this long without a terminal state the task becomes TIMEOUT. */
  readonly deadline: Duration.Duration
  /** Validates `input` and resolves every default into the job an upstream runs. */
  readonly normalize: (input: unknown) => Either.Either<UpstreamJob, ValidationError>
}
