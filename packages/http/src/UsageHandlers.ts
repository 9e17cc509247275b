/**
 * Handlers of the usage reports (the customer's `usage` group) and the operator's insights
 * (`adminInsights`: every account's usage, the overview, the providers). Each reads the
 * store's aggregates (`UsageStore`) and folds them with core's rules (`Usage`, `Insights`),
 * with the composition's provider targets and running limits (`Insights.ProviderTargets`,
 * `Insights.RunningLimits`); a usage report answers CSV to `Accept: text/csv`.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import type { AdminAuth } from "@mediagate/core"
import { Accounts, AdminService, Api, Ids, Insights, Usage, UsageApi, UsageStore } from "@mediagate/core"
import { Clock, Effect, Either, Layer } from "effect"
import { answerErrors } from "./EnvelopeMiddleware.js"

/** Whether the client asked for CSV: `text/csv` in its Accept header with a quality above 0. */
export const wantsCsv = (accept: string | undefined): boolean =>
  accept !== undefined && accept.split(",").some((part) => {
    const [type, ...params] = part.trim().split(";").map((piece) => piece.trim().toLowerCase())
    const quality = params.find((param) => param.startsWith("q="))
    return type === "text/csv" && (quality === undefined || Number(quality.slice(2)) > 0)
  })

/** A report's window and groups from the request's parameters: 400 naming the rule otherwise. */
const queryOf = (params: UsageApi.UsageParams) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const window = yield* Either.match(Usage.window(params, now, Api.parseTimestamp), {
      onLeft: (msg) => Effect.fail(new Api.BadRequest({ code: 400, msg })),
      onRight: Effect.succeed
    })
    return { ...window, groupBy: params.group_by ?? "day" } as const
  })

/** The report, as JSON or, when asked, CSV. */
const answer = (report: Usage.UsageReport, accountId: string | null, accept: string | undefined) =>
  wantsCsv(accept)
    ? HttpServerResponse.text(Usage.csv(report), {
      contentType: "text/csv; charset=utf-8",
      headers: { "content-disposition": `attachment; filename="usage-${report.groupBy}.csv"` }
    })
    : UsageApi.usageWire(report, accountId)

/** The handler of the customer's usage report: the caller's own account only. */
export const usageLayer: Layer.Layer<
  HttpApiGroup.ApiGroup<"mediagate", "usage">,
  never,
  UsageStore.UsageStore | Api.Authorization
> = HttpApiBuilder.group(Api.MediagateApi, "usage", (handlers) =>
  Effect.gen(function*() {
    const store = yield* UsageStore.UsageStore
    return handlers.handle("usage", ({ request, urlParams }) =>
      Effect.gen(function*() {
        const account = yield* Accounts.CurrentAccount
        const query = yield* queryOf(urlParams)
        const rows = yield* store.usage({ ...query, accountId: account.id })
        return answer(Usage.report(query, rows), account.id, request.headers["accept"])
      }).pipe(answerErrors))
  }))

/** The handlers of the operator's insights. */
export const insightsLayer: Layer.Layer<
  HttpApiGroup.ApiGroup<"mediagate", "adminInsights">,
  never,
  UsageStore.UsageStore | AdminService.AdminService | AdminAuth.AdminAuthorization
> = HttpApiBuilder.group(Api.MediagateApi, "adminInsights", (handlers) =>
  Effect.gen(function*() {
    const store = yield* UsageStore.UsageStore
    const admin = yield* AdminService.AdminService
    return handlers
      .handle("usage", ({ request, urlParams: { account, ...params } }) =>
        Effect.gen(function*() {
          const query = yield* queryOf(params)
          const accountId = account === undefined ? undefined : Ids.AccountId.make(account)
          // An unknown account is 404, not an empty report.
          if (accountId !== undefined) yield* admin.getAccount(accountId)
          const rows = yield* store.usage({ ...query, accountId })
          return answer(Usage.report(query, rows), accountId ?? null, request.headers["accept"])
        }).pipe(
          Effect.catchTag("AdminNotFound", (error) => Effect.fail(new Api.NotFound({ code: 404, msg: error.message }))),
          answerErrors
        ))
      .handle("stats", () =>
        Effect.gen(function*() {
          const windows = Insights.statsWindows(yield* Clock.currentTimeMillis)
          return UsageApi.statsWire(Insights.overview(windows, yield* store.stats(windows)))
        }).pipe(answerErrors))
      .handle("providers", () =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const since = now - UsageApi.providerWindowMinutes * 60_000
          const rows = yield* store.providers({ now, since, recentFrom: now - 86_400_000 })
          const targetsOf = yield* Insights.ProviderTargets
          const targets = targetsOf === undefined ? undefined : yield* targetsOf
          return UsageApi.providersWire(Insights.providers(since, targets, rows, yield* Insights.RunningLimits))
        }).pipe(answerErrors))
  }))
