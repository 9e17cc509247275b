/**
 * Runs a job through a provider adapter as the engine would, without its timing: submit,
 * then poll until the provider answers with the result.
 */
import type { Task } from "@mediagate/core"
import { Ids } from "@mediagate/core"
import type { Router } from "@mediagate/upstream"
import { Effect } from "effect"

export const generate = (provider: Router.Provider, job: Task.UpstreamJob, model: string, input: Record<string, unknown>, key: string) =>
  Effect.gen(function*() {
    const submitted = yield* provider.submit({ job, model }, input, { taskId: Ids.TaskId.make("t1"), idempotencyKey: key, request: {} })
    if (submitted._tag !== "Accepted") return submitted.result
    for (;;) {
      const polled = yield* provider.poll(submitted.upstreamId, { job, model })
      if (polled._tag === "Completed") return polled.result
    }
  })
