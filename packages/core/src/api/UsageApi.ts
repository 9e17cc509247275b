/**
 * Usage reports and the operator's insights (issue 35): the customer's `GET /api/v1/usage`
 * (tag `usage`), and under the tag `admin` the same report over every account or one
 * (`/admin/usage`), the overview's figures (`/admin/stats`) and the provider targets
 * (`/admin/providers`). The figures' rules are in `tasks/Usage.ts` and `tasks/Insights.ts`.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { isoTime, TaskStatus } from "../domain/Task.js"
import type { Overview, ProviderView } from "../tasks/Insights.js"
import type { UsageFigures, UsageReport } from "../tasks/Usage.js"
import { csvColumns, maxWindowDays } from "../tasks/Usage.js"
import { AdminAuthorization } from "./AdminAuth.js"
import { BadRequest, NotFound, okSchema } from "./Envelope.js"
import { parameterRule, parseTimestamp, strict } from "./Requests.js"

const additive = "Additive: not in the spec."
const adminOnly = `${additive} Takes an admin key; a customer key is 403.`

/** `from` or `to`: a date or a time with a time zone. */
const When = (description: string) =>
  Schema.String.pipe(Schema.filter((value) => parseTimestamp(value) !== undefined)).annotations({
    message: parameterRule("must be an ISO 8601 date (2026-11-01) or time with a time zone (2026-11-01T12:00:00Z)"),
    description
  })

const GroupBy = Schema.Literal("day", "model", "key").annotations({
  message: parameterRule("must be one of day, model, key"),
  description: "The groups: day (UTC), model (as submitted) or key (the API key's id). Default day."
})

const windowParams = {
  from: Schema.optional(When("The window's start, included: a date (its midnight UTC) or a time. Default: the first of `to`'s UTC month.")),
  to: Schema.optional(When(
    `The window's end, excluded, except that a date includes that day. Default: the end of the current UTC month. At most ${maxWindowDays} days after \`from\`.`
  )),
  group_by: Schema.optional(GroupBy)
}

/** Query parameters of the customer's usage report: each at most once, no others. */
export const UsageParams = Schema.Struct(windowParams).annotations(strict)
export type UsageParams = typeof UsageParams.Type

/** Query parameters of the admin usage report: the customer's, and the account. */
export const AdminUsageParams = Schema.Struct({
  ...windowParams,
  account: Schema.optional(Schema.String.pipe(Schema.minLength(1)).annotations({
    message: parameterRule("must be an account id"),
    description: "Only this account's usage (acct_...); an unknown account is 404. Default: every account."
  }))
}).annotations(strict)
export type AdminUsageParams = typeof AdminUsageParams.Type

const Tasks = Schema.Struct({
  total: Schema.Int,
  ...Object.fromEntries(TaskStatus.literals.map((status) => [status, Schema.Int])) as { [S in TaskStatus]: typeof Schema.Int }
}).annotations({
  identifier: "UsageTasks",
  description: "Tasks created in the window (or the group's day), counted by the status they have now, and their total."
})

const figures = {
  tasks: Tasks,
  spend_micro_usd: Schema.Int.annotations({
    description:
      "What the charges written in the window took out of the balance (micro-USD): the prices of tasks that succeeded, counted when they succeeded. The sum of the charges `credits show` lists for the same window."
  }),
  charges: Schema.Int.annotations({ description: "How many charges: tasks that succeeded in the window." }),
  refunds_micro_usd: Schema.Int.annotations({
    description:
      "What the releases written in the window gave back (micro-USD): the held prices of tasks that ended otherwise (failed, timed out, cancelled). Never taken from the balance, so never part of spend."
  }),
  releases: Schema.Int.annotations({ description: "How many releases." }),
  uploads: Schema.Int.annotations({
    description:
      "How many files were uploaded (`POST /files`) in the window, those deleted or expired since included. By model, they are in the null group (an upload has no model)."
  }),
  upload_bytes: Schema.Int.annotations({ description: "The bytes of those uploads, as stored." })
}

/** A group of a usage report. */
export const UsageGroup = Schema.Struct({
  group: Schema.NullOr(Schema.String).annotations({
    description: "The UTC day (2026-11-29), the model id or the key id; null for tasks, entries and uploads without one (keys given as configuration, tasks from before keys were recorded, uploads by model)."
  }),
  ...figures
}).annotations({ identifier: "UsageGroup" })

/** 200 answer of the usage reports. */
export const UsageResponse = okSchema(Schema.Struct({
  from: Schema.String.annotations({ description: "The window's start, included (ISO 8601 UTC)." }),
  to: Schema.String.annotations({ description: "The window's end, excluded (ISO 8601 UTC)." }),
  group_by: Schema.Literal("day", "model", "key"),
  account_id: Schema.NullOr(Schema.String).annotations({ description: "The account reported on; null for every account (admin only)." }),
  groups: Schema.Array(UsageGroup).annotations({ description: "Each group with something in the window, in order (days ascending); they sum to the totals." }),
  totals: Schema.Struct({
    ...figures,
    credits_micro_usd: Schema.Int.annotations({
      description: "What credits added to the balance in the window (micro-USD). Over all time, balance = credits - spend."
    })
  })
})).annotations({ identifier: "UsageResponse" })

const csvDescription =
  `With \`Accept: text/csv\`, the same report as CSV (RFC 4180): a header row, a row per group, then a row whose group is \`total\`. Columns: ${
    csvColumns.join(", ")
  } (credits_micro_usd only on the total row; group empty for none).`

/**
 * The CSV form of a 200 answer, beside its JSON: HttpApi puts two successes of one status under
 * one media type, so the document's operation is given it here.
 */
const withCsv = (operation: Record<string, any>) => {
  const ok = operation["responses"]?.["200"]
  if (ok?.content !== undefined) ok.content["text/csv"] = { schema: { type: "string", description: csvDescription } }
  return operation
}

const wireFigures = (figures: UsageFigures) => ({
  tasks: figures.tasks,
  spend_micro_usd: figures.spendMicroUsd,
  charges: figures.charges,
  refunds_micro_usd: figures.refundsMicroUsd,
  releases: figures.releases,
  uploads: figures.uploads,
  upload_bytes: figures.uploadBytes
})

/** A report in the shape the usage endpoints show. */
export const usageWire = (report: UsageReport, accountId: string | null): typeof UsageResponse.Type => ({
  code: 0,
  msg: "ok",
  data: {
    from: isoTime(report.from),
    to: isoTime(report.to),
    group_by: report.groupBy,
    account_id: accountId,
    groups: report.groups.map((group) => ({ group: group.group, ...wireFigures(group) })),
    totals: { ...wireFigures(report.totals), credits_micro_usd: report.totals.creditsMicroUsd }
  }
})

const usageDescription = (who: string) =>
  `${who} Tasks are those created in the window, counted by the status they have now; money is counted when its ledger entry is written (a task's charge when it succeeded); uploads when they were created, deleted since or not. ${csvDescription} A wrong parameter, or a window of more than ${maxWindowDays} days, is 400.`

/**
 * The customer's usage report. Its authentication (`Api.Authorization`) and prefix are added
 * where `MediagateApi` takes it in (Api.ts), which this module cannot import back.
 */
export class CustomerUsageGroup extends HttpApiGroup.make("usage")
  .add(
    HttpApiEndpoint.get("usage", "/usage")
      .setUrlParams(UsageParams)
      .addSuccess(UsageResponse)
      .annotate(OpenApi.Transform, withCsv)
      .addError(BadRequest)
      .annotate(OpenApi.Summary, "Report your tasks, spend, refunds and uploads by day, model or key")
      .annotate(OpenApi.Description, usageDescription(`${additive} Your account's usage over a window.`))
  )
{}

/** 200 answer of the overview. */
export const StatsResponse = okSchema(Schema.Struct({
  tasks_per_minute: Schema.Array(Schema.Struct({
    minute: Schema.String.annotations({ description: "The minute's start (ISO 8601 UTC)." }),
    ...Object.fromEntries(TaskStatus.literals.map((status) => [status, Schema.Int])) as { [S in TaskStatus]: typeof Schema.Int }
  })).annotations({ description: "Every minute of the last 60, oldest first: tasks created in it, by the status they have now." }),
  time_to_result: Schema.Array(Schema.Struct({
    model: Schema.String,
    count: Schema.Int.annotations({ description: "Tasks of the model created in the last 24 hours that succeeded." }),
    p50_ms: Schema.Int.annotations({ description: "Median time from submit to SUCCESS (nearest rank), milliseconds." }),
    p95_ms: Schema.Int.annotations({ description: "95th percentile (nearest rank), milliseconds." })
  })).annotations({ description: "By model as submitted, over tasks created in the last 24 hours." }),
  failures: Schema.Array(Schema.Struct({
    status: Schema.Literal("FAILURE", "TIMEOUT"),
    failure_reason: Schema.NullOr(Schema.String).annotations({ description: "The failure's class; null for an upstream failure without one." }),
    provider: Schema.NullOr(Schema.String).annotations({ description: "The provider the task ran on (its limit's name); null where the upstream names none (the simulator)." }),
    count: Schema.Int
  })).annotations({ description: "Tasks created in the last 24 hours that failed or timed out, by class and provider, most first." }),
  spend_per_day: Schema.Array(Schema.Struct({
    day: Schema.String.annotations({ description: "The UTC day (2026-11-29)." }),
    spend_micro_usd: Schema.Int.annotations({ description: "What the day's charges took out of balances, every account's." }),
    charges: Schema.Int
  })).annotations({ description: "Every UTC day of the last 30, today last." })
})).annotations({ identifier: "StatsResponse" })

/** The overview in the shape the stats endpoint shows. */
export const statsWire = (overview: Overview): typeof StatsResponse.Type => ({
  code: 0,
  msg: "ok",
  data: {
    tasks_per_minute: overview.perMinute.map((row) => ({ minute: isoTime(row.minute * 60_000), ...row.counts })),
    time_to_result: overview.timeToResult.map((row) => ({ model: row.model, count: row.count, p50_ms: row.p50, p95_ms: row.p95 })),
    failures: overview.failures.map((row) => ({
      status: row.status === "TIMEOUT" ? "TIMEOUT" : "FAILURE",
      failure_reason: row.reason,
      provider: row.provider,
      count: row.count
    })),
    spend_per_day: overview.spendPerDay.map((row) => ({ day: row.day, spend_micro_usd: row.spendMicroUsd, charges: row.charges }))
  }
})

/** How far back the providers page looks at attempts. */
export const providerWindowMinutes = 15

/** 200 answer of the providers page. */
export const ProvidersResponse = okSchema(Schema.Struct({
  window_minutes: Schema.Int.annotations({ description: "Attempts that ended in this many minutes before the answer count." }),
  providers: Schema.Array(Schema.Struct({
    name: Schema.String.annotations({ description: "The target's name, as tasks' attempts carry it (`fal:fal-ai/flux/dev`, `simulator`, or `upstream` for an upstream that names no targets)." }),
    provider: Schema.NullOr(Schema.String).annotations({ description: "Its provider (`fal`); null for the simulator." }),
    circuit: Schema.Struct({
      state: Schema.Literal("closed", "open", "half-open"),
      until: Schema.NullOr(Schema.String).annotations({ description: "While open: when its cool-down ends and a trial call may go (ISO 8601 UTC)." })
    }).annotations({ description: "This node's circuit breaker for the target (each node keeps its own)." }),
    attempts: Schema.Int.annotations({ description: "Attempts on it that ended in the window, every node's (from the tasks)." }),
    failed: Schema.Int.annotations({ description: "Of those, how many failed or timed out." }),
    error_rate: Schema.NullOr(Schema.Number).annotations({ description: "failed / attempts; null without attempts." }),
    transient_failures: Schema.Int.annotations({ description: "Calls within those attempts that failed and were retried." }),
    latency_p50_ms: Schema.NullOr(Schema.Int).annotations({ description: "Median attempt duration (start to end, nearest rank), ms; null without attempts." }),
    latency_p95_ms: Schema.NullOr(Schema.Int),
    running: Schema.Int.annotations({ description: "Tasks running on it now, every node's." }),
    limit: Schema.NullOr(Schema.Int).annotations({
      description: "The running limit they count against: the target's own (routes file), else its provider's, else the engine's total; null when not known."
    })
  }))
})).annotations({ identifier: "ProvidersResponse" })

/** The providers in the shape the providers endpoint shows. */
export const providersWire = (providers: ReadonlyArray<ProviderView>): typeof ProvidersResponse.Type => ({
  code: 0,
  msg: "ok",
  data: {
    window_minutes: providerWindowMinutes,
    providers: providers.map((view) => ({
      name: view.name,
      provider: view.provider,
      circuit: { state: view.circuit.state, until: view.circuit.until === null ? null : isoTime(view.circuit.until) },
      attempts: view.attempts,
      failed: view.failed,
      error_rate: view.errorRate,
      transient_failures: view.transientFailures,
      latency_p50_ms: view.latencyP50Ms,
      latency_p95_ms: view.latencyP95Ms,
      running: view.running,
      limit: view.limit === null || !Number.isFinite(view.limit) ? null : view.limit
    }))
  }
})

/** The operator's usage reports, overview and providers. */
export class AdminInsightsGroup extends HttpApiGroup.make("adminInsights")
  .add(
    HttpApiEndpoint.get("usage", "/admin/usage")
      .setUrlParams(AdminUsageParams)
      .addSuccess(UsageResponse)
      .annotate(OpenApi.Transform, withCsv)
      .addError(BadRequest)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Report every account's tasks, spend, refunds and uploads, or one account's, by day, model or key")
      .annotate(OpenApi.Description, usageDescription(`${adminOnly} The customer's usage report over every account, or one (\`account\`).`))
  )
  .add(
    HttpApiEndpoint.get("stats", "/admin/stats")
      .addSuccess(StatsResponse)
      .annotate(OpenApi.Summary, "The overview's figures: tasks per minute, time to result, failures, spend per day")
      .annotate(
        OpenApi.Description,
        `${adminOnly} SQL aggregates over time windows read on indexes (the last 60 minutes, 24 hours, 30 days): the cost follows the windows' tasks and entries, not the tables' size.`
      )
  )
  .add(
    HttpApiEndpoint.get("providers", "/admin/providers")
      .addSuccess(ProvidersResponse)
      .annotate(OpenApi.Summary, "Each provider target's circuit, recent latency and error rate, and what runs on it")
      .annotate(
        OpenApi.Description,
        `${adminOnly} Latency and error rate come from the attempts of tasks written in the last ${providerWindowMinutes} minutes (created in the last 24 hours, at most 5,000 tasks, the newest), so they hold across nodes; the circuit is this node's.`
      )
  )
  .middleware(AdminAuthorization)
  .prefix("/api/v1")
  .annotate(OpenApi.Title, "admin")
{}
