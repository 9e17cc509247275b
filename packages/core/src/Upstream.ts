/**
 * The provider that actually runs a job. The simulator is the embedded default.
 */
import type { Effect } from "effect"
import { Context } from "effect"
import type { UpstreamError } from "./Errors.js"
import type { TaskId, UpstreamId } from "./Ids.js"
import type { TaskResult, UpstreamJob } from "./Task.js"

/** What submitting a job gave: the result (sync upstreams) or the upstream's id for polling. */
export type SubmitOutcome =
  | { readonly _tag: "Completed"; readonly result: TaskResult }
  | { readonly _tag: "Accepted"; readonly upstreamId: UpstreamId }

/** What polling a job gave. */
export type PollOutcome =
  | { readonly _tag: "Running" }
  | { readonly _tag: "Completed"; readonly result: TaskResult }

/** An upstream provider. */
export class Upstream extends Context.Tag("@mediagate/core/Upstream")<Upstream, {
  readonly submit: (job: UpstreamJob, context: { readonly taskId: TaskId }) => Effect.Effect<SubmitOutcome, UpstreamError>
  readonly poll: (upstreamId: UpstreamId, job: UpstreamJob) => Effect.Effect<PollOutcome, UpstreamError>
}>() {}
