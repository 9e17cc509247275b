/**
 * A relay to another gateway of this spec (another mediagate among them): the task is
 * submitted to its `/api/v1/task/submit` with its key, as the client sent it (the route's
 * input is the client's input by default), and its query endpoint is polled.
 *
 * - Its 400s stay the client's: 'content rejected by moderation' is CONTENT_MODERATION, any
 *   other INVALID_PARAMETERS. Its 401 is our key's fault (permanent, logged as an error).
 * - Its task's SUCCESS gives the result as it is (its URLs); FAILURE passes its
 *   `failure_reason` through with its `error` message; TIMEOUT and CANCELLED there end the
 *   attempt with no class.
 * - Cancel is its `POST /api/v1/task/{id}/cancel`.
 * - A task still running there reports its `progress` (`{stage, queue_position, percent,
 *   logs_tail, updated_at}`, or null): `queue_position`, `percent` and `logs_tail` are passed
 *   on as they are (the lines bounded again), never parsed again; a gateway that reports
 *   none (an older one) gives none.
 *
 * Callbacks: with a webhook URL the submit sets it as `callBackUrl`; the gateway's callback
 * wakes the task. With `webhookSecret` (that gateway's signing secret for our account) a
 * callback must carry its Standard Webhooks signature; without it any callback is taken as
 * a wake-up only, which is harmless: the result is always read from the gateway.
 */
import { Ids, StandardWebhooks, type Task, type Upstream, UpstreamError } from "@mediagate/core"
import { Clock, Effect, Option } from "effect"
import * as Progress from "./ProgressParsing.js"
import * as ProviderHttp from "./ProviderHttp.js"
import type { Provider } from "./Router.js"

export interface Options {
  /** The other gateway's base URL (`https://gateway.example`), without `/api/v1`. */
  readonly baseUrl: string
  /** Our key there. */
  readonly key: string
  /** The provider's name in routes. Default `relay`. */
  readonly name?: string
  /** That gateway's callback signing secret (`whsec_...`) for our account. */
  readonly webhookSecret?: string
}

/** The input a relay sends by default: the client's request as submitted (`model` included). */
export const defaultInput = (_job: Task.UpstreamJob, request: Task.TaskInput): Readonly<Record<string, unknown>> => request

const failureReasons = new Set(["CONTENT_MODERATION", "INVALID_PARAMETERS", "INSUFFICIENT_POINTS"])

/** What the other gateway's running task says of its progress (its `progress`, snake_case). */
export const progressOf = (task: unknown) => {
  const progress = ProviderHttp.field(task, "progress")
  const tail = ProviderHttp.field(progress, "logs_tail")
  return Progress.of({
    queuePosition: Progress.position(ProviderHttp.field(progress, "queue_position")),
    percent: Progress.percent(ProviderHttp.field(progress, "percent")),
    logs: Array.isArray(tail) ? tail.filter((line): line is string => typeof line === "string") : undefined
  })
}

export const make = (options: Options): Provider => {
  const name = options.name ?? "relay"
  const base = `${options.baseUrl.replace(/\/+$/, "")}/api/v1`
  const headers = { authorization: `Bearer ${options.key}` }

  /** The `data` of the other gateway's `{code, msg, data}` envelope. */
  const data = (body: unknown) => ProviderHttp.field(body, "data")

  const outcome = (job: Task.UpstreamJob, task: unknown): Effect.Effect<Upstream.PollOutcome, UpstreamError> => {
    const status = ProviderHttp.stringField(task, "status")
    if (Option.isNone(status)) return Effect.fail(ProviderHttp.malformed(name, "a task status", task))
    const said = Option.getOrElse(ProviderHttp.stringField(task, "error"), () => "")
    switch (status.value) {
      case "SUCCESS": {
        const urls = ProviderHttp.field(ProviderHttp.field(task, "result"), "urls")
        return Array.isArray(urls) && urls.length > 0 && urls.every((url) => typeof url === "string")
          ? Effect.succeed({ _tag: "Completed", result: ProviderHttp.result(job, urls) })
          : Effect.fail(ProviderHttp.malformed(name, "result URLs", task))
      }
      case "FAILURE": {
        const reason = ProviderHttp.field(task, "failure_reason")
        return Effect.fail(
          new UpstreamError({
            message: `${name}: the task failed${said === "" ? "" : `: ${said}`}`,
            reason: typeof reason === "string" && failureReasons.has(reason) ? (reason as Task.FailureReason) : null,
            retryable: false
          })
        )
      }
      case "TIMEOUT":
      case "CANCELLED":
        return Effect.fail(new UpstreamError({ message: `${name}: the task ended ${status.value}${said === "" ? "" : `: ${said}`}`, reason: null, retryable: false }))
      default:
        return Effect.succeed(Progress.running(progressOf(task)))
    }
  }

  return {
    name,
    submit: (job, input, context) =>
      Effect.gen(function*() {
        // The gateway's model: the one the input names (the client's, by default), else the target's.
        const { model = job.model, ...rest } = input
        const answer = yield* ProviderHttp.send(name, {
          method: "POST",
          url: `${base}/task/submit`,
          headers: { ...headers, "idempotency-key": context.idempotencyKey },
          body: { model, input: rest, ...(context.webhookUrl === undefined ? {} : { callBackUrl: context.webhookUrl }) }
        })
        const id = ProviderHttp.stringField(data(answer.body), "taskId")
        if (Option.isNone(id)) return yield* Effect.fail(ProviderHttp.malformed(name, "a taskId", answer.body))
        return { _tag: "Accepted", upstreamId: Ids.UpstreamId.make(id.value) } satisfies Upstream.SubmitOutcome
      }),
    poll: (upstreamId, job) =>
      ProviderHttp.send(name, { method: "GET", url: `${base}/task/${encodeURIComponent(upstreamId)}`, headers }).pipe(
        Effect.flatMap((answer) => outcome(job.job, data(answer.body)))
      ),
    cancel: (upstreamId) =>
      ProviderHttp.send(name, { method: "POST", url: `${base}/task/${encodeURIComponent(upstreamId)}/cancel`, headers }).pipe(Effect.asVoid),
    verifyWebhook: (webhook) =>
      options.webhookSecret === undefined
        ? Effect.succeed(true)
        : Effect.map(Clock.currentTimeMillis, (now) => StandardWebhooks.verify(options.webhookSecret!, webhook.headers, webhook.body, now))
  }
}
